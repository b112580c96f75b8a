"""The pinned opencode (``opencode run``, headless) writing its OWN plan with ``todowrite`` against a scripted model
(the run of :mod:`.drive_opencode`), then our reader reading the store it wrote: a new opencode that changes its
format fails here, naming the CLI and the file, instead of showing nothing.

opencode leaves its store in WAL mode with ``-wal`` and ``-shm`` beside it after it exits, so the run's home is the
case a reader must not touch: the test snapshots it before and after our reader.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_todo.coding_agents.opencode import READER
from tests import needs
from tests.carriers.mcp.agents.install import binary
from tests.coding_agents.drive_opencode import MAIN, MAIN_PLAN, SUB_PLAN, SUB_PROMPT, VERSION, run_opencode
from tests.coding_agents.test_gemini import snapshot

pytestmark = pytest.mark.slow


def _opencode() -> Path:
    found = binary("opencode")
    if isinstance(found, str):
        needs.unavailable(f"opencode {VERSION}: {found}")
        raise AssertionError("unreachable")
    return found


def test_opencode_writes_a_plan_our_reader_reads_exactly_and_untouched(tmp_path: Path) -> None:
    home = run_opencode(_opencode(), tmp_path)
    [store] = READER.session_paths(home)
    assert Path(f"{store}-wal").exists() and Path(f"{store}-shm").exists(), (
        f"opencode {VERSION} no longer leaves {store} in WAL mode: the read-only cases of decision 0048 need a look")
    before = snapshot(home)
    sessions = READER.read(store)
    assert snapshot(home) == before, f"reading opencode {VERSION}'s {store} changed its home"
    where = f"opencode {VERSION}, {store}"
    [main] = [session for session in sessions if session.parent is None]
    [sub] = [session for session in sessions if session.parent is not None]
    assert [(item.content, item.status) for item in main.plan or ()] == MAIN_PLAN, where
    accepted = [[(todo["content"], todo["status"]) for todo in MAIN[number][1]["todos"]] for number in (0, 1)]
    assert [[(item.content, item.status) for item in write.items] for write in main.writes] == [
        *accepted, MAIN_PLAN], f"{where}: the refused write counted, or a write lost"
    assert main.project == str(tmp_path / "project") and main.title == "Plan the fix", where
    assert [(item.content, item.status) for item in sub.plan or ()] == SUB_PLAN, where
    assert len(sub.writes) == 2 and sub.parent == main.id and sub.title == f"{SUB_PROMPT} (@general subagent)", where
