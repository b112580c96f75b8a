"""Our reader of opencode's plans against the store opencode 1.18.33 wrote (tests/fixtures/agent-plans/
opencode-1.18.33/opencode.db, made by ``python -m tests.coding_agents.drive_opencode``, checkpointed): the exact
plans in ``position`` order, statuses kept as written, the refused write not counted, the subagent under its parent,
a store this version cannot read, and, in each way the store can lie on disk (no ``-wal``; ``-wal`` and ``-shm``
with opencode writing; ``-wal`` alone), nothing written, locked for writing or created beside it."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_todo.coding_agents import reader
from dsh_todo.coding_agents.base import AgentSession
from dsh_todo.coding_agents.opencode import READER
from tests.coding_agents.test_gemini import pairs, snapshot

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agent-plans" / "opencode-1.18.33"
STORE = FIXTURE / "opencode.db"
MAIN_ID = "ses_db6288be3ffetQBij5NFdY90vd"
SUB_ID = "ses_db6286e56fferwqUWz8KY5sh3H"
WRITES = [
    [("Read the bug report", "pending"), ("Fix the parser", "pending"), ("Run the tests", "pending")],
    [("Read the bug report", "in_progress"), ("Fix the parser", "pending"), ("Run the tests", "pending")],
    [("Read the bug report", "completed"), ("Fix the parser", "cancelled"), ("Run the tests", "blocked")],
]
"""The main session's accepted writes, in order (its third call, a status that is no string, opencode refused)."""
SUB_WRITES = [[("Open the docs", "in_progress"), ("Note the gaps", "pending")],
              [("Open the docs", "completed"), ("Note the gaps", "completed")]]


def sessions(path: Path = STORE) -> dict[str, AgentSession]:
    return {session.id: session for session in READER.read(path)}


def copy(tmp_path: Path) -> Path:
    """The fixture store in a home of its own under ``tmp_path``."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(STORE, home / STORE.name)
    return home / STORE.name


def test_the_registry_gives_this_reader() -> None:
    assert reader("opencode") is READER and READER.agent == "opencode"


def test_the_store_holds_the_session_and_its_subagent() -> None:
    found = READER.read(STORE)
    assert [session.id for session in found] == [MAIN_ID, SUB_ID]
    main, sub = found
    assert (main.agent, main.path, main.parent, main.title) == ("opencode", STORE, None, "Plan the fix")
    assert (sub.parent, sub.title) == (MAIN_ID, "Check the docs (@general subagent)")
    assert main.project == sub.project == "/home/dev/opencode-run/project"


def test_the_plan_is_the_todo_table_in_position_order_statuses_as_written() -> None:
    main, sub = sessions()[MAIN_ID], sessions()[SUB_ID]
    assert pairs(main.plan) == WRITES[-1]
    assert pairs(sub.plan) == SUB_WRITES[-1]


def test_the_writes_are_the_completed_todowrite_calls_in_order() -> None:
    main, sub = sessions()[MAIN_ID], sessions()[SUB_ID]
    assert [pairs(write.items) for write in main.writes] == WRITES
    assert [pairs(write.items) for write in sub.writes] == SUB_WRITES
    first = main.writes[0]
    assert first.tool == "todowrite" and first.at is not None and first.at < main.writes[1].at  # type: ignore[operator]
    assert first.arguments == {"todos": [{"content": "Read the bug report", "status": "pending", "priority": "high"},
                                         {"content": "Fix the parser", "status": "pending", "priority": "medium"},
                                         {"content": "Run the tests", "status": "pending", "priority": "low"}]}
    assert isinstance(first.result, str) and '"Read the bug report"' in first.result
    assert main.updated >= main.writes[-1].at  # type: ignore[operator]
    assert main.turn_open is False and sub.turn_open is False


def test_any_status_is_kept_and_a_cleared_list_is_no_plan(tmp_path: Path) -> None:
    """opencode checks no status word: whatever its model wrote is what the board shows."""
    store = copy(tmp_path)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE todo SET status = 'someday' WHERE session_id = ? AND position = 2", (MAIN_ID,))
        db.execute("DELETE FROM todo WHERE session_id = ?", (SUB_ID,))
    db.close()
    assert pairs(sessions(store)[MAIN_ID].plan) == [*WRITES[-1][:2], ("Run the tests", "someday")]
    assert sessions(store)[SUB_ID].plan is None


def test_a_turn_is_open_until_the_model_s_last_message_completes_without_a_call(tmp_path: Path) -> None:
    """The run's last message of each session is the model's final text (``finish`` ``stop``); without it the last
    is a tool-call step, and the turn reads as still running."""
    store = copy(tmp_path)
    with sqlite3.connect(store) as db:
        db.execute("DELETE FROM message WHERE id = (SELECT id FROM message WHERE session_id = ?"
                   " ORDER BY time_created DESC LIMIT 1)", (MAIN_ID,))
        db.execute("DELETE FROM message WHERE session_id = ?", (SUB_ID,))
    db.close()
    assert sessions(store)[MAIN_ID].turn_open is True
    assert sessions(store)[SUB_ID].turn_open is None


def test_session_paths_and_homes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    store = copy(tmp_path)
    home = store.parent
    for other in ("opencode.db-wal", "opencode.db-shm", "opencode-beta.db", "notes.db"):
        (home / other).write_bytes(b"")
    monkeypatch.delenv("OPENCODE_DB", raising=False)
    assert READER.session_paths(home) == [home / "opencode-beta.db", store]
    monkeypatch.setenv("OPENCODE_DB", "notes.db")
    assert READER.session_paths(home) == [home / "opencode-beta.db", store, home / "notes.db"]
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert READER.default_home() == tmp_path / "data" / "opencode"
    monkeypatch.setenv("OPENCODE_DB", str(STORE))  # absolute: opencode's own store, so the default home's only
    assert READER.session_paths(tmp_path / "data" / "opencode") == [STORE]
    assert READER.session_paths(home) == [home / "opencode-beta.db", store]
    assert READER.session_paths(tmp_path / "missing") == [] and not (tmp_path / "missing").exists()
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert READER.default_home() == tmp_path / ".local" / "share" / "opencode"


def test_a_checkpointed_store_is_read_without_creating_a_wal_or_shm(tmp_path: Path) -> None:
    home = copy(tmp_path).parent
    before = snapshot(home)
    assert [pairs(session.plan) for session in READER.read(home / STORE.name)] == [WRITES[-1], SUB_WRITES[-1]]
    assert snapshot(home) == before and sorted(path.name for path in home.iterdir()) == ["opencode.db"]


WRITER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA wal_autocheckpoint = 0")
db.execute("UPDATE todo SET status = 'completed' WHERE session_id = ? AND position = 1", (sys.argv[2],))
db.commit()
print("written", flush=True)
sys.stdin.readline()
"""
"""A stand-in for a running opencode: another process holding the store open in WAL mode after one write."""


