"""``session.list`` rows carry what a person needs to tell sessions apart without opening them (issue 23): a title,
the project, the last write, the standing plan and a state that is the backend's word, never a guess.

Repro (before): a row was ``{sessionId, live, cwd?, createdAt?}``; stored rows had no plan, no time, no title and no
state, and the page's "● Live" was its own connection's state, shown on sessions that had ended long ago.
"""

from __future__ import annotations

import os
import time
from typing import Any

from dsh_todo.harness import Context
from dsh_todo.harness.session import Session
from tests.carriers.web.conftest import Web
from tests.crafted import copied_elsewhere

PLAN = [{"content": "read the code", "status": "completed"}, {"content": "write the fix", "status": "in_progress"}]


def rows_of(web: Web) -> dict[str, dict[str, Any]]:
    status, body = web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                                  "payload": {}})
    assert status == 200, body
    return {row["sessionId"]: row for row in body["result"]["value"]["sessions"]}


def user(session: Session, text: str) -> None:
    session.append("user/message", {"content": [{"type": "text", "text": text}], "source": {"kind": "user"},
                                    "role": "user", "id": f"u{session.seq}"}, surface_op="append")


def one_turn(ctx: Context, session_id: str, end: dict[str, Any] | None, *, prompt: str | None = "fix the bug",
             release: bool = True) -> Session:
    session = ctx.sessions.create(session_id, cwd="/home/dev/shop")
    session.append("turn/start", {"turn": 1})
    if prompt is not None:
        user(session, prompt)
    session.append("todo/write", {"todos": PLAN})
    if end is not None:
        session.append("turn/end", {"turn": 1, "reason": end})
    ctx.session_persistence.flush()
    if release:
        ctx.session_persistence.release(session_id)
    return session


def test_stored_rows_say_how_their_last_turn_ended(web: Web) -> None:
    writer = web.other_process()
    one_turn(writer, "ended", {"kind": "completed"})
    one_turn(writer, "aborted", {"kind": "aborted", "reason": {"kind": "user"}})
    one_turn(writer, "failed", {"kind": "error", "error": {"message": "boom"}})
    one_turn(writer, "capped", {"kind": "max-tokens"})
    one_turn(writer, "crashed", None)  # the writer went away mid-turn: recovery closes it as interrupted
    one_turn(writer, "running", None, release=False)  # its writer holds the lock: live, whatever its last event
    rows = rows_of(web)
    states = {session_id: (row["state"], row.get("turnEnd")) for session_id, row in rows.items()}
    assert states == {"ended": ("ended", "completed"), "aborted": ("aborted", "aborted"), "failed": ("error", "error"),
                      "capped": ("ended", "max-tokens"), "crashed": ("interrupted", None), "running": ("live", None)}
    assert rows["crashed"]["recovered"].startswith("recovered in memory")
    for row in rows.values():
        assert row["live"] is False  # not live in the web server's own process
        assert row["cwd"] == "/home/dev/shop"
        assert row["title"] == "fix the bug"
        assert row["projections"]["values"] == {"todos": PLAN}


def test_live_means_a_writer_holds_the_lock_now(web: Web) -> None:
    """A session whose turn ended is still live while its writer holds it, and ends when the writer lets go."""
    writer = web.other_process()
    session = one_turn(writer, "agent", {"kind": "completed"}, release=False)
    assert rows_of(web)["agent"]["state"] == "live"
    writer.session_persistence.release(session.id)
    assert rows_of(web)["agent"]["state"] == "ended"


def test_title_is_the_first_user_message_trimmed_and_time_is_the_last_event(web: Web) -> None:
    writer = web.other_process()
    session = one_turn(writer, "titled", None, prompt="  Add rate limiting\n\tto the  public API  ",
                       release=False)
    user(session, "a later message is not the title")
    last = session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    one_turn(writer, "untitled", {"kind": "completed"}, prompt=None)
    writer.session_persistence.flush()
    rows = rows_of(web)
    assert rows["titled"]["title"] == "Add rate limiting to the public API"
    assert rows["titled"]["lastEventAt"] == last["time"]
    assert "title" not in rows["untitled"]  # the page shows the id


def test_a_long_title_is_bounded(web: Web) -> None:
    writer = web.other_process()
    one_turn(writer, "long", {"kind": "completed"}, prompt="word " * 100)
    title = rows_of(web)["long"]["title"]
    assert len(title) == 200
    assert title.endswith("…")


def test_live_rows_in_this_process_get_the_same_fields(web: Web) -> None:
    session = one_turn(web.ctx, "here", None, release=False)
    row = rows_of(web)["here"]
    assert (row["live"], row["state"], row["title"]) == (True, "live", "fix the bug")
    assert row["lastEventAt"] == session.events[-1]["time"]
    assert row["projections"]["values"] == {"todos": PLAN}


def test_a_refused_log_is_a_refused_row_with_the_readers_reason(web: Web) -> None:
    copied_elsewhere(web.root)
    row = rows_of(web)["a-copy"]
    assert row["state"] == "refused"
    assert row["error"]["code"] == "corrupt-log"
    assert "projections" not in row and "title" not in row


def test_rows_are_sorted_by_last_activity(web: Web) -> None:
    writer = web.other_process()
    old = one_turn(writer, "old", None, release=False)
    one_turn(writer, "new", {"kind": "completed"})
    time.sleep(0.01)  # event times are milliseconds
    old.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})  # now the most recent write
    writer.session_persistence.flush()
    _status, body = web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                                  "payload": {}})
    assert [row["sessionId"] for row in body["result"]["value"]["sessions"]] == ["old", "new"]


def test_a_stale_lock_file_naming_a_running_process_is_not_live(web: Web) -> None:
    """Repro: a writer killed mid-turn leaves ``session.lock`` naming its pid; once that pid belongs to another
    process (here: this test's own, which holds no lock on the file), the backend said a writer was alive, the row
    said ``live`` and the reader would not close the interrupted turn. The kernel's lock is what counts."""
    writer = web.other_process()
    one_turn(writer, "crashed", None)
    lock = web.root / "--home-dev-shop--" / "crashed" / "session.lock"
    lock.write_text(f"{os.getpid()}\n")  # what a killed writer leaves, its pid now reused
    row = rows_of(web)["crashed"]
    assert row["state"] == "interrupted"
    assert row["recovered"].startswith("recovered in memory")
