"""The Claude Code and Codex readers against files those CLIs wrote (the fixtures :mod:`.drive` saved): the exact
standing plans, every accepted write and no refused one, subagents linked to their parents, statuses kept as
written, a format this version does not know said by name, memory bounded, nothing written."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from dsh_todo.coding_agents.base import AgentSession
from dsh_todo.coding_agents.claude import READER as CLAUDE_READER
from dsh_todo.coding_agents.codex import READER as CODEX_READER
from dsh_todo.coding_agents.discover import Discovery, discover, find
from tests.coding_agents.common import (
    CLAUDE_TASKS,
    CLAUDE_TODOWRITE,
    CLAUDE_VERSION,
    CODEX_HOME,
    CODEX_VERSION,
    SAVED,
    copy_home,
    pairs,
    snapshot,
)

CLAUDE_MAIN = "dae93792-d946-4018-8bd9-43cedd786c3b"
CLAUDE_SUB = "a0971d554bb514d87"
CLAUDE_TASKS_MAIN = "d71ef276-a88b-4757-9106-bb44ae7fa6d2"
CLAUDE_TASKS_SUB = "a643e6fd5f75f99e1"
CODEX_MAIN = "01a249d7-c122-77e2-9066-cfa59a513547"
CODEX_SUB = "01a249d7-c1d6-78d0-9b24-b2b8027b04a6"

WRITES = [
    [("Reproduce the bug", "in_progress"), ("Fix the parser", "pending")],
    [("Reproduce the bug", "completed"), ("Fix the parser", "in_progress")],
    [("Reproduce the bug", "completed"), ("Fix the parser", "completed")],
]
"""The main session's accepted writes in the scenario, in order (the third call, with status ``done``, was
refused by both CLIs and is not among them)."""
SUB_PLAN = [("Run the tests", "in_progress"), ("Report the result", "pending")]


def by_id(sessions: list[AgentSession]) -> dict[str, AgentSession]:
    return {session.id: session for session in sessions}


def written(session: AgentSession) -> list[list[tuple[str, str]]]:
    return [[(item.content, item.status) for item in write.items] for write in session.writes]


def read_all(reader: object, home: Path) -> dict[str, AgentSession]:
    sessions: list[AgentSession] = []
    for path in reader.session_paths(home):  # type: ignore[attr-defined]
        sessions += reader.read(path)  # type: ignore[attr-defined]
    return by_id(sessions)


def test_claude_todowrite_plans_writes_and_subagent() -> None:
    sessions = read_all(CLAUDE_READER, CLAUDE_TODOWRITE)
    assert set(sessions) == {CLAUDE_MAIN, CLAUDE_SUB}
    main, sub = sessions[CLAUDE_MAIN], sessions[CLAUDE_SUB]
    assert pairs(main) == WRITES[-1]
    assert written(main) == WRITES
    assert [write.tool for write in main.writes] == ["TodoWrite"] * 3
    assert (main.agent, main.project, main.parent, main.title, main.turn_open, main.waiting) == (
        "claude", "/home/dev/project", None, "Fix the bug", False, False)
    # The subagent: its own list, from its own file (its results carry no toolUseResult), under its parent.
    assert pairs(sub) == SUB_PLAN
    assert written(sub) == [SUB_PLAN]
    assert (sub.parent, sub.title, sub.project) == (CLAUDE_MAIN, "Check the tests", "/home/dev/project")
    assert main.path.name == f"{CLAUDE_MAIN}.jsonl" and sub.path.name == f"agent-{CLAUDE_SUB}.jsonl"
    assert main.updated == os.stat(main.path).st_mtime


def test_claude_task_tools_plan_is_the_task_files_in_id_order() -> None:
    sessions = read_all(CLAUDE_READER, CLAUDE_TASKS)
    main, sub = sessions[CLAUDE_TASKS_MAIN], sessions[CLAUDE_TASKS_SUB]
    assert pairs(main) == [("Reproduce the bug", "completed"), ("Fix the parser", "in_progress")]
    # Two creates, three accepted updates; the update to "done" was refused and is not a write.
    assert [write.tool for write in main.writes] == ["TaskCreate", "TaskCreate", "TaskUpdate", "TaskUpdate",
                                                     "TaskUpdate"]
    assert written(main)[-1] == pairs(main)
    assert all(item.status != "done" for write in main.writes for item in write.items)
    assert sub.parent == CLAUDE_TASKS_MAIN and sub.plan is None  # 2.1.332 gives a subagent no Task tools


def test_claude_task_files_win_and_unknown_statuses_are_kept(tmp_path: Path) -> None:
    home = copy_home(CLAUDE_TASKS, tmp_path)
    task = home / "tasks" / CLAUDE_TASKS_MAIN / "2.json"
    task.write_text(json.dumps({**json.loads(task.read_text()), "status": "blocked"}))
    (home / "tasks" / CLAUDE_TASKS_MAIN / "10.json").write_text(json.dumps({"id": "10", "subject": "Ship",
                                                                            "status": "pending"}))
    [main] = CLAUDE_READER.read(home / "projects" / "-home-dev-project" / f"{CLAUDE_TASKS_MAIN}.jsonl")
    assert pairs(main) == [("Reproduce the bug", "completed"), ("Fix the parser", "blocked"), ("Ship", "pending")]


def test_claude_unknown_todo_status_is_kept(tmp_path: Path) -> None:
    home = copy_home(CLAUDE_TODOWRITE, tmp_path)
    path = home / "projects" / "-home-dev-project" / f"{CLAUDE_MAIN}.jsonl"
    old, new = 'Fix the parser","status":"completed', 'Fix the parser","status":"blocked'
    path.write_text(path.read_text().replace(old, new))
    [main] = CLAUDE_READER.read(path)
    assert pairs(main) == [("Reproduce the bug", "completed"), ("Fix the parser", "blocked")]


def test_codex_plans_writes_and_subagent() -> None:
    sessions = read_all(CODEX_READER, CODEX_HOME)
    assert set(sessions) == {CODEX_MAIN, CODEX_SUB}
    main, sub = sessions[CODEX_MAIN], sessions[CODEX_SUB]
    assert pairs(main) == WRITES[-1]
    assert written(main) == WRITES
    assert [write.result for write in main.writes] == ["Plan updated"] * 3
    assert main.writes[0].arguments == {"explanation": "Plan", "plan": [
        {"step": "Reproduce the bug", "status": "in_progress"}, {"step": "Fix the parser", "status": "pending"}]}
    assert (main.project, main.parent, main.title, main.turn_open, main.waiting) == (
        "/home/dev/project", None, "Fix the bug", False, False)
    assert pairs(sub) == SUB_PLAN and written(sub) == [SUB_PLAN]
    assert sub.parent == CODEX_MAIN and sub.title == "Ampere"  # the name Codex gave the subagent


def test_codex_unknown_status_is_kept(tmp_path: Path) -> None:
    home = copy_home(CODEX_HOME, tmp_path)
    [path] = [path for path in CODEX_READER.session_paths(home) if CODEX_MAIN in path.name]
    text = path.read_text()
    old = 'Fix the parser\\", \\"status\\": \\"completed'
    assert text.count(old) == 1
    path.write_text(text.replace(old, 'Fix the parser\\", \\"status\\": \\"blocked'))
    [main] = CODEX_READER.read(path)
    assert pairs(main) == [("Reproduce the bug", "completed"), ("Fix the parser", "blocked")]


def test_codex_open_turn_and_question(tmp_path: Path) -> None:
    """A turn started and not completed is open; an unanswered ``request_user_input`` is waiting on the person."""
    path = tmp_path / "rollout-x.jsonl"
    lines = [{"type": "session_meta", "payload": {"id": "t1", "cwd": "/w"}},
             {"type": "event_msg", "payload": {"type": "task_started"}},
             {"type": "response_item", "payload": {"type": "function_call", "name": "request_user_input",
                                                   "call_id": "c1", "arguments": "{}"}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    [session] = CODEX_READER.read(path)
    assert (session.turn_open, session.waiting, session.plan) == (True, True, None)


def test_a_format_this_version_does_not_know_names_the_agent_and_the_file(tmp_path: Path) -> None:
    claude = copy_home(CLAUDE_TODOWRITE, tmp_path)
    path = claude / "projects" / "-home-dev-project" / f"{CLAUDE_MAIN}.jsonl"
    path.write_text(path.read_text().replace('"newTodos":[{"content"', '"newTodos":[{"text"'))
    with pytest.raises(ValueError, match=rf"^claude: cannot read {path}: a TodoWrite item is not"):
        CLAUDE_READER.read(path)
    codex = tmp_path / "rollout-2026-new.jsonl"
    codex.write_text('{"type":"thread_header","payload":{}}\n')
    with pytest.raises(ValueError, match=rf"^codex: cannot read {codex}: its first record is not session_meta"):
        CODEX_READER.read(codex)
    # discover keeps such a file as a session carrying the error, never a silent empty plan.
    found = by_id(discover(["claude"], {"claude": claude}))
    assert found[path.stem].plan is None
    assert str(found[path.stem].extra["error"]).startswith(f"claude: cannot read {path}")


def test_a_partial_last_line_is_a_record_still_being_written(tmp_path: Path) -> None:
    home = copy_home(CODEX_HOME, tmp_path)
    [path] = [path for path in CODEX_READER.session_paths(home) if CODEX_MAIN in path.name]
    with path.open("a") as handle:
        handle.write('{"type":"response_item","payload":{"type":"function_ca')
    [main] = CODEX_READER.read(path)
    assert pairs(main) == WRITES[-1]


def test_discover_and_find_across_agents_and_homes() -> None:
    homes = {"claude": CLAUDE_TODOWRITE, "codex": CODEX_HOME}
    found = discover(["claude", "codex"], homes)
    assert {(session.agent, session.id) for session in found} == {
        ("claude", CLAUDE_MAIN), ("claude", CLAUDE_SUB), ("codex", CODEX_MAIN), ("codex", CODEX_SUB)}
    assert [session.updated for session in found] == sorted((session.updated for session in found), reverse=True)
    sub = find(["claude", "codex"], homes, CODEX_SUB)
    assert sub is not None and sub.parent == CODEX_MAIN
    by_path = find(["claude"], homes, str(CLAUDE_TODOWRITE / "projects" / "-home-dev-project" / f"{CLAUDE_MAIN}.jsonl"))
    assert by_path is not None and by_path.id == CLAUDE_MAIN
    assert find(["claude", "codex"], homes, "no-such-session") is None
    assert find(["codex"], homes, CLAUDE_MAIN) is None  # only the chosen agents are read


def test_default_homes_follow_the_agents_own_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "x"))
    assert (CLAUDE_READER.default_home(), CODEX_READER.default_home()) == (tmp_path / "c", tmp_path / "x")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.delenv("CODEX_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert (CLAUDE_READER.default_home(), CODEX_READER.default_home()) == (tmp_path / ".claude", tmp_path / ".codex")


def test_a_missing_home_is_no_sessions_and_is_not_created(tmp_path: Path) -> None:
    homes = {"claude": tmp_path / "no-claude", "codex": tmp_path / "no-codex"}
    assert discover(["claude", "codex"], homes) == []
    assert list(tmp_path.iterdir()) == []


def test_readers_never_write(tmp_path: Path) -> None:
    """Snapshot every file of the homes (names, sizes, mtimes), read everything, compare."""
    homes = {"claude": copy_home(CLAUDE_TASKS, tmp_path / "c"), "codex": copy_home(CODEX_HOME, tmp_path / "x")}
    before = {agent: snapshot(home) for agent, home in homes.items()}
    discover(["claude", "codex"], homes)
    find(["claude", "codex"], homes, CODEX_SUB)
    find(["claude", "codex"], homes, "no-such-session")
    assert {agent: snapshot(home) for agent, home in homes.items()} == before


def test_a_huge_transcript_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """40 MB of records the plan does not need around the real ones: the reader's peak stays a few MB."""
    home = copy_home(CLAUDE_TODOWRITE, tmp_path)
    path = home / "projects" / "-home-dev-project" / f"{CLAUDE_MAIN}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    filler = json.dumps({"type": "assistant", "sessionId": CLAUDE_MAIN, "message": {
        "role": "assistant", "content": [{"type": "text", "text": "x" * 4000}], "stop_reason": "end_turn"}}) + "\n"
    with path.open("w") as handle:
        handle.write(lines[0])
        handle.write(filler * 10_000)
        handle.writelines(lines[1:])
    assert path.stat().st_size > 40_000_000
    tracemalloc.start()
    try:
        [main] = CLAUDE_READER.read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pairs(main) == WRITES[-1]
    assert peak < 4_000_000, f"reading a 40 MB transcript peaked at {peak} bytes"


