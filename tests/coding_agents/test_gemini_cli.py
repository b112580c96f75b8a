"""The pinned Gemini CLI (``gemini -p``, headless) writing its OWN plan with ``write_todos`` against a scripted
model (the run of :mod:`.drive_gemini`), then our reader reading the files it wrote: a new Gemini CLI that changes
its format fails here, naming the CLI and the file, instead of showing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_todo.coding_agents.gemini import READER
from tests import needs
from tests.carriers.mcp.agents.install import binary
from tests.coding_agents.drive_gemini import MAIN, MAIN_PLAN, SUB_PLAN, VERSION, run_gemini
from tests.coding_agents.test_gemini import snapshot

pytestmark = pytest.mark.slow


def _gemini() -> Path:
    found = binary("gemini")
    if isinstance(found, str):
        needs.unavailable(f"Gemini CLI {VERSION}: {found}")
        raise AssertionError("unreachable")
    return found


def test_gemini_cli_writes_a_plan_our_reader_reads_exactly(tmp_path: Path) -> None:
    home = run_gemini(_gemini(), tmp_path)
    paths = READER.session_paths(home)
    assert len(paths) == 2, f"Gemini CLI {VERSION} wrote {paths} under {home}: expected a chat and a subagent's"
    before = snapshot(home)
    sessions = {session.extra.get("kind"): session for path in paths for session in READER.read(path)}
    assert snapshot(home) == before, f"reading Gemini CLI {VERSION}'s home changed it"
    main, sub = sessions["main"], sessions["subagent"]
    where = f"Gemini CLI {VERSION}, {main.path}"
    assert [(item.content, item.status) for item in main.plan or ()] == MAIN_PLAN, where
    accepted = [[(todo["description"], todo["status"]) for todo in MAIN[number][1]["todos"]] for number in (0, 1)]
    assert [[(item.content, item.status) for item in write.items] for write in main.writes] == [
        *accepted, MAIN_PLAN], f"{where}: the refused write counted, or a write lost"
    assert main.parent is None and main.project == str(tmp_path / "project") and main.title == "Fix the bug", where
    assert main.turn_open is False, where
    where = f"Gemini CLI {VERSION}, {sub.path}"
    assert [(item.content, item.status) for item in sub.plan or ()] == SUB_PLAN, where
    assert len(sub.writes) == 2 and sub.parent == main.id and sub.title == "Check the docs", where
