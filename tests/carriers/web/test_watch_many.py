"""One mux connection for several sessions (the board): ``?sessionId=a&sessionId=b…``, each with its ``afterSeq``.

Repro (before): only the first ``sessionId`` counted, so a page that shows every agent's plan needed a connection
per session, and a browser opens six per server at most.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.carriers.web.conftest import Web

A = [{"content": "a", "status": "in_progress"}]


def test_one_connection_carries_every_watched_session_live_and_followed(web: Web) -> None:
    here = web.ctx.sessions.create("here")
    here.append("turn/start", {"turn": 1})
    writer = web.other_process()
    there = writer.sessions.create("there")
    there.append("turn/start", {"turn": 1})
    writer.session_persistence.flush()
    reader = web.open_stream("?sessionId=here&sessionId=there&afterSeq=0&afterSeq=0")
    try:
        subscribed = [reader.frame()["payload"], reader.frame()["payload"]]
        assert sorted((p["type"], p["sessionId"], p["lastSeq"]) for p in subscribed) == [
            ("session/subscribed", "here", 0), ("session/subscribed", "there", 0)]
        here.append("todo/write", {"todos": A})
        there.append("todo/write", {"todos": A})
        writer.session_persistence.flush()
        seen: list[dict[str, Any]] = []
        while {(p["sessionId"], p["type"]) for p in seen} != {
                ("here", "session/event"), ("here", "session/projection"),
                ("there", "session/event"), ("there", "session/projection")}:
            seen.append(reader.frame()["payload"])
    finally:
        reader.close()
    projections = {p["sessionId"]: (p["value"], p["seq"]) for p in seen if p["type"] == "session/projection"}
    assert projections == {"here": (A, 1), "there": (A, 1)}


def test_a_session_that_does_not_exist_yet_does_not_end_the_others(web: Web) -> None:
    here = web.ctx.sessions.create("here")
    reader = web.open_stream("?sessionId=nowhere&sessionId=here")
    try:
        payloads = [reader.frame()["payload"], reader.frame()["payload"]]
        assert {p["sessionId"] for p in payloads} == {"nowhere", "here"}
        here.append("turn/start", {"turn": 1})
        assert reader.frame()["payload"]["event"]["type"] == "turn/start"
    finally:
        reader.close()


@pytest.mark.parametrize(("query", "message"), [
    ("?sessionId=a&sessionId=a", "each sessionId may be named once"),
    ("?sessionId=a&sessionId=b&afterSeq=1", "afterSeq must be given once per sessionId, or not at all"),
    ("?sessionId=a&sessionId=b&afterSeq=1&afterSeq=x", "afterSeq must be an integer"),
    ("?" + "&".join(f"sessionId=s{n}" for n in range(65)), "a connection watches at most 64 sessions"),
])
def test_bad_watch_lists_are_refused_in_one_line(web: Web, query: str, message: str) -> None:
    reader = web.open_stream(query)
    try:
        assert reader.response.status == 400
        body = json.loads(reader.response.read())
        assert body["result"]["error"] == {"code": "invalid-request", "message": message, "details": {}}
    finally:
        reader.close()