def test_discovery_rereads_only_what_changed(tmp_path: Path) -> None:
    """A board asks every second: unchanged files are not read again; a changed transcript, a changed task file
    and a new session are."""
    homes = {"claude": copy_home(CLAUDE_TASKS, tmp_path / "c"), "codex": copy_home(CODEX_HOME, tmp_path / "x")}
    discovery = Discovery(["claude", "codex"], homes)
    assert len(discovery.sessions()) == 4 and discovery.reads == 4
    assert len(discovery.sessions()) == 4 and discovery.reads == 4
    task = homes["claude"] / "tasks" / CLAUDE_TASKS_MAIN / "2.json"
    task.write_text(json.dumps({**json.loads(task.read_text()), "status": "completed", "pad": "changed size"}))
    found = by_id(discovery.sessions())
    assert discovery.reads == 5
    assert pairs(found[CLAUDE_TASKS_MAIN]) == [("Reproduce the bug", "completed"), ("Fix the parser", "completed")]
    [rollout] = [path for path in CODEX_READER.session_paths(homes["codex"]) if CODEX_SUB in path.name]
    copy = rollout.with_name(rollout.name.replace(CODEX_SUB, "01a249d7-ffff-7000-8000-000000000000"))
    copy.write_text(rollout.read_text().replace(CODEX_SUB, "01a249d7-ffff-7000-8000-000000000000"))
    assert len(discovery.sessions()) == 5 and discovery.reads == 6
    copy.unlink()
    assert len(discovery.sessions()) == 4 and discovery.reads == 6


