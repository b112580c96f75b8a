"""Slow SSE readers (issue 13 item 4): each connection holds at most a page, a slow one never delays another, and a
dropped one resumes from the last seq it has (``afterSeq`` or ``Last-Event-ID``), or reads the history tail page.

Repro (before): one client that connected to ``/api/events.mux`` and never read while 50k events were written grew
``dsh-todo web`` from 40 MB to 170 MB (its queue took 20,000 frames before it was closed); 20 such clients, 190 MB;
fast readers lagged by a minute. A reconnection far behind was replayed everything it lacked at once, overflowing its
queue again.
"""

from __future__ import annotations

import asyncio
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dsh_todo.carriers.web.frames import QUEUE_LIMIT, REPLAY_LIMIT, Subscriber
from dsh_todo.carriers.web.history import HistorySource
from dsh_todo.carriers.web.mux import Hub
from dsh_todo.standard import open_runtime
from tests.carriers.web.conftest import Web, run_async
from tests.carriers.web.test_push import drain

PLAN = [{"content": "a", "status": "in_progress"}]


def test_a_connection_that_falls_a_page_behind_is_dropped_and_its_frames_let_go() -> None:
    ctx = open_runtime(None)
    session = ctx.sessions.create("s")

    async def scenario() -> tuple[Subscriber, Subscriber, list[dict[str, Any]], Hub]:
        hub = Hub(HistorySource(ctx), asyncio.get_running_loop())
        hub.start()
        slow, fast = Subscriber("s"), Subscriber("s")
        await hub.subscribe(slow, None)
        await hub.subscribe(fast, None)
        seen: list[dict[str, Any]] = []
        for number in range(2 * QUEUE_LIMIT):
            session.append("todo/write", {"todos": [{"content": f"t{number}", "status": "in_progress"}]})
            if number % 100 == 0:
                await asyncio.sleep(0)
                seen.extend(drain(fast))
        await asyncio.sleep(0)
        seen.extend(drain(fast))
        return slow, fast, seen, hub

    try:
        slow, fast, seen, hub = run_async(scenario)
    finally:
        ctx.dispose()
    assert slow.dropped and slow.closed
    assert slow.queue.qsize() == 1 and slow.queue.get_nowait() is None  # nothing held but the end of its stream
    assert hub._targeted["s"] == {fast}  # the hub forgot the slow one when it dropped it
    events = [p["event"]["seq"] for p in seen if p["type"] == "session/event"]
    assert events == list(range(2 * QUEUE_LIMIT))  # the fast reader missed nothing and was never dropped


def test_a_replay_is_at_most_a_page_and_a_page_further_behind_sees_the_gap() -> None:
    """A page that reconnects with ``afterSeq`` far behind gets the last ``REPLAY_LIMIT`` events only: the first
    one it sees is not its ``afterSeq + 1``, which tells it to read the history tail page."""
    ctx = open_runtime(None)
    session = ctx.sessions.create("s")
    total = REPLAY_LIMIT + 300
    for number in range(total):
        session.append("todo/write", {"todos": [{"content": f"t{number}", "status": "in_progress"}]})

    async def scenario() -> list[dict[str, Any]]:
        hub = Hub(HistorySource(ctx), asyncio.get_running_loop())
        hub.start()
        try:
            subscriber = Subscriber("s")
            await hub.subscribe(subscriber, 10)
            return drain(subscriber)
        finally:
            hub.close()

    try:
        payloads = run_async(scenario)
    finally:
        ctx.dispose()
    assert payloads[0] == {"type": "session/subscribed", "sessionId": "s", "lastSeq": total - 1}
    events = [p["event"]["seq"] for p in payloads if p["type"] == "session/event"]
    assert events == list(range(total - REPLAY_LIMIT, total))
    projections = [p for p in payloads if p["type"] == "session/projection"]
    assert len(projections) == REPLAY_LIMIT and projections[-1]["value"][0]["content"] == f"t{total - 1}"