def test_a_store_being_written_is_read_through_a_read_only_index_and_left_untouched(tmp_path: Path) -> None:
    """``-wal`` and ``-shm`` present, their writer alive in another process: the reader sees the write still in the
    ``-wal`` and changes no byte (a plain ``mode=ro`` connection would rewrite the ``-shm``)."""
    store = copy(tmp_path)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store), MAIN_ID], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
        assert Path(f"{store}-wal").stat().st_size > 0 and Path(f"{store}-shm").exists()
        before = snapshot(store.parent)
        assert pairs(sessions(store)[MAIN_ID].plan) == [WRITES[-1][0], ("Fix the parser", "completed"),
                                                        WRITES[-1][2]]
        assert snapshot(store.parent) == before
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        writer.wait(timeout=30)


def test_a_wal_without_its_index_is_read_from_a_private_copy(tmp_path: Path) -> None:
    """``-wal`` alone (copied away, or its ``-shm`` removed): SQLite would create the ``-shm`` to read it, so the
    reader reads a copy of the two files instead, and the home keeps exactly its two files."""
    store = copy(tmp_path)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store), MAIN_ID], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
        home = tmp_path / "copied"
        home.mkdir()
        shutil.copyfile(store, home / store.name)
        shutil.copyfile(f"{store}-wal", home / f"{store.name}-wal")
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        writer.wait(timeout=30)
    before = snapshot(home)
    assert pairs(sessions(home / store.name)[MAIN_ID].plan)[1] == ("Fix the parser", "completed")  # type: ignore[index]
    assert snapshot(home) == before and sorted(path.name for path in home.iterdir()) == ["opencode.db",
                                                                                         "opencode.db-wal"]


def test_a_file_that_is_no_store_names_opencode_and_the_file(tmp_path: Path) -> None:
    text = tmp_path / "opencode.db"
    text.write_text("not a database, but long enough to have a header of its own " * 4, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^opencode: cannot read {text}: "):
        READER.read(text)
    empty = tmp_path / "opencode-empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(ValueError, match=f"^opencode: cannot read {empty}: no such table: todo"):
        READER.read(empty)
    with pytest.raises(ValueError, match=f"^opencode: cannot read {tmp_path / 'gone.db'}: "):
        READER.read(tmp_path / "gone.db")


def test_a_todowrite_of_another_shape_names_opencode_and_the_file(tmp_path: Path) -> None:
    """A release that renamed ``content`` must fail loudly, never show nothing."""
    store = copy(tmp_path)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE part SET data = replace(data, '\"content\"', '\"text\"')")
    db.close()
    with pytest.raises(ValueError, match=f"^opencode: cannot read {store}: a todowrite call whose input.todos"):
        READER.read(store)