def plan_record(call: str, steps: list[tuple[str, str]]) -> str:
    """An accepted ``update_plan`` call and its answer, as Codex 0.171 appends them."""
    arguments = json.dumps({"plan": [{"step": step, "status": status} for step, status in steps]})
    return "".join(json.dumps({"timestamp": "2026-12-06T06:00:00.000Z", "type": "response_item", "payload": payload})
                   + "\n" for payload in ({"type": "function_call", "name": "update_plan", "call_id": call,
                                           "arguments": arguments},
                                          {"type": "function_call_output", "call_id": call, "output": "Plan updated"}))


def test_a_growing_file_is_read_on_from_where_the_last_read_ended(tmp_path: Path) -> None:
    """Proof that the lines read before are not read again: bytes already read are overwritten with garbage of the
    same length (a full read would refuse the file), then a write is appended: the next call sees only it."""
    home = copy_home(CODEX_HOME, tmp_path)
    [path] = [path for path in CODEX_READER.session_paths(home) if CODEX_MAIN in path.name]
    discovery = Discovery(["codex"], {"codex": home})
    discovery.sessions()
    start = sum(len(line) for line in path.read_bytes().splitlines(keepends=True)[:5])  # where line 6 begins
    with path.open("r+b") as handle:
        handle.seek(start)
        handle.write(b"#" * 10)
        handle.seek(0, os.SEEK_END)
        handle.write(plan_record("c9", [("Ship it", "in_progress")]).encode())
    main = by_id(discovery.sessions())[CODEX_MAIN]
    assert pairs(main) == [("Ship it", "in_progress")]
    assert len(main.writes) == 4
    with pytest.raises(ValueError, match="line 6 is not JSON"):
        CODEX_READER.read(path)


