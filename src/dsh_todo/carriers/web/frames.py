"""Push frames and the per-connection bookkeeping that keeps them exact (SPEC §6.3, §6.4).

Two frame types reach a page: ``session/event`` (every committed event) and ``session/projection`` (a projection's
new value, sent only when the unit returned a new state object). A subscriber may learn about the same event twice —
once from a catch-up read of the log and once from the live feed — so each connection keeps watermarks: an event or
projection frame at or below what it already covered is dropped. That makes catch-up and live delivery idempotent and
lets a page subscribe *after* reading its history without missing or repeating anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dsh_todo.carriers.web.protocol import push_frame
from dsh_todo.harness.projections import ProjectionRegistry, ProjectionUnit

log = logging.getLogger("dsh_todo.web")

QUEUE_LIMIT = 20_000
"""Frames a slow connection may fall behind by before it is closed (its page reconnects and catches up)."""


class Frame:
    """One frame, encoded at most once however many connections it goes to."""

    __slots__ = ("_bytes", "payload")

    def __init__(self, payload: Mapping[str, Any]) -> None:
        self.payload = payload
        self._bytes: bytes | None = None

    @property
    def data(self) -> bytes:
        if self._bytes is None:
            self._bytes = push_frame(self.payload)
        return self._bytes


def event_frame(session_id: str, event: Mapping[str, Any], view: Mapping[str, Any] | None) -> Frame:
    payload: dict[str, Any] = {"type": "session/event", "sessionId": session_id, "event": event}
    if view is not None:
        payload["view"] = view
    return Frame(payload)


def projection_frame(session_id: str, key: str, value: Any, seq: int) -> Frame:
    return Frame({"type": "session/projection", "sessionId": session_id, "key": key, "value": value, "seq": seq})


def subscribed_frame(session_id: str, last_seq: int) -> Frame:
    return Frame({"type": "session/subscribed", "sessionId": session_id, "lastSeq": last_seq})


class Folder:
    """Folds one session's events through every wired projection unit, reporting each new state object's view.

    The same rule as the registry's live drive (SPEC §6.2): a view is reported only when ``apply`` returned a
    different object, so an unrelated event, a ``turn/end``, or a ``turn/start`` with no standing plan reports nothing.
    """

    def __init__(self, registry: ProjectionRegistry | None, prefix: Sequence[Mapping[str, Any]]) -> None:
        units: list[tuple[str, ProjectionUnit]] = []
        if registry is not None:
            for key in registry.keys():  # noqa: SIM118 - a registry method, not a dict
                unit = registry.unit(key)
                if unit is not None and unit.wire is not None:
                    units.append((key, unit))
        self.units = units
        self.states: dict[str, Any] = {key: unit.fold(prefix) for key, unit in units}

    def step(self, event: Mapping[str, Any]) -> list[tuple[str, Any]]:
        changed: list[tuple[str, Any]] = []
        for key, unit in self.units:
            state = self.states[key]
            nxt = unit.apply(state, event)
            self.states[key] = nxt
            if nxt is state:
                continue
            try:
                changed.append((key, unit.client_view(nxt)))
            except Exception:
                log.warning("projection %r has no valid view at seq %s", key, event.get("seq"), exc_info=True)
        return changed


ViewOf = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]


class Subscriber:
    """One mux connection: its queue of encoded frames and what it has already been sent.

    Only the event loop's thread touches a subscriber.
    """

    def __init__(self, session_id: str | None, limit: int = QUEUE_LIMIT) -> None:
        self.session_id = session_id
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.limit = limit
        self.closed = False
        self._events: dict[str, int] = {}
        self._floor: dict[str, int] = {}
        self._keys: dict[tuple[str, str], int] = {}

    def offer(self, data: bytes | None) -> None:
        if self.closed:
            return
        if data is None or self.queue.qsize() >= self.limit:
            if data is not None:
                log.warning("closing a mux connection that fell %d frames behind", self.limit)
            self.closed = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(data)

    def close(self) -> None:
        self.offer(None)

    def covered(self, session_id: str) -> int:
        """The last event seq of ``session_id`` this connection has been given (``-1``: none)."""
        return self._events.get(session_id, -1)

    def start_at(self, session_id: str, last_seq: int) -> None:
        """Treat everything up to ``last_seq`` as already delivered (a subscription that starts "from now")."""
        if last_seq > self._events.get(session_id, -1):
            self._events[session_id] = last_seq
        if last_seq > self._floor.get(session_id, -1):
            self._floor[session_id] = last_seq

    def event(self, session_id: str, seq: int, frame: Frame) -> None:
        if seq <= self._events.get(session_id, -1):
            return
        self._events[session_id] = seq
        self.offer(frame.data)

    def projection(self, session_id: str, key: str, seq: int, frame: Frame) -> None:
        if seq <= self._floor.get(session_id, -1) or seq <= self._keys.get((session_id, key), -1):
            return
        self._keys[(session_id, key)] = seq
        self.offer(frame.data)

    def catch_up(self, session_id: str, events: Sequence[Mapping[str, Any]], registry: ProjectionRegistry | None,
                 view_of: ViewOf) -> None:
        """Send every event of ``events`` after what this connection has, with the projection frames they caused."""
        start = self.covered(session_id) + 1
        if start >= len(events):
            self.start_at(session_id, len(events) - 1)
            return
        folder = Folder(registry, events[:start])
        for event in events[start:]:
            seq: int = event["seq"]
            self.event(session_id, seq, event_frame(session_id, event, view_of(event)))
            for key, value in folder.step(event):
                self.projection(session_id, key, seq, projection_frame(session_id, key, value, seq))
        self.start_at(session_id, len(events) - 1)
