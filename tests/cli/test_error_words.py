"""User-facing errors say what the file is and what to do, in no internal words (issue 23).

"session artifact", "flat-file layout", "persisted log", "load/resume": the harness's own vocabulary, which a person
reading ``dsh-todo plan``'s refusal cannot act on.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dsh_todo.cli import main
from dsh_todo.harness.errors import SessionExistsError
from dsh_todo.standard import open_runtime
from tests.conftest import REPO_ROOT
from tests.crafted import B_ID, flat_layout

INTERNAL = ("session artifact", "flat-file layout", "persisted log", "load/resume", "no longer persisted")


def message_texts(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module that is not a docstring (f-strings' literal parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_message_uses_internal_words() -> None:
    """Repro: ``grep -rn 'session artifact\\|flat-file layout\\|persisted log' src`` found five messages."""
    found = [f"{path.relative_to(REPO_ROOT)}:{line}: {text}"
             for path in sorted((REPO_ROOT / "src" / "dsh_todo").rglob("*.py"))
             for line, text in message_texts(path) if any(word in text for word in INTERNAL)]
    assert found == []


def test_a_log_in_the_flat_layout_says_where_to_move_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo plan`` of a ``<project>/<id>.jsonl`` log said "session artifact "…" uses the unsupported
    flat-file layout; use a separate root or move it into a project/session directory before loading"."""
    flat = flat_layout(tmp_path)
    assert main(["plan", "--root", str(tmp_path), B_ID]) == 2
    target = flat.parent / B_ID / "session.jsonl"
    assert capsys.readouterr().err == (
        f'dsh-todo plan: "{flat}" is a session log in the retired flat layout; move it to "{target}" to read it\n')


def test_creating_a_session_that_has_a_log_says_to_load_it(tmp_path: Path) -> None:
    """Repro: "session "s" already has a persisted log on disk; load/resume it instead of creating"."""
    ctx = open_runtime(tmp_path)
    try:
        ctx.sessions.create("s", cwd="/p").append("turn/start", {"turn": 1})
        ctx.session_persistence.flush()
        ctx.session_persistence.release("s")
    finally:
        ctx.dispose()
    ctx = open_runtime(tmp_path)
    try:
        with pytest.raises(SessionExistsError) as raised:
            ctx.sessions.create("s", cwd="/p")
    finally:
        ctx.dispose()
    assert str(raised.value) == 'session "s" already has a log on disk; load it to go on with it, or pick another id'