def test_a_record_split_across_two_reads_counts_once(tmp_path: Path) -> None:
    home = copy_home(CODEX_HOME, tmp_path)
    [path] = [path for path in CODEX_READER.session_paths(home) if CODEX_MAIN in path.name]
    discovery = Discovery(["codex"], {"codex": home})
    discovery.sessions()
    record = plan_record("c9", [("Ship it", "in_progress")])
    with path.open("a") as handle:
        handle.write(record[:50])
    assert pairs(by_id(discovery.sessions())[CODEX_MAIN]) == WRITES[-1]
    with path.open("a") as handle:
        handle.write(record[50:])
    main = by_id(discovery.sessions())[CODEX_MAIN]
    assert pairs(main) == [("Ship it", "in_progress")] and len(main.writes) == 4


def test_a_file_replaced_or_cut_is_read_again_from_the_start(tmp_path: Path) -> None:
    home = copy_home(CODEX_HOME, tmp_path)
    [path] = [path for path in CODEX_READER.session_paths(home) if CODEX_MAIN in path.name]
    discovery = Discovery(["codex"], {"codex": home})
    discovery.sessions()
    header = path.read_text().splitlines(keepends=True)[0]
    replacement = path.with_name("replacement")
    replacement.write_text(header + plan_record("c1", [("Only this", "pending")]))
    replacement.replace(path)
    main = by_id(discovery.sessions())[CODEX_MAIN]
    assert pairs(main) == [("Only this", "pending")] and len(main.writes) == 1


