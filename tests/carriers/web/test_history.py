"""``POST /api/session.history`` and ``session.list`` (SPEC §6.3): exact envelopes, paging, projections, errors."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest

from dsh_todo.carriers.web.history import page_bounds
from dsh_todo.jsonutil import dumps, dumps_bytes
from tests.carriers.web.conftest import PARALLEL_PLAN, Web, build_fixture_session, reply, run_turn, todo_call

PLAN = [{"content": c, "status": s} for c, s in PARALLEL_PLAN]


def test_tail_page_is_the_exact_envelope_with_views_and_projections(web: Web) -> None:
    session = build_fixture_session(web.ctx)
    events = list(session.events)
    body = dumps({"type": "client-request", "rpcId": "rpc-7", "method": "session.history",
                  "payload": {"sessionId": "fx-alpha"}}).encode()
    request = urllib.request.Request(web.url("/api/session.history"), data=body,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        assert response.headers["content-type"] == "application/json"
    entries: list[dict[str, Any]] = []
    for event in events:
        entry: dict[str, Any] = {"event": event}
        if event["type"] == "tool/call":
            entry["view"] = {"for": "call", "view": {"card": "generic", "title": "Update todo list", "kind": "other",
                                                     "rawInput": PLAN}}
        entries.append(entry)
    expected = {"type": "server-response", "rpcId": "rpc-7", "result": {"ok": True, "value": {
        "events": entries, "hasMore": False,
        "projections": {"asOfSeq": len(events) - 1, "values": {"todos": PLAN}}}}}
    assert raw == dumps_bytes(expected)


def test_a_cold_session_reads_from_the_root_and_restores_its_projections(web: Web) -> None:
    writer = web.other_process()
    build_fixture_session(writer)
    writer.session_persistence.flush()
    assert web.ctx.sessions.get("fx-alpha") is None
    status, body = web.history("fx-alpha")
    assert status == 200
    value = body["result"]["value"]
    assert value["projections"]["values"] == {"todos": PLAN}
    assert value["projections"]["asOfSeq"] == value["events"][-1]["event"]["seq"]
    assert [e["event"]["type"] for e in value["events"]][-1] == "turn/end"

    status, listing = web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                                     "payload": {}})
    assert status == 200
    rows = listing["result"]["value"]["sessions"]
    assert [(r["sessionId"], r["live"], r["cwd"]) for r in rows] == [("fx-alpha", False, "/fixture/project")]


def test_the_next_turn_start_clears_the_standing_plan_to_null(web: Web) -> None:
    session = build_fixture_session(web.ctx)
    session.append("turn/start", {"turn": 2})
    value = web.history("fx-alpha")[1]["result"]["value"]
    assert value["projections"] == {"asOfSeq": session.seq - 1, "values": {"todos": None}}


def many_turns(web: Web, turns: int = 3) -> Any:
    session = web.ctx.sessions.create("paged")
    for turn in range(1, turns + 1):
        run_turn(web.ctx, session, f"prompt {turn}", [
            reply(f"plan {turn}", todo_call(f"call_{turn}", (f"step {turn}", "in_progress"))),
            reply(f"done {turn}"),
        ])
    return session


def test_pages_walk_back_by_messages_and_only_the_tail_carries_projections(web: Web) -> None:
    session = many_turns(web)
    events = list(session.events)
    seen: list[dict[str, Any]] = []
    before: int | None = None
    pages = 0
    while True:
        payload: dict[str, Any] = {"maxMessages": 2}
        if before is not None:
            payload["beforeSeq"] = before
        status, body = web.history("paged", **payload)
        assert status == 200
        value = body["result"]["value"]
        page = [entry["event"] for entry in value["events"]]
        assert ("projections" in value) == (before is None)
        messages = [e for e in page if e["type"] in ("user/message", "assistant/message", "tool/result")]
        assert len(messages) == 2 if value["hasMore"] else 1 <= len(messages) <= 2
        for event in page:
            if event["type"] == "tool/result":
                assert event["sourceEventSeqs"][0] >= page[0]["seq"]
        seen[:0] = page
        pages += 1
        if not value["hasMore"]:
            assert page[0]["seq"] == 0
            break
        before = page[0]["seq"]
    assert [e["seq"] for e in seen] == list(range(len(events)))
    assert pages >= 3


def test_page_bounds_reach_back_to_the_call_of_every_result() -> None:
    def ev(seq: int, kind: str, **extra: Any) -> dict[str, Any]:
        return {"type": kind, "seq": seq, "time": 0, "data": {}, **extra}

    events = [ev(0, "turn/start"), ev(1, "user/message"), ev(2, "assistant/message"), ev(3, "tool/call"),
              ev(4, "todo/write"), ev(5, "tool/result", sourceEventSeqs=[3]), ev(6, "assistant/message"),
              ev(7, "turn/end")]
    assert page_bounds(events, None, 1) == (6, 8)
    assert page_bounds(events, None, 2) == (3, 8)  # from the result at 5 back past the write to its call at 3
    assert page_bounds(events, 3, 1) == (2, 3)
    assert page_bounds(events, 2, 1) == (0, 2)  # the turn marker travels with its first message
    assert page_bounds(events, 3, 5) == (0, 3)
    assert page_bounds(events, None, 99) == (0, 8)
    assert page_bounds(events, 100, 1) == (6, 8)
    orphan = [ev(0, "user/message"), ev(1, "tool/call"), ev(2, "tool/result", sourceEventSeqs=[1]),
              ev(3, "assistant/message")]
    assert page_bounds(orphan, None, 2) == (1, 4)
    assert page_bounds([], None, 5) == (0, 0)


def test_no_registry_means_no_projections_block(tmp_path: Any) -> None:
    from dsh_todo.carriers.web.server import BackgroundServer
    from dsh_todo.harness import boot

    ctx = boot([{"id": "tools", "name": "@deepseek-ai/dsh-tools"},
                {"id": "session", "name": "@deepseek-ai/dsh-session"}])
    ctx.sessions.create("bare").append("turn/start", {"turn": 1})
    server = BackgroundServer(ctx)
    try:
        web = Web(ctx, tmp_path, server, server.start())
        value = web.history("bare")[1]["result"]["value"]
        assert "projections" not in value
        assert value["events"][0]["event"]["type"] == "turn/start"
    finally:
        server.stop()
        ctx.dispose()


@pytest.mark.parametrize(("session_id", "fragment"), [
    ("", "sessionId must be a string"),
    (42, "sessionId must be a string"),
    (None, "sessionId must be a string"),
    ("x" * 257, "sessionId must be a string"),
    ("bad\nid", "without control characters"),
    ("esc\x1b[31m", "without control characters"),
])
def test_invalid_session_ids_are_refused_with_the_rpc_id_echoed(web: Web, session_id: Any, fragment: str) -> None:
    status, body = web.history(session_id)
    assert status == 400
    assert body["rpcId"] == "rpc-1"
    assert body["result"]["ok"] is False
    assert body["result"]["error"]["code"] == "invalid-request"
    assert fragment in body["result"]["error"]["message"]


def test_unknown_and_hostile_but_valid_ids_are_simply_not_found(web: Web) -> None:
    for session_id in ("nope", "../../etc/passwd", "..", "<img src=x onerror=alert(1)>"):
        status, body = web.history(session_id)
        assert status == 404, session_id
        assert body["result"]["error"] == {"code": "not-found", "message": f'session "{session_id}" does not exist',
                                           "details": {"sessionId": session_id}}


@pytest.mark.parametrize(("payload", "message"), [
    ({"beforeSeq": -1}, "beforeSeq must be an integer at least 0"),
    ({"beforeSeq": True}, "beforeSeq must be an integer at least 0"),
    ({"beforeSeq": 1.5}, "beforeSeq must be an integer at least 0"),
    ({"maxMessages": 0}, "maxMessages must be an integer between 1 and 2000"),
    ({"maxMessages": 5000}, "maxMessages must be an integer between 1 and 2000"),
])
def test_paging_fields_are_validated(web: Web, payload: dict[str, Any], message: str) -> None:
    web.ctx.sessions.create("s")
    status, body = web.history("s", **payload)
    assert (status, body["result"]["error"]["message"]) == (400, message)


def test_malformed_envelopes_are_refused_clearly(web: Web) -> None:
    cases: list[tuple[bytes, str]] = [
        (b"{not json", "request body is not JSON"),
        (b"[]", "request body must be a JSON object"),
        (dumps_bytes({"type": "client-request", "method": "session.history", "payload": {}}), "rpcId must be"),
        (dumps_bytes({"type": "nope", "rpcId": "a", "method": "session.history", "payload": {}}),
         'type must be "client-request"'),
        (dumps_bytes({"type": "client-request", "rpcId": "a", "method": "session.list", "payload": {}}),
         'method must be "session.history" on this endpoint'),
        (dumps_bytes({"type": "client-request", "rpcId": "a", "method": "session.history", "payload": []}),
         "payload must be an object"),
    ]
    for raw, fragment in cases:
        status, body = web.post("/api/session.history", None, raw=raw)
        assert status == 400
        assert fragment in body["result"]["error"]["message"]


def test_oversized_bodies_get_a_clear_413(web: Web) -> None:
    big = dumps_bytes({"type": "client-request", "rpcId": "big", "method": "session.history",
                       "payload": {"sessionId": "s", "pad": "x" * 70_000}})
    status, body = web.post("/api/session.history", None, raw=big)
    assert status == 413
    assert body["result"]["error"] == {"code": "payload-too-large",
                                       "message": "request body exceeds the 65536-byte limit",
                                       "details": {"limit": 65536}}


def test_api_bodies_must_be_json(web: Web) -> None:
    status, body = web.post("/api/session.history", None, raw=b"{}", headers={"content-type": "text/plain"})
    assert (status, body["result"]["error"]["code"]) == (415, "unsupported-media-type")


def test_live_sessions_list_first_with_their_projections(web: Web) -> None:
    build_fixture_session(web.ctx)
    writer = web.other_process()
    writer.sessions.create("stored-one").append("turn/start", {"turn": 1})
    writer.session_persistence.flush()
    status, body = web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                                  "payload": {}})
    assert status == 200
    rows = {row["sessionId"]: row for row in body["result"]["value"]["sessions"]}
    assert rows["fx-alpha"]["live"] is True
    assert rows["fx-alpha"]["projections"]["values"] == {"todos": PLAN}
    assert rows["stored-one"]["live"] is False  # not live in this process: its writer is another runtime
    assert rows["stored-one"]["state"] == "live"  # ... which holds its lock
    # The reader's plan, in the same block: a turn started and nothing written yet.
    assert rows["stored-one"]["projections"] == {"asOfSeq": 0, "values": {"todos": None}}
