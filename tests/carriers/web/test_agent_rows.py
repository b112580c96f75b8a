"""Other agents' sessions over HTTP (issue 36): the list's rows, a changed file pushed over the mux, a foreign
session's page, and what a DSH row says about its parent and about waiting on the person.

The first test reads the four agents' saved runs (copies) through their real readers. The rest use the stand-in
reader (``agent_fixtures.FixtureReader``) on purpose: they pin the server's mechanics (which file is re-read, a
removed file, a reader's defect, the synthetic events of arbitrary writes), for which they need states no saved run
is in — a reader raising ``RuntimeError``, a file deleted mid-watch, a write list chosen per test."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.carriers.web.agents import AgentWatch, synthetic_events
from dsh_todo.carriers.web.server import BackgroundServer
from dsh_todo.coding_agents.discover import discover
from dsh_todo.logview.summary import SummaryFold
from dsh_todo.standard import open_runtime
from tests.carriers.web.agent_fixtures import REAL_HOMES, copy_real_homes, use_fixture_readers, write, write_session
from tests.carriers.web.conftest import Web

pytestmark = pytest.mark.timeout(60)

OPENCODE_MAIN = "ses_db6288be3ffetQBij5NFdY90vd"


@pytest.fixture
def homes(tmp_path: Path) -> dict[str, Path]:
    return {agent: tmp_path / "homes" / agent for agent in ("claude", "codex", "gemini")}


@pytest.fixture
def agent_web(tmp_path: Path, homes: dict[str, Path]) -> Iterator[Web]:
    """A server over an empty root that also reads three agents' homes (the fixture reader)."""
    write_session(homes["claude"], "c-parent", [write("TodoWrite", ("plan", "completed"), ("build", "in_progress"))],
                  project="/home/dev/shop", turnOpen=True, title="Parent task")
    write_session(homes["claude"], "c-child", [write("TodoWrite", ("look up", "pending"))], project="/home/dev/shop",
                  parent="c-parent", turnOpen=False)
    write_session(homes["gemini"], "g1", [write("write_todos", ("a", "completed"), ("b", "cancelled"))],
                  project="/home/dev/site", turnOpen=False)
    with use_fixture_readers():
        ctx = open_runtime(tmp_path / "sessions", batch_delay_ms=5)
        server = BackgroundServer(ctx, agents=["claude", "codex", "gemini"], agent_homes=homes)
        web = Web(ctx, tmp_path / "sessions", server, "")
        try:
            web.base = server.start().split("?", 1)[0]
            yield web
        finally:
            server.stop()
            ctx.dispose()


def rows_of(web: Web) -> dict[str, dict[str, Any]]:
    status, body = web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                                  "payload": {}})
    assert status == 200
    value = body["result"]["value"]
    assert value["agents"] == ["claude", "codex", "gemini"]
    return {row["sessionId"]: row for row in value["sessions"]}


def test_the_list_carries_the_real_runs_as_their_readers_read_them_and_leaves_them_as_they_were(
        tmp_path: Path) -> None:
    """Claude Code, Codex, Gemini CLI and opencode's saved files, served: one row per session its reader returns,
    its plan (statuses as written), its parent, its project, its title; and after the first reading and a few polls
    not a file of those homes (opencode's SQLite store included) was added, changed or touched."""
    homes = copy_real_homes(tmp_path / "homes")

    def snapshot() -> dict[str, tuple[int, int]]:
        return {str(path): (path.stat().st_mtime_ns, path.stat().st_size)
                for path in sorted((tmp_path / "homes").rglob("*"))}

    before = snapshot()
    ctx = open_runtime(tmp_path / "sessions", batch_delay_ms=5)
    server = BackgroundServer(ctx, agents=list(homes), agent_homes=homes)
    web = Web(ctx, tmp_path / "sessions", server, "")
    try:
        web.base = server.start().split("?", 1)[0]
        status, body = web.post("/api/session.list", {"type": "client-request", "rpcId": "l",
                                                      "method": "session.list", "payload": {}})
        assert status == 200
        rows = {row["sessionId"]: row for row in body["result"]["value"]["sessions"]}
        time.sleep(0.6)  # a few polls
    finally:
        server.stop()
        ctx.dispose()
    assert snapshot() == before
    sessions = discover(list(homes), homes)
    assert len(sessions) == 8
    assert set(rows) == {f"{session.agent}:{session.id}" for session in sessions}
    for session in sessions:
        row = rows[f"{session.agent}:{session.id}"]
        assert row["projections"]["values"]["todos"] == [item.as_json() for item in session.plan or ()], row
        assert row.get("parentId") == (None if session.parent is None else f"{session.agent}:{session.parent}")
        assert (row["agent"], row["cwd"], row["title"], row["writes"]) == (
            session.agent, session.project, session.title, len(session.writes))
    assert [item["status"] for item in rows["gemini:ef5e5846-aa2f-477d-9169-af826a016186"]["projections"]["values"][
        "todos"]] == ["completed", "cancelled", "blocked"]