def test_find_reads_only_the_files_named_for_the_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both CLIs name a session's file after its id, so looking up an id (ours, say) reads none of the others."""
    opened: list[str] = []
    read_more = CODEX_READER.read_more

    def spy(path: Path, state: object) -> tuple[list[AgentSession], object]:
        opened.append(path.name)
        return read_more(path, state)

    monkeypatch.setattr(CODEX_READER, "read_more", spy)
    assert find(["codex"], {"codex": CODEX_HOME}, "ours-1") is None
    assert opened == []
    sub = find(["codex"], {"codex": CODEX_HOME}, CODEX_SUB)
    assert sub is not None and sub.parent == CODEX_MAIN
    assert len(opened) == 1 and CODEX_SUB in opened[0]


def test_the_fixtures_are_of_the_pinned_versions() -> None:
    """A pin raised in tests/carriers/mcp/agents/install.py needs these files saved again from the new version."""
    pinned = {"claude": CLAUDE_VERSION, "codex": CODEX_VERSION}
    assert pinned == SAVED, (
        f"the CLIs are pinned at {pinned}, the fixtures hold {SAVED}: save them again with `python -m "
        "tests.coding_agents.drive claude|claude-tasks|codex tests/fixtures/agent-plans/<agent>-<version>[/todowrite"
        "|/tasks]`, then update SAVED and the ids in this file")


def test_claude_open_turn_and_question(tmp_path: Path) -> None:
    """An assistant record that stopped for a tool leaves the turn open; an ``AskUserQuestion`` call without its
    result is the session waiting on the person (the result closes it)."""
    path = tmp_path / "projects" / "-w" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    ask = {"type": "assistant", "sessionId": "s1", "cwd": "/w", "message": {
        "role": "assistant", "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "q1", "name": "AskUserQuestion", "input": {"questions": []}}]}}
    path.write_text(json.dumps({"type": "user", "sessionId": "s1", "cwd": "/w", "message": {
        "role": "user", "content": "Plan it"}}) + "\n" + json.dumps(ask) + "\n")
    [session] = CLAUDE_READER.read(path)
    assert (session.turn_open, session.waiting, session.title, session.plan) == (True, True, "Plan it", None)
    answer = {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "q1", "content": "Yes"}]}}
    with path.open("a") as handle:
        handle.write(json.dumps(answer) + "\n")
    [session] = CLAUDE_READER.read(path)
    assert (session.turn_open, session.waiting) == (True, False)
