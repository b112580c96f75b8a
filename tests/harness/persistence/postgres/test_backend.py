"""The PostgreSQL backend as the JSONL backend's twin: exact text, load and replay, recovery, one writer."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest

from dsh_todo.harness.persistence import (
    Batch,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    SessionPersistence,
    interrupted_turn_closers,
)
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.postgres import PgBackend
from dsh_todo.harness.persistence.postgres.reads import Reads
from dsh_todo.jsonutil import dumps

PLAN = [{"content": "read the code", "status": "in_progress"},
        {"content": "write the fix", "status": "pending"}]
ODD = {"zeta": 1, "alpha": {"y": [3, 2.5, None, True], "b": "ünï 🚀 \u2028 \"q\""}, "mid": 0.5, "big": 2**53 - 1}


def rows_of(url: str, schema: str, session_id: str) -> list[tuple[int, int, str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(f'SELECT seq, batch, type, event FROM "{schema}".dsh_todo_events WHERE session_id = %s '
                            "ORDER BY seq", (session_id,)).fetchall()


def open_turn(session: Any, turn: int = 1) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})


def close_turn(session: Any, turn: int = 1) -> None:
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def test_events_are_stored_as_their_exact_json_text(boot_pg: Any, pg_url: str, pg_schema: str) -> None:
    ctx = boot_pg()
    session = ctx.sessions.create("exact", cwd="/home/dev/ünï")
    open_turn(session)
    session.append("request/context", ODD)
    session.append("todo/write", {"todos": PLAN})
    close_turn(session)
    ctx.session_persistence.flush()
    rows = rows_of(pg_url, pg_schema, "exact")
    assert [row[0] for row in rows] == list(range(session.seq))
    assert [row[3] for row in rows] == [dumps(event) for event in session.events]
    assert [row[2] for row in rows] == [event["type"] for event in session.events]
    # One flush, one transaction, one batch.
    assert {row[1] for row in rows} == {0}
    with psycopg.connect(pg_url) as conn:
        kinds = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns WHERE "
                                  "table_schema = %s AND table_name = 'dsh_todo_events'", (pg_schema,)).fetchall())
        header = conn.execute(f'SELECT header FROM "{pg_schema}".dsh_todo_sessions WHERE id = %s',
                              ("exact",)).fetchone()
    assert kinds["event"] == "text"
    assert header is not None
    assert header[0] == dumps({"type": "session", "version": 4, "id": "exact",
                               "createdAt": session.header["createdAt"], "cwd": "/home/dev/ünï",
                               "isSeeded": False, "delegationDepth": 0})


def test_load_replays_the_log_with_key_order_and_the_standing_plan(boot_pg: Any) -> None:
    writer = boot_pg()
    session = writer.sessions.create("replay", cwd="/w")
    open_turn(session)
    session.append("request/context", ODD)
    session.append("todo/write", {"todos": PLAN})
    close_turn(session)
    writer.session_persistence.flush()
    written = list(session.events)
    writer.dispose()

    reader = boot_pg()
    loaded = reader.session_persistence.load("replay")
    assert [dumps(event) for event in loaded.events[:-1]] == [dumps(event) for event in written]
    assert loaded.events[-1]["type"] == "session/end-seed"
    assert list(loaded.events[2]["data"]) == ["zeta", "alpha", "mid", "big"]
    assert list(loaded.events[2]["data"]["alpha"]) == ["y", "b"]
    assert loaded.header["cwd"] == "/w"
    assert reader.session_projections.snapshot(loaded) == {"asOfSeq": 6, "values": {"todos": PLAN}}
    # Loaded sessions keep being persisted; the next turn clears the standing plan.
    loaded.append("turn/start", {"turn": 2})
    assert reader.session_projections.snapshot(loaded)["values"]["todos"] is None
    reader.session_persistence.flush()
    stored = reader.session_persistence.read("replay")
    assert [event["seq"] for event in stored.events] == list(range(8))
    assert stored.meta["cwd"] == "/w"


def test_batches_are_transactions_and_record_their_first_seq(boot_pg: Any, pg_url: str, pg_schema: str) -> None:
    ctx = boot_pg(batch_delay_ms=60_000)
    session = ctx.sessions.create("batches")
    open_turn(session)
    ctx.session_persistence.flush()
    session.append("todo/write", {"todos": PLAN})
    session.append("todo/write", {"todos": []})
    close_turn(session)
    ctx.session_persistence.flush()
    assert [row[1] for row in rows_of(pg_url, pg_schema, "batches")] == [0, 0, 2, 2, 2, 2]


def test_a_dead_writers_open_turn_is_closed_like_jsonl(boot_pg: Any, tmp_path: Path) -> None:
    writer = boot_pg()
    session = writer.sessions.create("crashed", cwd="/w")
    open_turn(session)
    call = {"type": "tool-call", "id": "call_1", "name": "todo_write", "arguments": "{}"}
    session.append("assistant/message", {"turn": 1, "step": 1, "message": {"role": "assistant", "content": [call]}},
                   surface_op="append")
    session.append("tool/call", {"turn": 1, "step": 1, "callId": "call_1", "name": "todo_write", "arguments": "{}"})
    session.append("todo/write", {"todos": PLAN})
    writer.session_persistence.flush()
    written = list(session.events)
    writer.dispose()  # releases the lock with the turn still open, as a crash would leave it

    # The JSONL backend, given the same events, appends these closers.
    jsonl = JsonlBackend(tmp_path / "jsonl", "none")
    log = jsonl.create({"id": "crashed", "createdAt": 1, "cwd": "/w"})
    log.append(written)
    log.close()
    expected = jsonl.load("crashed").closers
    assert [event["type"] for event in expected] == ["tool/result", "step/end", "turn/end"]

    reader = boot_pg()
    loaded = reader.session_persistence.load("crashed")
    closers = list(loaded.events[len(written):-1])
    assert [dumps(event) for event in closers] == [dumps(event) for event in expected]
    assert loaded.events[-1]["type"] == "session/end-seed"
    assert closers == interrupted_turn_closers(written, {"version": 4})
    assert closers[0]["data"]["message"]["role"] == "tool"  # both stores write a new log in format v4
    assert reader.session_projections.snapshot(loaded)["values"]["todos"] == PLAN
    reader.dispose()

    again = boot_pg().session_persistence
    stored = again.backend.load("crashed")
    assert stored.closers == [] and not stored.rewrote
    assert len(stored.events) == len(written) + 4  # the closers and the resume's end-seed


def test_a_second_writer_is_refused_naming_the_holder(boot_pg: Any) -> None:
    first = boot_pg()
    first.sessions.create("taken").append("turn/start", {"turn": 1})
    second = boot_pg()
    with pytest.raises(SessionLockedError) as refused:
        second.sessions.create("taken")
    message = str(refused.value)
    assert message.startswith('session "taken" is already open for writing by process '
                              f"{os.getpid()} on {socket.gethostname()} (PostgreSQL backend ")
    assert message.endswith("a session log takes one writer at a time")
    assert refused.value.holder_pid == os.getpid()
    assert second.sessions.get("taken") is None  # refused by persistence: it never went live
    first.session_persistence.flush()
    with pytest.raises(SessionLockedError):
        second.session_persistence.load("taken")
    first.sessions.close("taken")  # closing flushes and unlocks
    loaded = second.session_persistence.load("taken")
    assert loaded.seq == 3 and loaded.events[1]["data"]["reason"] == {"kind": "interrupted"}


def test_a_rival_names_a_holder_that_records_itself_just_after_locking(boot_pg: Any, pg_url: str) -> None:
    """Repro (a flaky run of ``test_two_processes_racing_for_one_session…``): the winner takes the advisory lock,
    then records who it is; a rival refused in between named only "PostgreSQL backend <pid>". The rival now waits a
    moment for the record, so the refusal names the process whatever the timing."""
    import threading

    from dsh_todo.harness.persistence.postgres.locking import lock_key, record_holder, try_lock

    backend = boot_pg().session_persistence.backend
    key = lock_key(backend.tables.schema, "racy")
    with psycopg.connect(pg_url, autocommit=True) as holder:
        assert try_lock(holder, key)
        late = threading.Timer(0.15, lambda: record_holder(holder, backend.tables, "racy", 4242))
        late.start()
        try:
            with pytest.raises(SessionLockedError) as refused:
                backend.lock_session("racy")
        finally:
            late.join()
    assert "already open for writing by process 4242 on " in str(refused.value)
    assert refused.value.holder_pid == 4242


def test_creating_over_a_stored_session_and_loading_a_missing_one(boot_pg: Any) -> None:
    ctx = boot_pg()
    ctx.sessions.create("there").append("turn/start", {"turn": 1})
    ctx.session_persistence.flush()
    store = cast(PgBackend, ctx.session_persistence.backend)
    ctx.sessions.close("there")
    with pytest.raises(SessionExistsError):
        store.create({"id": "there", "createdAt": 1})
    with pytest.raises(SessionNotFoundError):
        ctx.session_persistence.load("nowhere")
    with pytest.raises(SessionNotFoundError):
        ctx.session_persistence.read("nowhere")
    # A session that never wrote leaves no row behind.
    ctx.sessions.create("empty")
    ctx.sessions.close("empty")
    assert store.locate("empty") is None
    assert [entry.id for entry in ctx.session_persistence.stored_sessions()] == ["there"]


def test_a_writers_refusals_word_for_word(boot_pg: Any) -> None:
    store = cast(PgBackend, boot_pg().session_persistence.backend)
    where = store.location
    writer = store.create({"id": "w", "createdAt": 1})
    with pytest.raises(ValueError) as mismatch:
        writer.append([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
                       {"type": "turn/end", "seq": 5, "time": 2, "data": {"turn": 1}}])
    assert str(mismatch.value) == 'append seq mismatch for "w": expected 1, got 5'
    writer.append([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
    with pytest.raises(SessionLockedError) as held:
        store.resume("w")
    assert str(held.value).endswith(f" in {where}); a session log takes one writer at a time")
    writer.close()
    with pytest.raises(RuntimeError) as closed:
        writer.append([{"type": "turn/end", "seq": 1, "time": 2, "data": {"turn": 1}}])
    assert str(closed.value) == 'the writer of session "w" is closed'
    with pytest.raises(SessionExistsError) as exists:
        store.create({"id": "w", "createdAt": 1})
    assert str(exists.value) == (f'session "w" already has a log in {where}; load it to go on with it, or pick '
                                 "another id")
    with pytest.raises(SessionExistsError) as differs:
        store.continue_live("w", [])
    assert str(differs.value) == str(exists.value)
    with pytest.raises(SessionNotFoundError) as missing:
        store.resume("x")
    assert str(missing.value) == f'session "x" has no stored log in {where}'


def test_unknown_event_types_are_refused_unless_ignorable(boot_pg: Any) -> None:
    ctx = boot_pg()
    session = ctx.sessions.create("future")
    session.append("turn/start", {"turn": 1})
    session.append("future/thing", {}, ignorable=True)
    ctx.session_persistence.flush()
    assert len(ctx.session_persistence.read("future").events) == 2
    session.append("future/widget", {})
    ctx.sessions.close("future")
    with pytest.raises(SessionFormatUnsupportedError, match=r'contains event type "future/widget" \(seq 2\) unknown'):
        ctx.session_persistence.read("future")
    with pytest.raises(SessionFormatUnsupportedError):
        ctx.session_persistence.load("future")


def test_a_writer_whose_connection_died_reconnects_and_relocks(boot_pg: Any, pg_url: str) -> None:
    ctx = boot_pg()
    persistence: SessionPersistence = ctx.session_persistence
    session = ctx.sessions.create("flaky")
    open_turn(session)
    persistence.flush()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name LIKE 'dsh-todo writer %%' AND pid <> pg_backend_pid()"
                               ).fetchall()
    assert killed
    session.append("todo/write", {"todos": PLAN})
    close_turn(session)
    persistence.flush()  # the dead socket is noticed, the writer reconnects, locks again and writes
    stored = persistence.read("flaky")
    assert [dumps(event) for event in stored.events] == [dumps(event) for event in session.events]
    with pytest.raises(SessionLockedError):
        boot_pg().sessions.create("flaky")


def test_a_new_sessions_writer_that_lost_its_connection_still_stores_the_header_with_its_first_batch(
        boot_pg: Any, pg_url: str) -> None:
    store = cast(PgBackend, boot_pg().session_persistence.backend)
    writer = store.create({"id": "fresh", "createdAt": 5, "cwd": "/w"})
    with psycopg.connect(pg_url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE application_name LIKE 'dsh-todo writer %%' AND pid <> pg_backend_pid()"
                             ).fetchall()
    writer.append([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
    writer.append([{"type": "turn/end", "seq": 1, "time": 2, "data": {"turn": 1, "reason": {"kind": "completed"}}}])
    writer.close()
    stored = store.read("fresh")
    assert stored.meta == {"version": 4, "id": "fresh", "createdAt": 5, "cwd": "/w", "isSeeded": False,
                           "delegationDepth": 0}
    assert [event["seq"] for event in stored.events] == [0, 1] and stored.batches == [0, 1]


def test_checkpoints_are_exact_text_and_never_move_backwards_or_ahead(boot_pg: Any) -> None:
    ctx = boot_pg()
    session = ctx.sessions.create("cp")
    open_turn(session)
    session.append("todo/write", {"todos": PLAN})
    store = cast(PgBackend, ctx.session_persistence.backend)
    header = session.header
    rows = {"todos": {"ver": 2, "seq": 2, "val": PLAN}}
    store.write_checkpoint("cp", header, rows, 2, Batch(0, 2))  # nothing stored yet: refused
    assert store.read_checkpoint("cp") is None
    ctx.session_persistence.flush()
    record = {"identity": {"createdAt": header["createdAt"]}, "rows": rows}
    store.write_checkpoint("cp", header, rows, 2, Batch(0, 2))
    store.write_checkpoint("cp", header, {}, 1, Batch(0, 2))  # older: ignored
    store.write_checkpoint("cp", header, rows, 3, Batch(0, 3))  # beyond the stored log: ignored
    assert store.read_checkpoint("cp") == (record, 2)
    found = store.read_checkpointed("cp")
    assert found is not None and found.rows == rows and found.base == 3 and found.tail == []
    restored = ctx.session_projections.restore(rows, store.read_from("cp", -1), 0)
    assert restored.snapshot["values"]["todos"] == PLAN


def test_the_runtime_swaps_the_persistence_row_for_a_database(pg_url: str) -> None:
    from dsh_todo.standard import composition

    rows = composition("/some/root", database=pg_url)
    persistence = [row for row in rows if row["id"] == "persistence"]
    assert persistence == [{"id": "persistence", "name": "@deepseek-ai/dsh-session-persistence-postgres",
                            "config": {"url": pg_url, "writeBatchMaxDelayMs": 200}}]


def test_projection_checkpoints_commit_with_their_turn_end_and_restore_cold(boot_pg: Any) -> None:
    ctx = boot_pg(batch_delay_ms=60_000)
    persistence: SessionPersistence = ctx.session_persistence
    store = cast(PgBackend, persistence.backend)
    session = ctx.sessions.create("checkpointed", cwd="/w")
    open_turn(session)
    session.append("todo/write", {"todos": PLAN})
    close_turn(session)  # seq 4: turn/end stages the checkpoint; nothing is written before the batch is
    assert store.read_checkpoint("checkpointed") is None
    persistence.flush()
    ctx.get("session_projection_cache").settle()  # the checkpoint is written behind, off the flush's path
    record, as_of = store.read_checkpoint("checkpointed") or ({}, -1)
    assert as_of == 4
    assert record == {"identity": {"createdAt": session.header["createdAt"], "cwd": "/w"},
                      "rows": {"todos": {"ver": 2, "seq": 4, "val": PLAN}}}
    session.append("turn/start", {"turn": 2})
    session.append("todo/write", {"todos": []})
    ctx.sessions.close("checkpointed")  # closing checkpoints the last event
    record, as_of = store.read_checkpoint("checkpointed") or ({}, -1)
    assert as_of == 6 and record["rows"]["todos"] == {"ver": 2, "seq": 6, "val": []}
    cache = ctx.get("session_projection_cache")
    assert cache.restore("checkpointed").snapshot == {"asOfSeq": 6, "values": {"todos": []}}
    # A row from another stateVersion is refolded from seq 0; the answer is the same.
    store.write_checkpoint("checkpointed", session.header, {"todos": {"ver": 1, "seq": 6, "val": PLAN}}, 6,
                           Batch(6, 6))
    assert store.read_checkpoint("checkpointed") is not None
    assert cache.restore("checkpointed").snapshot == {"asOfSeq": 6, "values": {"todos": []}}


def test_the_feed_reads_new_events_through_a_reader_of_its_own(pg_url: str, pg_schema: str) -> None:
    """Repro: the event feed built a second whole ``PgBackend`` (writer locks, checkpoints, a feed of its own to
    start) only to read ``seq > n`` on each ``NOTIFY`` (decision 0043). It reads through a :class:`Reads` on its own
    connection; following a schema whose tables do not exist yet still hears every event committed after."""
    backend = PgBackend(pg_url, schema=pg_schema)
    received: list[int] = []
    arrived = threading.Event()

    def on_events(events: Sequence[Any]) -> None:
        received.extend(event["seq"] for event in events)
        if received[-1] >= 2:
            arrived.set()

    try:
        subscription = backend.follow("fed", -1, on_events)
        feed = backend._feed
        assert feed is not None and type(feed.reader) is Reads
        writer = backend.create({"id": "fed", "createdAt": 1})
        try:
            writer.append([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
            writer.append([{"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1}},
                           {"type": "step/end", "seq": 2, "time": 3, "data": {"turn": 1, "step": 1}}])
        finally:
            writer.close()
        assert arrived.wait(10)
        subscription.close()
    finally:
        backend.close()
    assert received == [0, 1, 2]