def test_a_reconnection_with_last_event_id_gets_what_it_missed(web: Web) -> None:
    session = web.ctx.sessions.create("s")
    for number in range(12):
        session.append("todo/write", {"todos": [{"content": f"t{number}", "status": "in_progress"}]})
    reader = web.open_stream("?sessionId=s&afterSeq=2", headers={"Last-Event-ID": "8"})
    try:
        assert reader.frame()["payload"] == {"type": "session/subscribed", "sessionId": "s", "lastSeq": 11}
        seen = reader.payloads_until(lambda p: p["type"] == "session/projection" and p["seq"] == 11)
    finally:
        reader.close()
    assert [p["event"]["seq"] for p in seen if p["type"] == "session/event"] == [9, 10, 11]


def test_a_client_that_never_reads_is_dropped_while_a_fast_one_keeps_up(web: Web) -> None:
    """Over real sockets: the slow client fills its socket buffers, then its queue, and is dropped; the fast one
    sees every event meanwhile."""
    session = web.ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    hub = web.server.app.hub
    assert hub is not None
    slow = socket.create_connection(("127.0.0.1", web.server.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.sendall(f"GET /api/events.mux?sessionId=s HTTP/1.1\r\nHost: {web.host}\r\n\r\n".encode())
    fast = web.open_stream("?sessionId=s")
    try:
        assert fast.frame()["payload"]["type"] == "session/subscribed"
        deadline = time.monotonic() + 10
        while len(hub._targeted.get("s", ())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        big = "x" * 4000
        total = 3 * QUEUE_LIMIT
        seen: list[dict[str, Any]] = []

        def read_all() -> None:
            while not seen or seen[-1]["type"] != "session/event" or seen[-1]["event"]["seq"] < total:
                seen.append(fast.frame()["payload"])

        def latest() -> int:
            events = [p for p in seen[-3:] if p["type"] == "session/event"]
            return int(events[-1]["event"]["seq"]) if events else 0

        with ThreadPoolExecutor(1) as pool:
            reading = pool.submit(read_all)
            for number in range(1, total + 1):
                session.append("todo/write", {"todos": [{"content": f"{big}{number}", "status": "in_progress"}]})
                while number % 100 == 0 and latest() < number - 200 and not reading.done():
                    time.sleep(0.001)  # this reader keeps up (it shares this process's GIL with the server)
            reading.result(timeout=60)
        deadline = time.monotonic() + 10
        while len(hub._targeted.get("s", ())) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(hub._targeted["s"]) == 1  # the slow one was dropped, the fast one stays
    finally:
        fast.close()
        slow.close()
    assert [p["event"]["seq"] for p in seen if p["type"] == "session/event"] == list(range(1, total + 1))


def test_a_followed_log_is_not_kept_in_memory_and_a_late_page_is_replayed_its_tail(web: Web) -> None:
    """The follower of a log another process writes keeps its fold and the last ``REPLAY_LIMIT`` posts, not the log
    (before: every event of every followed log, 50 MB at 50k events)."""
    writer = web.other_process()
    session = writer.sessions.create("elsewhere")
    total = 3 * REPLAY_LIMIT
    for number in range(total):
        session.append("todo/write", {"todos": [{"content": f"t{number}", "status": "in_progress"}]})
    writer.session_persistence.flush()
    reader = web.open_stream("?sessionId=elsewhere&afterSeq=5")
    try:
        assert reader.frame()["payload"] == {"type": "session/subscribed", "sessionId": "elsewhere",
                                             "lastSeq": total - 1}
        seen = reader.payloads_until(lambda p: p["type"] == "session/projection" and p["seq"] == total - 1,
                                     limit=3 * REPLAY_LIMIT)
        hub = web.server.app.hub
        assert hub is not None
        follower = hub._followers["elsewhere"]
        assert follower.count == total and len(follower.recent) == REPLAY_LIMIT
        assert not hasattr(follower, "events")
    finally:
        reader.close()
    assert [p["event"]["seq"] for p in seen if p["type"] == "session/event"] == list(range(total - REPLAY_LIMIT, total))
    assert seen[-1]["value"] == [{"content": f"t{total - 1}", "status": "in_progress"}]
