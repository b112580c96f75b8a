"""Push frames and the per-connection bookkeeping that keeps them exact (SPEC §6.3, §6.4).

Two frame types reach a page: ``session/event`` (every committed event) and ``session/projection`` (a projection's
new value, sent only when the unit returned a new state object). Both come from one :class:`Post`: a committed
event and the projection changes folding it caused, whether it was heard live (the registry's commit listener),
replayed from a copy of the log, or read by a follower. A post's frames go out in log order, the event's first,
each built and encoded at most once however many connections take it, and only when one does: the ``view`` of a
``tool/call`` (the tool's ``presentCall``, which parses and validates the arguments) is computed on first send.

A subscriber may learn about the same event twice — once from a catch-up read of the log and once from the live
feed — so each connection keeps watermarks: an event or projection frame at or below what it already covered is
dropped. That makes catch-up and live delivery idempotent and lets a page subscribe *after* reading its history
without missing or repeating anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from dsh_todo.carriers.web.protocol import MAX_MAX_MESSAGES, push_frame
from dsh_todo.harness.projections import Change, Fold, ProjectionRegistry

log = logging.getLogger("dsh_todo.web")

QUEUE_LIMIT: Final = MAX_MAX_MESSAGES
"""Frames a connection may have waiting (a whole page: as many as the largest history page holds messages). One
that falls further behind is dropped: its frames are let go at once, and its page reconnects with the last seq it
has, to be replayed what it missed or, if that is more than :data:`REPLAY_LIMIT`, to read the history tail page."""
REPLAY_LIMIT: Final = QUEUE_LIMIT // 4
"""The most events a (re)connection is replayed. A connection further behind is sent the last ones only: the gap
before them tells its page to read the history tail page instead (``session.history``), which costs one request,
not a stream the page cannot keep up with."""

ViewOf = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]
"""An event's ``view`` (SPEC §6.3 ``{event, view?}``), or ``None``."""


class Frame:
    """One frame, encoded at most once however many connections it goes to."""

    __slots__ = ("_bytes", "_payload")

    def __init__(self, payload: Mapping[str, Any]) -> None:
        self._payload = payload
        self._bytes: bytes | None = None

    def payload(self) -> Mapping[str, Any]:
        return self._payload

    @property
    def data(self) -> bytes:
        if self._bytes is None:
            self._bytes = push_frame(self.payload())
        return self._bytes


class EventFrame(Frame):
    """A ``session/event`` frame whose ``view`` is computed when it is first sent, never for a dropped frame."""

    __slots__ = ("_view_of",)

    def __init__(self, session_id: str, event: Mapping[str, Any], view_of: ViewOf) -> None:
        super().__init__({"type": "session/event", "sessionId": session_id, "event": event})
        self._view_of = view_of

    def payload(self) -> Mapping[str, Any]:
        view = self._view_of(self._payload["event"])
        return self._payload if view is None else {**self._payload, "view": view}


def projection_frame(session_id: str, key: str, value: Any, seq: int) -> Frame:
    return Frame({"type": "session/projection", "sessionId": session_id, "key": key, "value": value, "seq": seq})


def subscribed_frame(session_id: str, last_seq: int) -> Frame:
    return Frame({"type": "session/subscribed", "sessionId": session_id, "lastSeq": last_seq})


class Post:
    """One committed event and the projection changes it caused: its frames, shared by every connection."""

    __slots__ = ("event", "projections", "seq", "session_id")

    def __init__(self, session_id: str, event: Mapping[str, Any], changes: Sequence[Change], view_of: ViewOf) -> None:
        self.session_id = session_id
        self.seq: int = event["seq"]
        self.event = EventFrame(session_id, event, view_of)
        self.projections = [(key, projection_frame(session_id, key, value, self.seq)) for key, value in changes]


def detached_fold(registry: ProjectionRegistry | None, events: Sequence[Mapping[str, Any]]) -> Fold:
    """The registry's fold over ``events`` (a copy of a log), or a fold of no units when none is composed or the
    events cannot be folded (a hand-written event: the history tail read says why; the events still go out)."""
    if registry is not None:
        try:
            return registry.fold_for(events)
        except Exception:
            log.warning("projections cannot fold this log; its events are sent without projection frames",
                        exc_info=True)
    return Fold((), seq=len(events) - 1)


