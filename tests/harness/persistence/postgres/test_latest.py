"""``plan --latest`` over PostgreSQL: the session whose last event is the newest (issue 21, "Findable")."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dsh_todo.cli import main


def test_plan_latest_in_a_database(boot_pg: Any, pg_url: str, pg_schema: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    ctx = boot_pg()
    for session_id, cwd in (("first", "/w/a"), ("second", "/w/b"), ("third", "/w/a")):
        session = ctx.sessions.create(session_id, cwd=cwd)
        session.append("turn/start", {"turn": 1})
        session.append("todo/write", {"todos": [{"content": session_id, "status": "pending"}]})
        ctx.session_persistence.flush()
        time.sleep(0.01)  # event times are in milliseconds
    ctx.sessions.get("first").append("todo/write", {"todos": [{"content": "first, again", "status": "pending"}]})
    ctx.session_persistence.flush()
    db = ["--database", pg_url, "--schema", pg_schema]
    assert main(["plan", "--latest", "--json", *db]) == 0
    out, err = capsys.readouterr()
    assert out == '[{"content":"first, again","status":"pending"}]\n'
    assert err.startswith("dsh-todo plan: the latest session is first (postgresql://")
    assert main(["plan", "--latest", "--project", "/w/b", "--json", *db]) == 0
    assert capsys.readouterr().out == '[{"content":"second","status":"pending"}]\n'
    assert main(["plan", "--latest", "--project", "/w/z", *db]) == 2
    assert capsys.readouterr().err.startswith("dsh-todo plan: no sessions of the project /w/z under postgresql://")
