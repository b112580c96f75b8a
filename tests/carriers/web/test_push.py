"""The one push path (SPEC §6.3): each committed event reaches the hub once, with the projection changes it caused,
and becomes its frames in log order; a ``tool/call``'s ``view`` is computed only for a frame that is sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from dsh_todo.carriers.web.frames import Subscriber
from dsh_todo.carriers.web.history import HistorySource
from dsh_todo.carriers.web.mux import Hub
from dsh_todo.harness.session import Session
from dsh_todo.jsonutil import dumps
from dsh_todo.standard import open_runtime
from tests.carriers.web.conftest import run_async

PLAN = [{"content": "a", "status": "in_progress"}]


class CountingSource(HistorySource):
    """The carrier's history source, counting ``view_of`` calls on ``tool/call`` events, and able to append at the exact
    moment a subscription looks the session up (standing in for an agent thread appending just then)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.views: list[int] = []
        self.append_on_lookup: tuple[str, Any] | None = None

    def view_of(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        if event.get("type") == "tool/call":
            self.views.append(event["seq"])
        return super().view_of(event)

    def live(self, session_id: str) -> Session | None:
        session = super().live(session_id)
        if session is not None and self.append_on_lookup is not None:
            kind, data = self.append_on_lookup
            self.append_on_lookup = None
            session.append(kind, data)
        return session


def drain(subscriber: Subscriber) -> list[dict[str, Any]]:
    payloads = []
    while not subscriber.queue.empty():
        data = subscriber.queue.get_nowait()
        assert data is not None
        payloads.append(json.loads(data.decode()[len("data: "):])["payload"])
    return payloads


def tool_call(call_id: str) -> dict[str, Any]:
    return {"turn": 1, "step": 1, "callId": call_id, "name": "todo_write", "arguments": dumps({"todos": PLAN})}


def test_an_event_that_a_replay_already_sent_is_not_presented_again() -> None:
    """A ``tool/call`` appended between a subscription's registration and its replay reaches the connection once,
    and its ``presentCall`` view is computed once.

    Repro (before the fix): the append posts a live delivery (the connection is registered), the replay copies the
    log with the call in it and sends it; the live delivery then built the event frame again, ``view`` included
    (``history.view_of`` parsing and validating the arguments a second time), only for the watermark to drop it.
    """
    ctx = open_runtime(None)
    source = CountingSource(ctx)
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})

    async def scenario() -> list[dict[str, Any]]:
        hub = Hub(source, asyncio.get_running_loop())
        hub.start()
        try:
            subscriber = Subscriber("s")
            source.append_on_lookup = ("tool/call", tool_call("c1"))
            await hub.subscribe(subscriber, -1)
            for _ in range(3):
                await asyncio.sleep(0)  # let the posted live delivery run
            return drain(subscriber)
        finally:
            hub.close()

    try:
        payloads = run_async(scenario)
    finally:
        ctx.dispose()
    events = [p["event"]["type"] for p in payloads if p["type"] == "session/event"]
    assert events == ["turn/start", "tool/call"]
    assert source.views == [1]


def test_one_view_per_event_however_many_connections_take_it_and_frames_in_log_order() -> None:
    """Two connections on one live session: each gets the event frame, then the projection frames of the same seq,
    in log order; the ``tool/call`` view is computed once for both."""
    ctx = open_runtime(None)
    source = CountingSource(ctx)
    session = ctx.sessions.create("s")

    async def scenario() -> list[list[dict[str, Any]]]:
        hub = Hub(source, asyncio.get_running_loop())
        hub.start()
        try:
            subscribers = [Subscriber("s"), Subscriber(None)]
            for subscriber in subscribers:
                await hub.subscribe(subscriber, None)
            session.append("turn/start", {"turn": 1})
            session.append("tool/call", tool_call("c1"))
            session.append("todo/write", {"todos": PLAN})
            session.append("turn/start", {"turn": 2})
            for _ in range(3):
                await asyncio.sleep(0)
            return [drain(subscriber) for subscriber in subscribers]
        finally:
            hub.close()

    try:
        seen = run_async(scenario)
    finally:
        ctx.dispose()
    for payloads in seen:
        frames = [p for p in payloads if p["type"] != "session/subscribed"]
        assert [(p["type"], p["seq"] if "seq" in p else p["event"]["seq"]) for p in frames] == [
            ("session/event", 0), ("session/event", 1), ("session/event", 2), ("session/projection", 2),
            ("session/event", 3), ("session/projection", 3)]
        assert [p["value"] for p in payloads if p["type"] == "session/projection"] == [PLAN, None]
        assert next(p for p in payloads if p["type"] == "session/event" and p["event"]["type"] == "tool/call")[
            "view"]["for"] == "call"
    assert source.views == [1]