def fold_changes(fold: Fold, session_id: str, event: Mapping[str, Any]) -> Sequence[Change]:
    """``fold.apply(event)``; an event the fold cannot take (a hand-written one) still goes out, with no changes."""
    try:
        return fold.apply(event)
    except Exception:
        log.warning("session %r: projections cannot fold %s at seq %s", session_id, event.get("type"),
                    event.get("seq"), exc_info=True)
        return ()


class Subscriber:
    """One mux connection: its queue of encoded frames and what it has already been sent.

    Only the event loop's thread touches a subscriber.
    """

    def __init__(self, session_id: str | None, limit: int = QUEUE_LIMIT,
                 queue: asyncio.Queue[bytes | None] | None = None) -> None:
        self.session_id = session_id
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue() if queue is None else queue
        """The connection's queue; the subscribers of one connection that watches several sessions share it (and
        :attr:`limit` then bounds the connection, not each session)."""
        self.limit = limit
        self.closed = False
        self.dropped = False
        self.on_close: Callable[[], object] | None = None
        """Called once when the connection is closed or dropped (the hub forgets it then, not when its stream
        next runs: the stream of a client that stopped reading may never run again)."""
        self._events: dict[str, int] = {}
        self._floor: dict[str, int] = {}
        self._keys: dict[tuple[str, str], int] = {}

    def offer(self, data: bytes) -> None:
        if self.closed:
            return
        if self.queue.qsize() >= self.limit:
            log.info("dropping a mux connection that fell %d frames behind (it resumes from its last seq)",
                     self.limit)
            self.dropped = True
            while not self.queue.empty():  # its frames are let go now, whether or not its stream runs again
                self.queue.get_nowait()
            self.close()
            return
        self.queue.put_nowait(data)

    def close(self) -> None:
        """End the stream after what is queued; safe to call twice."""
        if self.closed:
            return
        self.closed = True
        self.queue.put_nowait(None)
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            on_close()

    def covered(self, session_id: str) -> int:
        """The last event seq of ``session_id`` this connection has been given (``-1``: none)."""
        return self._events.get(session_id, -1)

    def start_at(self, session_id: str, last_seq: int) -> None:
        """Treat everything up to ``last_seq`` as already delivered (a subscription that starts "from now")."""
        if last_seq > self._events.get(session_id, -1):
            self._events[session_id] = last_seq
        if last_seq > self._floor.get(session_id, -1):
            self._floor[session_id] = last_seq

    def take(self, post: Post) -> None:
        """Send what this connection lacks of ``post``: its event frame, then its projection frames."""
        if self.closed:
            return
        session_id, seq = post.session_id, post.seq
        if seq > self._events.get(session_id, -1):
            self._events[session_id] = seq
            self.offer(post.event.data)
        if not post.projections or seq <= self._floor.get(session_id, -1):
            return
        for key, frame in post.projections:
            if seq > self._keys.get((session_id, key), -1):
                self._keys[(session_id, key)] = seq
                self.offer(frame.data)

    def replay(self, session_id: str, posts: Iterable[Post], last_seq: int) -> None:
        """Send what this connection lacks of ``posts`` (the last ones of a log whose last seq is ``last_seq``)."""
        for post in posts:
            self.take(post)
        self.start_at(session_id, last_seq)

    def catch_up(self, session_id: str, events: Sequence[Mapping[str, Any]], registry: ProjectionRegistry | None,
                 view_of: ViewOf) -> None:
        """Send the events of ``events`` after what this connection has, with the projection frames they caused:
        at most the last :data:`REPLAY_LIMIT` of them (the page reads the history tail page for the rest)."""
        start = max(self.covered(session_id) + 1, len(events) - REPLAY_LIMIT)
        if start < len(events):
            fold = detached_fold(registry, events[:start])
            for event in events[start:]:
                self.take(Post(session_id, event, fold_changes(fold, session_id, event), view_of))
        self.start_at(session_id, len(events) - 1)