def test_the_list_carries_each_agents_sessions_with_their_plans_as_written(agent_web: Web) -> None:
    rows = rows_of(agent_web)
    assert set(rows) == {"claude:c-parent", "claude:c-child", "gemini:g1"}  # codex's home does not exist: none
    parent = rows["claude:c-parent"]
    assert parent["agent"] == "claude" and parent["cwd"] == "/home/dev/shop" and parent["title"] == "Parent task"
    assert parent["state"] == "live" and parent["turnOpen"] is True
    assert parent["projections"]["values"]["todos"] == [{"content": "plan", "status": "completed"},
                                                        {"content": "build", "status": "in_progress"}]
    assert rows["claude:c-child"]["parentId"] == "claude:c-parent"
    assert rows["gemini:g1"]["projections"]["values"]["todos"][1] == {"content": "b", "status": "cancelled"}


def test_a_missing_home_is_never_created(agent_web: Web, homes: dict[str, Path]) -> None:
    rows_of(agent_web)
    time.sleep(0.6)  # a few polls
    assert not homes["codex"].exists()


def test_reading_leaves_every_home_as_it_was(agent_web: Web, homes: dict[str, Path]) -> None:
    """Read-only by rule: after the first reading and a few polls, no file was added, changed or touched."""
    def snapshot() -> dict[str, tuple[int, int]]:
        return {str(path): (path.stat().st_mtime_ns, path.stat().st_size)
                for path in sorted((homes["claude"].parent).rglob("*"))}

    before = snapshot()
    rows_of(agent_web)
    time.sleep(0.6)
    assert snapshot() == before


def test_a_changed_file_reaches_the_mux_within_a_second(agent_web: Web, homes: dict[str, Path]) -> None:
    rows_of(agent_web)
    stream = agent_web.open_stream("?agents=1")
    try:
        assert stream.message() == ": connected"
        started = time.monotonic()
        write_session(homes["claude"], "c-parent", [write("TodoWrite", ("plan", "completed"), ("build", "completed"))],
                      project="/home/dev/shop", turnOpen=False)
        payload = stream.payloads_until(lambda p: p["type"] == "agents/session")[-1]
        elapsed = time.monotonic() - started
        assert payload["sessionId"] == "claude:c-parent"
        assert payload["row"]["projections"]["values"]["todos"][1] == {"content": "build", "status": "completed"}
        assert elapsed < 1.0, elapsed
        (homes["claude"] / "c-child.json").unlink()
        removed = stream.payloads_until(lambda p: p["type"] == "agents/removed")[-1]
        assert removed["sessionId"] == "claude:c-child"
    finally:
        stream.close()


def test_an_unreadable_file_is_a_refused_row_with_the_readers_reason(agent_web: Web, homes: dict[str, Path]) -> None:
    (homes["gemini"] / "broken.json").write_text("{not json", encoding="utf-8")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        refused = [row for row in rows_of(agent_web).values() if row["state"] == "refused"]
        if refused:
            break
        time.sleep(0.1)
    assert len(refused) == 1
    assert refused[0]["error"]["message"].startswith("gemini: cannot read broken.json")


def test_a_reader_that_fails_refuses_that_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.carriers.web.agent_fixtures import FixtureReader

    home = tmp_path / "claude"
    write_session(home, "good", [write("TodoWrite", ("a", "pending"))])
    write_session(home, "bad", [write("TodoWrite", ("b", "pending"))])
    original = FixtureReader.read

    def read(self: FixtureReader, path: Path) -> Any:
        if path.name == "bad.json":
            raise RuntimeError("a defect")
        return original(self, path)

    monkeypatch.setattr(FixtureReader, "read", read)
    with use_fixture_readers():
        watch = AgentWatch(["claude"], {"claude": home})
        watch.start()
        try:
            rows = {row["sessionId"]: row for row in watch.rows()}
        finally:
            watch.stop()
    assert rows["claude:good"]["projections"]["values"]["todos"] == [{"content": "a", "status": "pending"}]
    refused = [row for row in rows.values() if row["state"] == "refused"]
    assert [row["error"]["message"] for row in refused] == ["claude: cannot read bad.json: RuntimeError('a defect')"]


