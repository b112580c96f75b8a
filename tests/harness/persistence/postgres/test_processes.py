"""Several processes, one database: a race for one session, a writer killed mid-turn, a follower elsewhere."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import psycopg

from dsh_todo.harness.persistence import SessionPersistence
from dsh_todo.harness.persistence.postgres import PgBackend
from dsh_todo.jsonutil import dumps
from tests.conftest import REPO_ROOT

WORKER = "tests.harness.persistence.postgres.worker"


def worker(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen([sys.executable, "-m", WORKER, *args], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def test_two_processes_racing_for_one_session_one_wins_nothing_interleaves(
        boot_pg: Any, pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    boot_pg().session_persistence.stored_sessions()  # create the tables before the race
    go = tmp_path / "go"
    racers = [worker("race", pg_url, pg_schema, "contested", tag, str(go), "15") for tag in ("red", "blue")]
    for racer in racers:  # both booted and polling for the start signal
        assert racer.stdout is not None and racer.stdout.readline().strip() == "READY"
    go.touch()
    results = [finish(racer) for racer in racers]
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0, 3], results
    winner = next(out for code, out, _err in results if code == 0)
    loser = next(out for code, out, _err in results if code == 3)
    assert winner.strip() == "WON"
    assert loser.startswith('LOCKED session "contested" is already open for writing by process ')
    assert "a session log takes one writer at a time" in loser

    stored = boot_pg().session_persistence.read("contested")
    events = stored.events
    assert [event["seq"] for event in events] == list(range(17))
    tag = stored.meta["cwd"].removeprefix("/srv/")
    assert tag in ("red", "blue")
    plans = [event["data"]["todos"] for event in events if event["type"] == "todo/write"]
    assert plans == [[{"content": f"{tag} step {i}", "status": "in_progress"},
                      {"content": f"{tag} wrap up", "status": "pending"}] for i in range(15)]


def test_a_killed_writer_releases_its_lock_and_its_turn_is_closed_on_load(
        boot_pg: Any, pg_url: str, pg_schema: str) -> None:
    process = worker("crash", pg_url, pg_schema, "killed")
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "READY"
        ctx = boot_pg()
        try:
            ctx.sessions.create("killed")
        except Exception as exc:
            assert f"by process {process.pid} " in str(exc)
        else:
            raise AssertionError("the live writer's lock did not hold")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    deadline = time.monotonic() + 10
    while True:  # the server notices the dead connection at once on loopback; allow a moment
        try:
            session = ctx.session_persistence.load("killed")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    kinds = [event["type"] for event in session.events]
    assert kinds[-4:] == ["tool/result", "step/end", "turn/end", "session/end-seed"]
    assert session.events[-4]["data"]["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert session.events[-2]["data"]["reason"] == {"kind": "interrupted"}
    assert ctx.session_projections.snapshot(session)["values"]["todos"][0]["content"] == "crash step 0"


def test_a_follower_hears_events_another_process_commits(boot_pg: Any, pg_url: str, pg_schema: str) -> None:
    ctx = boot_pg()
    persistence: SessionPersistence = ctx.session_persistence
    received: list[dict[str, Any]] = []
    arrived = threading.Event()

    def on_events(events: Sequence[Any]) -> None:
        received.extend(events)
        if any(event["type"] == "turn/end" for event in events):
            arrived.set()

    subscription = persistence.follow("followed", -1, on_events)  # before the session even exists
    process = worker("append", pg_url, pg_schema, "followed", "5", "0.02")
    try:
        code, _out, err = finish(process)
        assert code == 0, err
        assert arrived.wait(10)
    finally:
        subscription.close()
    stored = persistence.read("followed").events
    assert [dumps(event) for event in received] == [dumps(event) for event in stored]
    assert [event["seq"] for event in received] == list(range(7))

    # A late follower starts from a seq and gets only what follows, then the live tail.
    async def tail() -> list[int]:
        seqs: list[int] = []
        feed = cast(PgBackend, persistence.backend).events("followed", 4)
        writer = worker("append", pg_url, pg_schema, "followed", "2", "0.02")
        try:
            async for events in feed:
                seqs += [event["seq"] for event in events]
                if seqs[-1] >= 11:
                    break
        finally:
            await feed.aclose()  # type: ignore[attr-defined]
            await asyncio.to_thread(finish, writer)
        return seqs

    assert asyncio.run(tail()) == [5, 6, 7, 8, 9, 10, 11]  # 7: the worker's resume marks the end of its seed


def test_the_follower_survives_losing_its_listening_connection(boot_pg: Any, pg_url: str, pg_schema: str) -> None:
    ctx = boot_pg()
    persistence: SessionPersistence = ctx.session_persistence
    writer_ctx = boot_pg()
    session = writer_ctx.sessions.create("resilient")
    session.append("turn/start", {"turn": 1})
    writer_ctx.session_persistence.flush()
    seen: list[int] = []
    done = threading.Event()

    def on_events(events: Sequence[Any]) -> None:
        seen.extend(event["seq"] for event in events)
        if seen[-1] >= 2:
            done.set()

    subscription = persistence.follow("resilient", -1, on_events)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name LIKE 'dsh-todo listener %%'")
    session.append("todo/write", {"todos": []})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    writer_ctx.session_persistence.flush()
    assert done.wait(15)
    subscription.close()
    assert seen == [0, 1, 2]
