"""``GET /api/events.mux`` (SPEC §6.3, §6.4): the exact SSE bytes, push-only-on-change, replay, and following."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.carriers.web.conftest import SseReader, Web

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
A = [{"content": "a", "status": "in_progress"}]
B = [{"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]


def kinds(payloads: list[dict[str, Any]]) -> list[str]:
    out = []
    for p in payloads:
        if p["type"] == "session/event":
            out.append(f"event:{p['event']['type']}@{p['event']['seq']}")
        elif p["type"] == "session/projection":
            out.append(f"projection:{json.dumps(p['value'], ensure_ascii=False)}@{p['seq']}")
        else:
            out.append(p["type"])
    return out


def is_event(kind: str) -> Any:
    return lambda p: p["type"] == "session/event" and p["event"]["type"] == kind


def test_the_stream_opens_with_connected_and_frames_are_exact_bytes(web: Web) -> None:
    session = web.ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    reader = web.open_stream("?sessionId=s")
    try:
        assert reader.response.status == 200
        assert reader.response.headers["content-type"].startswith("text/event-stream")
        assert reader.response.readline() == b": connected\n"
        assert reader.response.readline() == b"\n"
        subscribed = reader.message()
        event = session.append("todo/write", {"todos": A})
        event_message = reader.message()
        projection_message = reader.message()
    finally:
        reader.close()
    for message in (subscribed, event_message, projection_message):
        assert message.startswith("data: ") and "\n" not in message
    envelope = json.loads(subscribed[6:])
    assert envelope["payload"] == {"type": "session/subscribed", "sessionId": "s", "lastSeq": 0}
    rpc_id = json.loads(event_message[6:])["rpcId"]
    assert UUID.match(rpc_id)
    event_json = json.dumps(dict(event), ensure_ascii=False, separators=(",", ":"))
    assert event_message == (
        f'data: {{"type":"server-request","rpcId":"{rpc_id}","method":"session/event",'
        f'"payload":{{"type":"session/event","sessionId":"s","event":{event_json}}}}}')
    rpc_id = json.loads(projection_message[6:])["rpcId"]
    assert UUID.match(rpc_id)
    assert projection_message == (
        f'data: {{"type":"server-request","rpcId":"{rpc_id}","method":"session/projection",'
        '"payload":{"type":"session/projection","sessionId":"s","key":"todos",'
        f'"value":[{{"content":"a","status":"in_progress"}}],"seq":{event["seq"]}}}}}')


def test_projection_frames_are_pushed_only_when_the_state_reference_changes(web: Web) -> None:
    session = web.ctx.sessions.create("s")
    reader = web.open_stream("?sessionId=s")
    try:
        reader.frame()  # subscribed
        session.append("turn/start", {"turn": 1})           # 0: null -> null: no frame
        session.append("todo/write", {"todos": A})           # 1: frame
        session.append("todo/write", {"todos": A})           # 2: identical list, new reference: frame
        session.append("step/end", {"turn": 1, "step": 1})   # 3: unrelated: no frame
        session.append("turn/end", {"turn": 1})              # 4: plan stays: no frame
        session.append("turn/start", {"turn": 2})            # 5: plan cleared: frame null
        session.append("turn/end", {"turn": 2})              # 6
        session.append("turn/start", {"turn": 3})            # 7: already null: no frame
        session.append("todo/write", {"todos": []})          # 8: explicit empty list: frame []
        session.append("turn/end", {"turn": 3})              # 9: sentinel
        seen = reader.payloads_until(lambda p: p["type"] == "session/event" and p["event"]["seq"] == 9)
    finally:
        reader.close()
    assert kinds(seen) == [
        "event:turn/start@0",
        "event:todo/write@1", 'projection:[{"content": "a", "status": "in_progress"}]@1',
        "event:todo/write@2", 'projection:[{"content": "a", "status": "in_progress"}]@2',
        "event:step/end@3", "event:turn/end@4",
        "event:turn/start@5", "projection:null@5",
        "event:turn/end@6", "event:turn/start@7",
        "event:todo/write@8", "projection:[]@8",
        "event:turn/end@9",
    ]


def test_after_seq_replays_what_the_page_lacks_then_goes_live(web: Web) -> None:
    session = web.ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": A})
    session.append("turn/end", {"turn": 1})
    session.append("turn/start", {"turn": 2})
    session.append("todo/write", {"todos": B})
    reader = web.open_stream("?sessionId=s&afterSeq=1")
    try:
        first = reader.frame()["payload"]
        assert first == {"type": "session/subscribed", "sessionId": "s", "lastSeq": 4}
        replay = reader.payloads_until(is_event("todo/write"))
        replay.append(reader.frame()["payload"])
        session.append("turn/end", {"turn": 2})
        live = reader.payloads_until(is_event("turn/end"))
    finally:
        reader.close()
    assert kinds(replay) == ["event:turn/end@2", "event:turn/start@3", "projection:null@3", "event:todo/write@4",
                             'projection:[{"content": "a", "status": "completed"}, '
                             '{"content": "b", "status": "in_progress"}]@4']
    assert kinds(live) == ["event:turn/end@5"]


def test_without_after_seq_a_subscription_starts_from_now(web: Web) -> None:
    session = web.ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": A})
    reader = web.open_stream("?sessionId=s")
    try:
        assert reader.frame()["payload"]["lastSeq"] == 1
        session.append("turn/end", {"turn": 1})
        assert kinds([reader.frame()["payload"]]) == ["event:turn/end@2"]
    finally:
        reader.close()


def test_a_log_written_by_another_process_is_followed(web: Web) -> None:
    writer = web.other_process()
    session = writer.sessions.create("elsewhere")
    session.append("turn/start", {"turn": 1})
    writer.session_persistence.flush()
    reader = web.open_stream("?sessionId=elsewhere&afterSeq=-1")
    try:
        assert reader.frame()["payload"] == {"type": "session/subscribed", "sessionId": "elsewhere", "lastSeq": 0}
        assert kinds([reader.frame()["payload"]]) == ["event:turn/start@0"]
        session.append("todo/write", {"todos": A})
        writer.session_persistence.flush()
        got = reader.payloads_until(lambda p: p["type"] == "session/projection")
        session.append("turn/end", {"turn": 1})
        session.append("turn/start", {"turn": 2})
        writer.session_persistence.flush()
        cleared = reader.payloads_until(lambda p: p["type"] == "session/projection")
    finally:
        reader.close()
    assert kinds(got) == ["event:todo/write@1", 'projection:[{"content": "a", "status": "in_progress"}]@1']
    assert kinds(cleared) == ["event:turn/end@2", "event:turn/start@3", "projection:null@3"]
    assert web.ctx.sessions.get("elsewhere") is None  # followed, never loaded (no lock taken)


def test_a_session_that_does_not_exist_yet_is_delivered_once_it_starts_here(web: Web) -> None:
    reader = web.open_stream("?sessionId=later&afterSeq=-1")
    try:
        assert reader.frame()["payload"] == {"type": "session/subscribed", "sessionId": "later", "lastSeq": -1}
        session = web.ctx.sessions.create("later")
        session.append("turn/start", {"turn": 1})
        session.append("todo/write", {"todos": A})
        seen = reader.payloads_until(lambda p: p["type"] == "session/projection")
    finally:
        reader.close()
    assert kinds(seen) == ["event:turn/start@0", "event:todo/write@1",
                           'projection:[{"content": "a", "status": "in_progress"}]@1']


def test_an_unfiltered_stream_carries_every_live_session(web: Web) -> None:
    one = web.ctx.sessions.create("one")
    one.append("turn/start", {"turn": 1})
    reader = web.open_stream()
    try:
        assert reader.response.readline() == b": connected\n"
        two = web.ctx.sessions.create("two")
        two.append("turn/start", {"turn": 1})
        one.append("todo/write", {"todos": A})
        seen = reader.payloads_until(lambda p: p["type"] == "session/projection")
    finally:
        reader.close()
    assert [(p["sessionId"], p["type"]) for p in seen] == [
        ("two", "session/event"), ("one", "session/event"), ("one", "session/projection")]


def test_mux_parameters_are_validated(web: Web) -> None:
    for query, message in [("?sessionId=", "sessionId must be a string"),
                           ("?sessionId=s&afterSeq=x", "afterSeq must be an integer"),
                           ("?sessionId=s&afterSeq=-2", "afterSeq must be at least -1"),
                           ("?afterSeq=3", "afterSeq needs a sessionId")]:
        reader = SseReader(web.host, "/api/events.mux" + query)
        try:
            assert reader.response.status == 400, query
            assert json.loads(reader.response.read())["result"]["error"]["message"].startswith(message)
        finally:
            reader.close()


def test_stopping_the_server_ends_open_streams(tmp_path: Any) -> None:
    from dsh_todo.carriers.web.server import BackgroundServer
    from dsh_todo.standard import open_runtime

    ctx = open_runtime(None)
    server = BackgroundServer(ctx)
    server.start()
    reader = SseReader(f"127.0.0.1:{server.port}", "/api/events.mux")
    try:
        assert reader.response.readline() == b": connected\n"
        server.stop()
        assert reader.response.read() == b"\n"  # the rest of the comment's blank line, then a clean end
    finally:
        reader.close()
        ctx.dispose()


def test_a_second_follower_connection_is_never_told_an_older_last_seq_than_the_file(tmp_path: Any) -> None:
    """The page reads history, then subscribes: the lastSeq it hears must cover that history (it drops rows beyond)."""
    from dsh_todo.carriers.web.server import BackgroundServer
    from dsh_todo.standard import open_runtime

    root = tmp_path / "sessions"
    viewer = open_runtime(root)
    viewer.session_persistence.backend.follow_interval = 3600  # the follower never polls on its own here
    writer = open_runtime(root, batch_delay_ms=5)
    server = BackgroundServer(viewer)
    try:
        server.start()
        host = f"127.0.0.1:{server.port}"
        session = writer.sessions.create("slow")
        session.append("turn/start", {"turn": 1})
        writer.session_persistence.flush()
        first = SseReader(host, "/api/events.mux?sessionId=slow")
        assert first.frame()["payload"]["lastSeq"] == 0
        session.append("todo/write", {"todos": A})
        writer.session_persistence.flush()
        second = SseReader(host, "/api/events.mux?sessionId=slow&afterSeq=0")
        try:
            assert second.frame()["payload"] == {"type": "session/subscribed", "sessionId": "slow", "lastSeq": 1}
            assert kinds([second.frame()["payload"], second.frame()["payload"]]) == [
                "event:todo/write@1", 'projection:[{"content": "a", "status": "in_progress"}]@1']
            # The shared follower advanced for the first connection too.
            assert kinds([first.frame()["payload"], first.frame()["payload"]]) == [
                "event:todo/write@1", 'projection:[{"content": "a", "status": "in_progress"}]@1']
        finally:
            first.close()
            second.close()
    finally:
        server.stop()
        writer.dispose()
        viewer.dispose()
