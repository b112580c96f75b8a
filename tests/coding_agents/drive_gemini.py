"""The pinned Gemini CLI (``gemini -p``, headless) writing its OWN plan with ``write_todos`` against a scripted
model: the run shared by the reader test (:mod:`.test_gemini_cli`) and the live board test
(``tests/carriers/web/test_agents_live.py``).

The script (:data:`MAIN`, :data:`SUB`): three plan writes (the third refused by Gemini CLI: two items
``in_progress``), a subagent (``invoke_agent`` with ``generalist``) that writes its own plan twice, to completion,
and ends with ``complete_task``, then a last write with Gemini's own ``cancelled`` and ``blocked``. What Gemini CLI
0.61 needs for it: ``write_todos`` is offered only to a Gemini 2.x non-preview model (``settings.json``
``model.name`` ``gemini-2.5-pro``), and a headless run offers it (and ``invoke_agent``'s tools) only with
``--yolo``: without it the model sees read-only tools alone.

``python -m tests.coding_agents.drive_gemini DIR`` runs the same and writes the scrubbed fixture the reader tests
use (``tests/fixtures/agent-plans/gemini-<version>/``): the run's folder replaced by :data:`PLACEHOLDER`.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.carriers.mcp.agents.common import Reply, Request, fake_model, run_cli
from tests.carriers.mcp.agents.gemini_fake import _reply, _side
from tests.carriers.mcp.agents.install import PINNED, binary

VERSION = PINNED["@google/gemini-cli"]
PLACEHOLDER = "/home/dev/gemini-run"
"""What the run's folder is replaced with in the fixture (no path of the machine that made it)."""
FINAL = "All done"


def todos(*pairs: tuple[str, str]) -> dict[str, Any]:
    """``write_todos`` arguments: ``(description, status)`` pairs."""
    return {"todos": [{"description": description, "status": status} for description, status in pairs]}


MAIN: list[tuple[str, dict[str, Any]]] = [
    ("write_todos", todos(("Read the bug report", "pending"), ("Fix the parser", "pending"),
                          ("Run the tests", "pending"))),
    ("write_todos", todos(("Read the bug report", "in_progress"), ("Fix the parser", "pending"),
                          ("Run the tests", "pending"))),
    ("write_todos", todos(("Read the bug report", "in_progress"), ("Fix the parser", "in_progress"),
                          ("Run the tests", "pending"))),
    ("invoke_agent", {"agent_name": "generalist", "prompt": "Check the docs"}),
    ("write_todos", todos(("Read the bug report", "completed"), ("Fix the parser", "cancelled"),
                          ("Run the tests", "blocked"))),
]
"""The main agent's calls, one per model turn; the third is refused (two items ``in_progress``)."""
SUB: list[tuple[str, dict[str, Any]]] = [
    ("write_todos", todos(("Open the docs", "in_progress"), ("Note the gaps", "pending"))),
    ("write_todos", todos(("Open the docs", "completed"), ("Note the gaps", "completed"))),
    ("complete_task", {"result": {"response": "The docs are fine"}}),
]
"""The subagent's calls (its requests offer ``complete_task``)."""
MAIN_PLAN = [("Read the bug report", "completed"), ("Fix the parser", "cancelled"), ("Run the tests", "blocked")]
SUB_PLAN = [("Open the docs", "completed"), ("Note the gaps", "completed")]


def _tools(body: Any) -> set[str]:
    return {declaration.get("name") for tool in body.get("tools") or []
            for declaration in tool.get("functionDeclarations", [])}


def _results(body: Any) -> int:
    return sum("functionResponse" in part for content in body.get("contents", []) for part in content.get("parts", []))


def answer(request: Request) -> Reply:
    """The scripted model: a turn offering ``write_todos`` gets the next call of its script (the subagent's when it
    offers ``complete_task``), counted by the function results it carries; other requests get side answers."""
    path = request.path.split("?")[0]
    if request.method != "POST" or ":" not in path:
        return Reply(404, {"error": {"code": 404, "message": path, "status": "NOT_FOUND"}})
    if path.endswith(":countTokens"):
        return Reply(body={"totalTokens": 10})
    names = _tools(request.body)
    if "write_todos" not in names:
        return _side(request)
    script = SUB if "complete_task" in names else MAIN
    done = _results(request.body)
    if done < len(script):
        name, args = script[done]
        return _reply(request, [{"functionCall": {"name": name, "args": args}}])
    return _reply(request, [{"text": FINAL}])


SETTINGS = {
    "model": {"name": "gemini-2.5-pro"},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "ide": {"enabled": False},
}
"""A model that is offered ``write_todos``, API-key auth against the fake, nothing fetched or reported."""


def run_gemini(gemini: Path, base: Path) -> Path:
    """Run the script in ``base`` (``home``, ``project``); the Gemini home (``home/.gemini``) it wrote."""
    home, cwd = base / "home", base / "project"
    cwd.mkdir(parents=True)
    (home / ".gemini").mkdir(parents=True, exist_ok=True)  # the live board test watches it before the run
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS), encoding="utf-8")
    with fake_model(answer) as model:
        env = {"GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "fake-key", "GEMINI_CLI_TRUST_WORKSPACE": "true",
               "GEMINI_CLI_HOME": str(home)}
        run = run_cli([gemini, "-p", "Fix the bug", "--yolo"], cwd=cwd, home=home, env=env)
    assert run.returncode == 0 and run.stdout.strip() == FINAL, f"Gemini CLI {VERSION}: {run}"
    return home / ".gemini"


def scrub(home: Path, into: Path, base: Path) -> None:
    """Copy the chats and ``.project_root`` files of ``home`` into ``into``, ``base`` replaced by the placeholder
    in their text and names (the settings and logs are not fixtures)."""
    for source in sorted(home.rglob("*")):
        relative = source.relative_to(home)
        if source.is_dir() or relative.parts[0] != "tmp" or "logs" in relative.parts:
            continue
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text(encoding="utf-8")
        target.write_text(text.replace(str(base), PLACEHOLDER), encoding="utf-8")


if __name__ == "__main__":
    found = binary("gemini")
    assert not isinstance(found, str), found
    out = Path(sys.argv[1]) / f"gemini-{VERSION}"
    with tempfile.TemporaryDirectory() as folder:
        home = run_gemini(found, Path(folder))
        shutil.rmtree(out, ignore_errors=True)
        scrub(home, out, Path(folder))
    print(f"wrote {out}")
