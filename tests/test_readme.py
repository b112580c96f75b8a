"""Every ``python`` snippet in the README runs as written and prints the ``text`` block that follows it."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests import needs

DOC = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)
FRAMEWORKS = {"agents": "agents", "langchain_core": "langchain_core", "pydantic_ai": "pydantic_ai",
              "google.adk": "google.adk"}


def snippets() -> list[tuple[str, str | None]]:
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(DOC.read_text(encoding="utf-8"))]
    found: list[tuple[str, str | None]] = []
    for index, (lang, body) in enumerate(blocks):
        if lang != "python":
            continue
        after = blocks[index + 1] if index + 1 < len(blocks) else None
        found.append((body, after[1] if after is not None and after[0] == "text" else None))
    return found


SNIPPETS = snippets()


def test_the_doc_has_a_snippet_per_framework() -> None:
    sources = "\n".join(code for code, _ in SNIPPETS)
    for module in ("dsh_todo.adapters.openai_agents", "dsh_todo.adapters.langchain", "dsh_todo.adapters.pydantic_ai",
                   "dsh_todo.adapters.google_adk"):
        assert f"from {module} import" in sources
    assert all(expected is not None for _, expected in SNIPPETS), "every snippet shows what it prints"


@pytest.mark.parametrize(("code", "expected"), SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_snippet_runs_and_prints_what_the_doc_says(code: str, expected: str | None, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for module in FRAMEWORKS:
        if re.search(rf"^from {module}[. ]|^import {module}\b", code, re.M):
            needs.module(module)
    monkeypatch.chdir(tmp_path)  # persisted snippets write under the current directory
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{DOC.name} snippet", "exec"), {"__name__": "__main__"})
    if expected is not None:
        assert out.getvalue() == expected
