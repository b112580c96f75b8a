"""``plan``, ``events``, ``sessions`` and ``watch`` with ``--database``: the same reader and verdicts over PostgreSQL.

A session stored in the database is named by id. Its writer's advisory lock says whether a turn is running (shown
as is) or was interrupted (closed in memory, reported as recovered), as the lock file does for JSONL logs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_todo.cli import main
from tests.harness.persistence.postgres.test_backend import PLAN, close_turn, open_turn


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_stored_session_is_read_by_id(boot_pg: Any, pg_url: str, pg_schema: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    ctx = boot_pg()
    session = ctx.sessions.create("pg-1", cwd="/w")
    open_turn(session)
    session.append("todo/write", {"todos": PLAN})
    close_turn(session)
    ctx.session_persistence.flush()
    db = ["--database", pg_url, "--schema", pg_schema]
    assert cli(capsys, "plan", "--json", *db, "pg-1") == (0, json.dumps(PLAN, separators=(",", ":")) + "\n", "")
    code, out, err = cli(capsys, "events", *db, "pg-1")
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == list(session.events)
    code, out, err = cli(capsys, "sessions", *db)
    assert (code, err) == (0, "")
    (row,) = out.splitlines()
    session_id, label, where, verdict = row.split("\t")
    assert (session_id, label, verdict) == ("pg-1", "1 in progress · 1 pending", "ok")
    assert where.startswith("postgresql://") and pg_schema in where
    assert cli(capsys, "watch", *db, "pg-1", "--seconds", "0.3", "--interval", "0.05") == (
        0, "plan: 1 in progress · 1 pending | now: read the code\n", "")


def test_a_running_turn_is_shown_as_is_and_an_abandoned_one_as_recovered(
        boot_pg: Any, pg_url: str, pg_schema: str, capsys: pytest.CaptureFixture[str]) -> None:
    ctx = boot_pg()
    session = ctx.sessions.create("pg-open", cwd="/w")
    open_turn(session)
    session.append("todo/write", {"todos": PLAN})
    ctx.session_persistence.flush()
    db = ["--database", pg_url, "--schema", pg_schema]
    code, out, err = cli(capsys, "events", *db, "pg-open")
    assert (code, err) == (0, "")  # the writer holds the lock: the turn is running
    assert len(out.splitlines()) == session.seq
    ctx.dispose()  # the writer is gone: the turn was interrupted
    code, out, err = cli(capsys, "events", *db, "pg-open")
    assert code == 0
    assert err == ("dsh-todo events: recovered in memory (the log is unchanged): closed the interrupted turn 1 with "
                   "step/end, turn/end\n")
    assert [json.loads(line)["type"] for line in out.splitlines()][-2:] == ["step/end", "turn/end"]


def test_refusals_are_one_line(boot_pg: Any, pg_url: str, pg_schema: str, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = boot_pg()
    session = ctx.sessions.create("pg-bad", cwd="/w")
    open_turn(session)
    session.append("todo/write", {"todos": "x"})  # hand-written: no invariant is mounted to stop it
    close_turn(session)
    ctx.session_persistence.flush()
    monkeypatch.setenv("DSH_TODO_DATABASE_URL", pg_url)  # the default database
    reason = "the standing plan cannot be shown: the todo/write at seq 2 is malformed (todos must be a list or null)"
    assert cli(capsys, "plan", "--schema", pg_schema, "pg-bad") == (2, "", f"dsh-todo plan: {reason}\n")
    code, out, _ = cli(capsys, "sessions", "--schema", pg_schema)
    assert code == 0
    assert out.split("\t")[3] == f"refused: {reason}\n"
    code, out, err = cli(capsys, "plan", "--schema", pg_schema, "nope")
    assert (code, out) == (2, "")
    assert err.startswith('dsh-todo plan: session "nope" has no stored log in postgresql://')
    assert err.count("\n") == 1
    code, out, err = cli(capsys, "plan", "--database", "postgresql://127.0.0.1:1/none?connect_timeout=2", "x")
    assert (code, out) == (2, "")
    assert err.startswith("dsh-todo plan: cannot open the database postgresql://127.0.0.1:1/none")
    assert err.count("\n") == 1
