"""The pinned opencode (``opencode run``, headless) writing its OWN plan with ``todowrite`` against a scripted model
(streamed chat completions): the run shared by the reader test (:mod:`.test_opencode_cli`) and the live board test
(``tests/carriers/web/test_agents_live.py``).

The script (:data:`MAIN`, :data:`SUB`): two plan writes, a third refused by opencode (a status that is not a string:
its schema's only check), a subagent (the ``task`` tool, ``general``) that writes its own plan twice, to completion,
then a last write with ``cancelled`` and ``blocked``. opencode 1.18 denies a subagent ``todowrite`` unless that
agent's permission names it, so the project's ``opencode.json`` allows it for ``general``.

``python -m tests.coding_agents.drive_opencode DIR`` runs the same and writes the fixture the reader tests use
(``tests/fixtures/agent-plans/opencode-<version>/opencode.db``): checkpointed (no ``-wal`` needed), the run's folder
replaced by :data:`PLACEHOLDER` in every text column, vacuumed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from dsh_todo.coding_agents.opencode import READER
from tests.carriers.mcp.agents.common import Reply, Request, fake_model, run_cli
from tests.carriers.mcp.agents.install import PINNED, binary
from tests.carriers.mcp.agents.openai_fake import MODEL, _chunk, _usage, chat_tools, chat_turns
from tests.carriers.mcp.agents.test_opencode import QUIET, plugin_dependency_installed

VERSION = PINNED["opencode-ai"]
PLACEHOLDER = "/home/dev/opencode-run"
"""What the run's folder is replaced with in the fixture (no path of the machine that made it)."""
FINAL = "All done"
SUB_PROMPT = "Check the docs"


def todos(*items: tuple[str, str, str]) -> dict[str, Any]:
    """``todowrite`` arguments: ``(content, status, priority)`` triples."""
    return {"todos": [{"content": content, "status": status, "priority": priority}
                      for content, status, priority in items]}


MAIN: list[tuple[str, dict[str, Any]]] = [
    ("todowrite", todos(("Read the bug report", "pending", "high"), ("Fix the parser", "pending", "medium"),
                        ("Run the tests", "pending", "low"))),
    ("todowrite", todos(("Read the bug report", "in_progress", "high"), ("Fix the parser", "pending", "medium"),
                        ("Run the tests", "pending", "low"))),
    ("todowrite", {"todos": [{"content": "Read the bug report", "status": 7}]}),
    ("task", {"description": SUB_PROMPT, "prompt": SUB_PROMPT, "subagent_type": "general"}),
    ("todowrite", todos(("Read the bug report", "completed", "high"), ("Fix the parser", "cancelled", "medium"),
                        ("Run the tests", "blocked", "low"))),
]
"""The main agent's calls, one per model turn; the third is refused by opencode's schema."""
SUB: list[tuple[str, dict[str, Any]]] = [
    ("todowrite", todos(("Open the docs", "in_progress", "high"), ("Note the gaps", "pending", "low"))),
    ("todowrite", todos(("Open the docs", "completed", "high"), ("Note the gaps", "completed", "low"))),
]
"""The subagent's calls (its conversation starts with :data:`SUB_PROMPT`)."""
MAIN_PLAN = [("Read the bug report", "completed"), ("Fix the parser", "cancelled"), ("Run the tests", "blocked")]
SUB_PLAN = [("Open the docs", "completed"), ("Note the gaps", "completed")]


def _first_prompt(body: Any) -> str:
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
    return ""


def answer(request: Request) -> Reply:
    """The scripted model: a request offering ``todowrite`` gets the next call of its script (the subagent's when
    its conversation starts with :data:`SUB_PROMPT`), counted by the tool results it carries; a request offering no
    tool (the session's title) gets a text."""
    path = request.path.split("?", 1)[0].rstrip("/")
    if request.method == "GET" and path.endswith("/models"):
        return Reply(body={"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                                       "owned_by": "dsh-todo"}]})
    body = request.body if isinstance(request.body, dict) else {}
    names = [tool["name"] for tool in chat_tools(body)]
    done = len(chat_turns(body))
    script = (SUB if _first_prompt(body) == SUB_PROMPT else MAIN) if "todowrite" in names else None
    if script is None or done >= len(script):
        text = FINAL if script is not None else "Plan the fix"
        frames = [_chunk(done, {"role": "assistant", "content": ""}), _chunk(done, {"content": text}),
                  _chunk(done, {}, "stop")]
    else:
        name, args = script[done]
        call = {"index": 0, "id": f"call_{'sub' if script is SUB else 'main'}_{done}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}
        frames = [_chunk(done, {"role": "assistant", "content": None, "tool_calls": [call]}),
                  _chunk(done, {}, "tool_calls")]
    return Reply(events=[*frames, _usage(done), b"data: [DONE]\n\n"])


def run_opencode(opencode: Path, base: Path) -> Path:
    """Run the script in ``base`` (``home``, ``project``); opencode's data folder (its home for our reader)."""
    home, cwd = base / "home", base / "project"
    cwd.mkdir(parents=True)
    plugin_dependency_installed(home)
    with fake_model(answer) as model:
        config = {"provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "fake model",
                                        "options": {"baseURL": f"{model.url}/v1", "apiKey": "dummy"},
                                        "models": {MODEL: {"name": "fake model"}}}},
                  "model": f"fake/{MODEL}", "agent": {"general": {"permission": {"todowrite": "allow"}}}}
        (cwd / "opencode.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        run = run_cli([opencode, "run", "Fix the bug"], cwd=cwd, home=home, env=QUIET)
    assert run.returncode == 0 and run.stdout.strip() == FINAL, f"opencode {VERSION}: {run}"
    return home / ".local" / "share" / "opencode"


def scrub(store: Path, into: Path, base: Path) -> None:
    """Copy ``store`` (with its ``-wal``) to ``into``, checkpointed into one file, ``base`` replaced by the
    placeholder in every text column, vacuumed."""
    into.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / store.name
        shutil.copyfile(store, copy)
        shutil.copyfile(f"{store}-wal", f"{copy}-wal")
        db = sqlite3.connect(copy)
        db.execute("PRAGMA journal_mode = DELETE")
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in [row[1] for row in db.execute(f'PRAGMA table_info("{table}")') if row[2].lower() == "text"]:
                for old, new in ((str(base), PLACEHOLDER), (str(base).lstrip("/"), PLACEHOLDER.lstrip("/"))):
                    db.execute(f'UPDATE "{table}" SET "{column}" = replace("{column}", ?, ?)', (old, new))
        db.commit()
        db.execute("VACUUM")
        db.close()
        shutil.copyfile(copy, into)


if __name__ == "__main__":
    found = binary("opencode")
    assert not isinstance(found, str), found
    out = Path(sys.argv[1]) / f"opencode-{VERSION}" / "opencode.db"
    with tempfile.TemporaryDirectory() as folder:
        [store] = READER.session_paths(run_opencode(found, Path(folder)))
        scrub(store, out, Path(folder))
    print(f"wrote {out}")
