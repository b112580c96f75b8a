"""Our reader of Gemini CLI's plans against the chat files Gemini CLI 0.61.0 wrote (tests/fixtures/agent-plans/
gemini-0.61.0, made by ``python -m tests.coding_agents.drive_gemini``): the exact plans, Gemini's own statuses
kept, the refused write not counted, the subagent under its parent, the replay rules (a message written twice, a
rewind, a ``$set`` of messages), a file this version cannot read, bounded memory, and nothing written."""

from __future__ import annotations

import hashlib
import json
import shutil
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsh_todo.coding_agents import reader
from dsh_todo.coding_agents.base import AgentSession
from dsh_todo.coding_agents.gemini import READER

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agent-plans" / "gemini-0.61.0"
MAIN_ID = "ef5e5846-aa2f-477d-9169-af826a016186"
SUB_ID = "0b87159c-5f83-4ebe-ba36-339c8f9ebe58"
CHATS = FIXTURE / "tmp" / "project" / "chats"
MAIN_FILE = CHATS / "session-2026-12-06T05-32-ef5e5846.jsonl"
SUB_FILE = CHATS / MAIN_ID / f"{SUB_ID}.jsonl"
WRITES = [
    [("Read the bug report", "pending"), ("Fix the parser", "pending"), ("Run the tests", "pending")],
    [("Read the bug report", "in_progress"), ("Fix the parser", "pending"), ("Run the tests", "pending")],
    [("Read the bug report", "completed"), ("Fix the parser", "cancelled"), ("Run the tests", "blocked")],
]
"""The main session's accepted writes, in order (its third call, two items in_progress, Gemini CLI refused)."""
SUB_WRITES = [[("Open the docs", "in_progress"), ("Note the gaps", "pending")],
              [("Open the docs", "completed"), ("Note the gaps", "completed")]]


def snapshot(home: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``home``: its size, mtime (ns) and content digest, by relative name."""
    return {str(path.relative_to(home)): (path.stat().st_size, path.stat().st_mtime_ns,
                                          hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(home.rglob("*")) if path.is_file()}


def pairs(plan: object) -> list[tuple[str, str]] | None:
    """A plan as ``(content, status)`` pairs (``None`` stays ``None``)."""
    if plan is None:
        return None
    assert isinstance(plan, tuple)
    return [(item.content, item.status) for item in plan]


def one(path: Path) -> AgentSession:
    [session] = READER.read(path)
    return session


def test_the_registry_gives_this_reader() -> None:
    assert reader("gemini") is READER and READER.agent == "gemini"


def test_the_sessions_are_the_chats_and_their_subagents_chats() -> None:
    assert READER.session_paths(FIXTURE) == [SUB_FILE, MAIN_FILE]


def test_the_main_session_s_plan_is_its_last_accepted_write_statuses_as_written() -> None:
    session = one(MAIN_FILE)
    assert (session.agent, session.id, session.path, session.parent) == ("gemini", MAIN_ID, MAIN_FILE, None)
    assert pairs(session.plan) == WRITES[-1]
    assert [pairs(write.items) for write in session.writes] == WRITES
    assert session.project == "/home/dev/gemini-run/project" and session.title == "Fix the bug"
    assert session.turn_open is False and session.updated == MAIN_FILE.stat().st_mtime
    first = session.writes[0]
    assert first.tool == "write_todos"
    assert first.at == datetime(2026, 12, 6, 5, 32, 29, 44000, tzinfo=UTC).timestamp()
    assert first.arguments == {"todos": [{"description": content, "status": status} for content, status in WRITES[0]]}
    assert "Successfully updated the todo list" in json.dumps(first.result)


def test_the_subagent_is_under_its_parent_with_its_own_plan() -> None:
    session = one(SUB_FILE)
    assert (session.id, session.parent, session.extra) == (SUB_ID, MAIN_ID, {"kind": "subagent"})
    assert [pairs(write.items) for write in session.writes] == SUB_WRITES
    assert pairs(session.plan) == SUB_WRITES[-1]
    assert session.title == "Check the docs" and session.turn_open is False
    assert session.project == "/home/dev/gemini-run/project"


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def message_of_write(path: Path, number: int) -> str:
    """The id of the message carrying the ``number``-th accepted ``write_todos`` call (0-based)."""
    found = [record["id"] for record in map(json.loads, lines(path)) if any(
        call["name"] == "write_todos" and call["status"] == "success" for call in record.get("toolCalls", []))]
    return str(found[number])


def test_a_message_written_again_replaces_itself_so_a_file_read_mid_run_is_what_the_cli_would_load(
        tmp_path: Path) -> None:
    """Gemini CLI writes a model message first without its tool calls, then again (same id) with them: read after
    the first, the plan is not there yet; after the second, it is, once."""
    text = lines(MAIN_FILE)
    first_call = next(n for n, line in enumerate(text) if '"write_todos"' in line and '"toolCalls"' in line)
    path = tmp_path / MAIN_FILE.name
    path.write_text("".join(text[:first_call]), encoding="utf-8")
    assert one(path).plan is None and one(path).writes == ()
    path.write_text("".join(text[:first_call + 1]), encoding="utf-8")
    assert [pairs(write.items) for write in one(path).writes] == WRITES[:1]
    assert one(path).turn_open is True


def test_a_torn_last_line_is_skipped_as_gemini_cli_skips_it(tmp_path: Path) -> None:
    path = tmp_path / MAIN_FILE.name
    text = MAIN_FILE.read_text(encoding="utf-8")
    path.write_text(text + text.splitlines()[6][:120], encoding="utf-8")
    assert pairs(one(path).plan) == WRITES[-1]


def test_a_rewind_drops_the_message_and_every_later_one(tmp_path: Path) -> None:
    """``{"$rewindTo": id}`` (what Gemini CLI appends when the person rewinds) removes that message and the rest:
    the plan is the one before it. Built by appending the record Gemini CLI's rewind writes to the real file."""
    path = tmp_path / MAIN_FILE.name
    target = message_of_write(MAIN_FILE, 2)
    path.write_text(MAIN_FILE.read_text(encoding="utf-8") + json.dumps({"$rewindTo": target}) + "\n",
                    encoding="utf-8")
    assert [pairs(write.items) for write in one(path).writes] == WRITES[:2]
    assert pairs(one(path).plan) == WRITES[1]


def test_a_rewind_to_an_unknown_message_drops_them_all(tmp_path: Path) -> None:
    path = tmp_path / MAIN_FILE.name
    path.write_text(MAIN_FILE.read_text(encoding="utf-8") + '{"$rewindTo": "no-such-id"}\n', encoding="utf-8")
    assert one(path).plan is None and one(path).writes == () and one(path).turn_open is None
    assert one(path).parent is None and one(path).project is None, "a chat outside chats/ has no parent, no project"


def test_a_set_of_messages_replaces_every_message(tmp_path: Path) -> None:
    records = [json.loads(line) for line in lines(MAIN_FILE)]
    kept = [record for record in records if record.get("id") == message_of_write(MAIN_FILE, 0)][-1]
    path = tmp_path / MAIN_FILE.name
    path.write_text(MAIN_FILE.read_text(encoding="utf-8") + json.dumps({"$set": {"messages": [kept]}}) + "\n",
                    encoding="utf-8")
    assert [pairs(write.items) for write in one(path).writes] == WRITES[:1]


def test_an_empty_write_clears_the_plan_and_an_unknown_status_is_kept(tmp_path: Path) -> None:
    path = tmp_path / MAIN_FILE.name
    path.write_text(MAIN_FILE.read_text(encoding="utf-8").replace('"status":"blocked"', '"status":"someday"'),
                    encoding="utf-8")
    assert pairs(one(path).plan) == [*WRITES[-1][:2], ("Run the tests", "someday")]
    cleared = next(json.loads(line) for line in lines(MAIN_FILE) if '"write_todos"' in line and '"toolCalls"' in line)
    cleared["id"] = "cleared"
    cleared["toolCalls"][0]["args"] = {"todos": []}
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(cleared) + "\n")
    assert one(path).plan is None and len(one(path).writes) == 4


