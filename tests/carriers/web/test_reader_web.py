"""The page's session list and history over damaged and mixed roots: the reader's verdict, never a bare 500.

Each test's docstring keeps the repro of the defect it pins.
"""

from __future__ import annotations

from typing import Any

from tests.carriers.web.conftest import Web
from tests.crafted import A_ID, B_ID, broken_json_middle, copied_elsewhere, malformed_todos, mixed_encodings


def session_list(web: Web) -> tuple[int, dict[str, Any]]:
    return web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                          "payload": {}})


def test_one_damaged_session_is_a_row_with_its_error(web: Web) -> None:
    """Repro: a root with a healthy session and a copy of it in another session directory. ``session.list``
    answered 500 (``could not list the session root: corrupt session log …``) and the page showed no session."""
    copy = copied_elsewhere(web.root)
    status, body = session_list(web)
    assert status == 200
    rows = {row["sessionId"]: row for row in body["result"]["value"]["sessions"]}
    assert set(rows) == {A_ID, "a-copy"}
    assert "error" not in rows[A_ID]
    error = rows["a-copy"]["error"]
    assert error["code"] == "corrupt-log"
    assert error["message"].startswith(f"{copy} is not where its header puts it")


def test_a_malformed_standing_plan_fails_the_tail_read_with_internal(web: Web) -> None:
    """Repro: a stored log whose standing ``todo/write`` carries ``{"todos":"x"}``: the tail read must fail with
    SPEC §13.10's structured ``internal`` error naming the event; earlier pages (no projections) still read, and
    the session list shows the row with that reason."""
    malformed_todos(web.root)
    reason = ("the standing plan cannot be shown: the todo/write at seq 165 is malformed "
              "(todos must be a list or null)")
    status, body = web.history(B_ID)
    assert status == 500
    assert body["result"] == {"ok": False, "error": {"code": "internal", "message": reason, "details": {}}}
    status, body = web.history(B_ID, beforeSeq=100)
    assert status == 200
    assert "projections" not in body["result"]["value"]
    rows = session_list(web)[1]["result"]["value"]["sessions"]
    assert rows == [{"sessionId": B_ID, "live": False, "cwd": "/home/dev/projects/storage-migration",
                     "createdAt": rows[0]["createdAt"], "error": {"code": "internal", "message": reason},
                     "state": "refused"}]


def test_broken_json_after_a_good_envelope_is_a_corrupt_log(web: Web) -> None:
    broken_json_middle(web.root)
    status, body = web.history(B_ID)
    assert status == 422
    assert body["result"]["error"]["code"] == "corrupt-log"
    assert body["result"]["error"]["message"] == "corrupt session log: unparsable committed event at line 24"


def test_raw_and_zstd_logs_mix_under_the_served_root(web: Web) -> None:
    """Repro: the page's runtime writes zstd; a raw log copied under its root made ``session.list`` answer 500
    (``… select the matching compression mode``) and the raw session's history unreadable."""
    mixed_encodings(web.root)
    status, body = session_list(web)
    assert status == 200
    assert sorted(row["sessionId"] for row in body["result"]["value"]["sessions"]) == sorted([A_ID, B_ID])
    for session_id, todos in ((A_ID, 3), (B_ID, 0)):
        status, body = web.history(session_id)
        assert status == 200, body
        assert len(body["result"]["value"]["projections"]["values"]["todos"]) == todos


def test_a_raw_log_under_the_served_root_is_followed(web: Web) -> None:
    """Repro: the page's runtime writes zstd; subscribing to a raw session copied under its root
    (``/api/events.mux?sessionId=<raw>&afterSeq=-1``) closed the stream (the follower's store refused the root)."""
    mixed_encodings(web.root)
    reader = web.open_stream(f"?sessionId={A_ID}&afterSeq=-1")
    try:
        first = reader.frame()["payload"]
        assert first == {"type": "session/subscribed", "sessionId": A_ID, "lastSeq": 81}
        replayed = reader.payloads_until(lambda p: p["type"] == "session/event" and p["event"]["seq"] == 81)
        assert [p["event"]["seq"] for p in replayed if p["type"] == "session/event"] == list(range(82))
    finally:
        reader.close()