def test_a_foreign_session_has_a_page_of_its_plan_writes(agent_web: Web, homes: dict[str, Path]) -> None:
    write_session(homes["gemini"], "g1", [write("write_todos", ("a", "pending")),
                                          write("write_todos", ("a", "completed"), ("b", "cancelled"))],
                  turnOpen=False)
    deadline = time.monotonic() + 5
    while rows_of(agent_web)["gemini:g1"]["writes"] != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    status, body = agent_web.history("gemini:g1")
    assert status == 200
    value = body["result"]["value"]
    kinds = [entry["event"]["type"] for entry in value["events"]]
    assert kinds == ["tool/call", "todo/write", "tool/result"] * 2
    assert value["events"][0]["event"]["data"]["name"] == "write_todos"
    assert json.loads(value["events"][3]["event"]["data"]["arguments"])["todos"][1]["status"] == "cancelled"
    assert value["projections"] == {"asOfSeq": 5, "values": {"todos": [{"content": "a", "status": "completed"},
                                                                      {"content": "b", "status": "cancelled"}]}}


def test_a_foreign_sessions_page_is_replayed_and_then_followed(agent_web: Web, homes: dict[str, Path]) -> None:
    rows_of(agent_web)
    stream = agent_web.open_stream("?sessionId=gemini:g1&afterSeq=2")
    try:
        assert stream.message() == ": connected"
        assert stream.frame()["payload"] == {"type": "session/subscribed", "sessionId": "gemini:g1", "lastSeq": 2}
        write_session(homes["gemini"], "g1", [write("write_todos", ("a", "completed"), ("b", "cancelled")),
                                              write("write_todos", ("a", "completed"))], turnOpen=False)
        seen = stream.payloads_until(lambda p: p.get("event", {}).get("seq") == 5)
        assert [p["event"]["type"] if p["type"] == "session/event" else p["type"] for p in seen] == [
            "tool/call", "todo/write", "session/projection", "tool/result"]
        assert seen[2] == {"type": "session/projection", "sessionId": "gemini:g1", "key": "todos",
                           "value": [{"content": "a", "status": "completed"}], "seq": 4}
    finally:
        stream.close()


def test_the_synthetic_events_keep_the_raw_arguments_and_result() -> None:
    from dsh_todo.coding_agents.base import AgentSession, PlanWrite, items

    writes = (PlanWrite(items([("x", "pending")]), 1.5, "update_plan", {"plan": [{"step": "x", "status": "pending"}]},
                        {"ok": True}),)
    events = synthetic_events(AgentSession("codex", "r1", Path("r1.jsonl"), None, 2.0, writes[0].items, writes))
    assert events[0] == {"type": "tool/call", "seq": 0, "time": 1500, "data": {
        "callId": "plan-0", "name": "update_plan", "arguments": '{"plan": [{"step": "x", "status": "pending"}]}'}}
    assert events[2]["data"]["message"]["content"] == [{"type": "text", "text": '{"ok": true}'}]


def test_no_agents_chosen_reads_nothing(tmp_path: Path) -> None:
    watch = AgentWatch([])
    watch.start()
    assert watch.rows(wait=0) == []
    watch.stop()


# -- DSH rows -----------------------------------------------------------------------------------------------------


def test_a_dsh_subagents_row_names_its_parent(web: Web) -> None:
    writer = web.other_process()
    parent = writer.sessions.create("dsh-parent", cwd="/home/dev/shop")
    child = writer.sessions.create("dsh-child", cwd="/home/dev/shop", parentSession="dsh-parent", origin="subagent",
                                   delegationDepth=1)
    for session in (parent, child):
        session.append("turn/start", {"turn": 1})
    writer.session_persistence.flush()
    status, body = web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                                  "payload": {}})
    assert status == 200
    rows = {row["sessionId"]: row for row in body["result"]["value"]["sessions"]}
    assert rows["dsh-child"]["parentId"] == "dsh-parent"
    assert rows["dsh-child"]["origin"] == "subagent" and rows["dsh-child"]["delegationDepth"] == 1
    assert "parentId" not in rows["dsh-parent"] and "delegationDepth" not in rows["dsh-parent"]


