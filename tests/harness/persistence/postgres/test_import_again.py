"""``dsh-todo import`` of sessions the database already holds (issue 23): the same log is skipped, exit 0; a
different one is still an error naming it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dsh_todo.cli import main
from dsh_todo.standard import open_runtime
from tests.crafted import A_ID, B_ID, copy_fixture


def stored_rows(url: str, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(f'SELECT session_id, seq, batch, event FROM "{schema}".dsh_todo_events '
                            "ORDER BY session_id, seq").fetchall()


def test_importing_the_same_root_again_skips_every_session(tmp_path: Path, pg_url: str, pg_schema: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo import ROOT`` a second time printed ``… already has a persisted log …; load/resume it
    instead of creating`` for each session, then ``0 sessions imported, 2 failed``, and exited 1: importing again
    looked like a failure although the database held exactly those logs."""
    root = tmp_path / "root"
    copy_fixture("a-one-turn/none", root)
    copy_fixture("b-three-turns/zstd", root)
    database = ["--database", pg_url, "--schema", pg_schema]
    assert main(["import", str(root), *database]) == 0
    before = stored_rows(pg_url, pg_schema)
    capsys.readouterr()
    assert main(["import", str(root), *database]) == 0
    out, err = capsys.readouterr()
    assert sorted(out.splitlines()) == sorted([f"{A_ID}: already imported, skipped",
                                               f"{B_ID}: already imported, skipped"])
    assert err.splitlines() == ["0 sessions imported, 2 already imported (skipped), 0 failed"]
    assert stored_rows(pg_url, pg_schema) == before


def test_a_session_whose_stored_log_differs_is_still_an_error(tmp_path: Path, pg_url: str, pg_schema: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    ctx = open_runtime(root)
    try:
        session = ctx.sessions.create("s1", cwd="/p")
        session.append("turn/start", {"turn": 1})
        ctx.session_persistence.flush()
    finally:
        ctx.dispose()
    database = ["--database", pg_url, "--schema", pg_schema]
    assert main(["import", str(root), *database]) == 0
    ctx = open_runtime(root)
    try:
        session = ctx.session_persistence.load("s1")
        session.append("turn/start", {"turn": 2})
        ctx.session_persistence.flush()
    finally:
        ctx.dispose()
    before = stored_rows(pg_url, pg_schema)
    capsys.readouterr()
    assert main(["import", str(root), *database]) == 1
    _, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 2, err
    there = len(before)
    assert re.fullmatch(r'dsh-todo import: s1: session "s1" is already in the database \S+ \(schema \w+\) with '
                        rf"other events \({there} there, \d+ here\); delete it there to import this log",
                        lines[0]), lines[0]
    assert lines[1] == "0 sessions imported, 1 failed"
    assert stored_rows(pg_url, pg_schema) == before