@pytest.mark.parametrize(("text", "why"), [
    ('{"hello": "world"}\n', "no session record"),
    ("", "no session record"),
])
def test_a_file_that_is_no_chat_names_gemini_cli_and_the_file(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "session-x.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^Gemini CLI: cannot read {path}: {why}"):
        READER.read(path)


def test_a_write_todos_call_of_another_shape_names_gemini_cli_and_the_file(tmp_path: Path) -> None:
    """A release that renamed ``description`` (or nested the list elsewhere) must fail loudly, never show nothing."""
    path = tmp_path / MAIN_FILE.name
    path.write_text(MAIN_FILE.read_text(encoding="utf-8").replace('"description"', '"text"'), encoding="utf-8")
    with pytest.raises(ValueError, match=f"^Gemini CLI: cannot read {path}: a write_todos call whose args.todos"):
        READER.read(path)


def test_homes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "elsewhere"))
    assert READER.default_home() == tmp_path / "elsewhere" / ".gemini"
    monkeypatch.delenv("GEMINI_CLI_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert READER.default_home() == tmp_path / ".gemini"
    assert READER.session_paths(tmp_path / "missing") == [] and not (tmp_path / "missing").exists()


def test_reading_writes_nothing_in_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(FIXTURE, home)
    before = snapshot(home)
    sessions = [session for path in READER.session_paths(home) for session in READER.read(path)]
    assert len(sessions) == 2
    assert snapshot(home) == before


def test_memory_stays_bounded_by_the_messages_not_their_size(tmp_path: Path) -> None:
    """A chat of 2,000 messages of 4 kB each (8 MB): the read keeps ids and plan writes, not the messages."""
    path = tmp_path / "session-big.jsonl"
    header, *_ = lines(MAIN_FILE)
    write = next(line for line in lines(MAIN_FILE) if '"write_todos"' in line and '"toolCalls"' in line)
    with path.open("w", encoding="utf-8") as out:
        out.write(header)
        for number in range(2000):
            out.write(json.dumps({"id": f"m{number}", "type": "user", "content": [{"text": "x" * 4000}]}) + "\n")
        out.write(write)
    tracemalloc.start()
    try:
        session = one(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pairs(session.plan) == WRITES[0]
    assert peak < 1_500_000, f"peak {peak} bytes reading an 8 MB chat"