def fold(*events: dict[str, Any]) -> SummaryFold:
    summary = SummaryFold()
    summary.see([{**event, "seq": seq, "time": seq} for seq, event in enumerate(events)])
    return summary


def test_a_dsh_turn_waits_on_an_approval_until_it_is_decided() -> None:
    asked = ({"type": "turn/start", "data": {"turn": 1}},
             {"type": "approval/asked", "data": {"id": "ap-1", "toolName": "bash", "callId": "c1"}})
    assert fold(*asked).summary().waiting is True
    decided = fold(*asked, {"type": "approval/decided", "data": {"id": "ap-1", "outcome": "approved"}})
    assert decided.summary().waiting is False
    ended = fold(*asked, {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "interrupted"}}})
    assert ended.summary().waiting is False


def test_a_dsh_turn_waits_on_an_unanswered_question() -> None:
    call = {"type": "tool/call", "data": {"callId": "q1", "name": "ask_user_question", "arguments": "{}"}}
    start = {"type": "turn/start", "data": {"turn": 1}}
    assert fold(start, call).summary().waiting is True
    answer = {"type": "tool/result", "data": {"message": {"role": "tool", "toolCallId": "q1", "content": []}}}
    assert fold(start, call, answer).summary().waiting is False
    other = {"type": "tool/call", "data": {"callId": "t1", "name": "todo_write", "arguments": "{}"}}
    assert fold(start, other).summary().waiting is False


def test_a_change_to_a_sqlite_store_is_seen_when_its_wal_restarts_at_the_same_size(tmp_path: Path) -> None:
    """Repro: opencode keeps its store in WAL mode with its connection open; once a checkpoint has copied the WAL
    back, SQLite writes the next transaction from the WAL's start, so the ``-wal`` keeps its size and the store file
    is untouched. The poller looked only at the ``-wal``'s size: the change never reached the board (the benchmark
    saw opencode's changes take 2-3 s, some never). And a store holds every session: a change to one sent all of
    them to every board again (200 rows for one changed plan, each redrawing the board: seconds); only the changed
    session's row is sent."""
    import sqlite3

    homes = copy_real_homes(tmp_path / "homes", {"opencode": REAL_HOMES["opencode"]})
    store = homes["opencode"] / "opencode.db"
    writer = sqlite3.connect(store, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")

    def rename(content: str) -> None:
        writer.execute("UPDATE todo SET content = ? WHERE session_id = ? AND position = 1", (content, OPENCODE_MAIN))

    def plan_of(watch: AgentWatch, wait: float = 0) -> list[str]:
        row = {row["sessionId"]: row for row in watch.rows(wait=wait)}[f"opencode:{OPENCODE_MAIN}"]
        return [item["content"] for item in row["projections"]["values"]["todos"]]

    writer.execute("INSERT INTO session SELECT 'ses_other', project_id, workspace_id, NULL, slug || '2', directory, "
                   "path, 'Another', version, share_url, summary_additions, summary_deletions, summary_files, "
                   "summary_diffs, metadata, cost, tokens_input, tokens_output, tokens_reasoning, tokens_cache_read, "
                   "tokens_cache_write, revert, permission, agent, model, time_created, time_updated, "
                   "time_compacting, time_archived FROM session WHERE id = ?", (OPENCODE_MAIN,))
    rename("Fix the parser, first")
    watch = AgentWatch(["opencode"], homes)
    sent: list[list[str]] = []
    watch.on_change = lambda rows, removed: sent.append([row["sessionId"] for row in rows])
    watch.start()
    try:
        assert plan_of(watch, wait=10)[1] == "Fix the parser, first"
        writer.execute("PRAGMA wal_checkpoint(RESTART)")  # the store file changes: read again, the same plan
        time.sleep(0.6)
        size = os.stat(f"{store}-wal").st_size
        rename("Fix the parser, again")
        assert os.stat(f"{store}-wal").st_size == size  # the scenario: nothing grew
        deadline = time.monotonic() + 2
        while plan_of(watch)[1] != "Fix the parser, again" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert plan_of(watch)[1] == "Fix the parser, again"
        assert sent and all(ids == [f"opencode:{OPENCODE_MAIN}"] for ids in sent), sent
    finally:
        watch.stop()
        writer.close()
