"""``GET /api/events.mux``: the live feed, as Server-Sent Events (SPEC §6.3).

The :class:`Hub` lives on the web server's event loop. It hears each committed event of the context's live sessions
once, together with the projection changes it caused (``session_projections.on_commit``; a change exists only when
a unit returned a new state object, SPEC §6.4), so the event's frame and its projection frames are built from one
:class:`~dsh_todo.carriers.web.frames.Post`, in log order. Without a projection registry it listens to the sessions
alone. The callback runs on whatever thread the agent appends from, so it only hands the post's ingredients to the
loop (``call_soon_threadsafe``); frames are built, and a ``tool/call``'s view computed, on the loop's thread and only
for connections that take them.

A connection may name one session (``?sessionId=…``) and the last seq it already has (``&afterSeq=n``, or a
``Last-Event-ID: n`` header): the hub then replays what came after ``n`` before going live, so a page that read its
history first and subscribed second misses nothing.

A connection may also name several sessions (``?sessionId=a&sessionId=b…``, each with its ``afterSeq`` in the same
order): :meth:`Hub.stream_many` subscribes each as above, all feeding one queue, so the board needs one connection.

A slow reader never delays another and never holds more than a page: each connection has its own queue, and one
that falls :data:`~dsh_todo.carriers.web.frames.QUEUE_LIMIT` frames behind is dropped (its frames let go at once).
Its page reconnects with the last seq it has; a replay is at most
:data:`~dsh_todo.carriers.web.frames.REPLAY_LIMIT` events, and a page further behind sees the gap and reads the
history tail page instead.

A session that is not live here but stored under the root is followed (:mod:`.follow`); when it becomes live in
this process, the live feed takes over. A connection that names no session receives every live session's frames
from now on.

A connection with ``?agents=1`` (the board, when other agents are chosen) also receives an ``agents/session`` frame
for each foreign session whose files changed (its new row) and an ``agents/removed`` frame for each that is gone
(:mod:`.agents`). A foreign session's own page (its id is ``<agent>:<id>``) is served from its synthetic events:
replayed on subscription, then sent what each new reading added.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from dsh_todo.carriers.web.follow import Follower
from dsh_todo.carriers.web.frames import Frame, Post, Subscriber, subscribed_frame
from dsh_todo.carriers.web.history import HistorySource
from dsh_todo.carriers.web.protocol import CONNECTED
from dsh_todo.harness.context import Disposer
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.persistence.contract import SESSION_PERSISTENCE
from dsh_todo.harness.projections import Change
from dsh_todo.harness.session import SESSIONS, Session

log = logging.getLogger("dsh_todo.web")

DRAIN_MAX = 256
"""Frames written to the socket in one go when a connection has several queued."""
LINGER_S = 10.0
"""How long a followed log stays followed after its last connection ends."""


class Hub:
    """Routes live and followed frames to mux connections. Every method but the ``_on_*`` hooks runs on the loop."""

    def __init__(self, source: HistorySource, loop: asyncio.AbstractEventLoop, *, linger: float = LINGER_S) -> None:
        self.source = source
        self.loop = loop
        self.linger = linger
        self._targeted: dict[str, set[Subscriber]] = {}
        self._everything: set[Subscriber] = set()
        self._agent_watchers: set[Subscriber] = set()
        self._followers: dict[str, Follower] = {}
        self._disposers: list[Disposer] = []
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        store = self.source.ctx.get(SESSIONS)
        registry = self.source.registry
        if registry is not None:
            self._disposers.append(registry.on_commit(self._on_commit))
        elif store is not None:
            self._disposers.append(store.listen(lambda session, event: self._on_commit(session, event, ())))
        if store is not None:
            self._disposers.append(store.on_open(self._on_open))

    def close(self) -> None:
        """End every stream and stop listening; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for dispose in self._disposers:
            dispose()
        self._disposers.clear()
        for follower in self._followers.values():
            follower.stop()
        self._followers.clear()
        for subscriber in [*self._everything, *self._agent_watchers,
                           *(s for subs in self._targeted.values() for s in subs)]:
            subscriber.close()
        self._everything.clear()
        self._agent_watchers.clear()
        self._targeted.clear()

    # -- hooks (any thread) ---------------------------------------------------------------------------------

    def _wanted(self, session_id: str) -> bool:
        return not self._closed and (bool(self._everything) or session_id in self._targeted)

    def _post(self, callback: Any, *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the server has stopped
            self.loop.call_soon_threadsafe(callback, *args)

    def _on_commit(self, session: Session, event: Event, changes: Sequence[Change]) -> None:
        if self._wanted(session.id):
            self._post(self._deliver, session.id, event, changes)

    def _on_open(self, session: Session) -> None:
        if not self._closed and session.id in self._targeted:
            self._post(self._session_opened, session)

    def agents_changed(self, rows: Sequence[dict[str, Any]], removed: Sequence[str]) -> None:
        """Foreign sessions read again (any thread): their rows to the board, their new events to their pages."""
        if not self._closed:
            self._post(self._deliver_agents, list(rows), list(removed))

    # -- fan-out (loop thread) ------------------------------------------------------------------------------

    def _deliver_agents(self, rows: list[dict[str, Any]], removed: list[str]) -> None:
        frames = [Frame({"type": "agents/session", "sessionId": row["sessionId"], "row": row}) for row in rows]
        frames += [Frame({"type": "agents/removed", "sessionId": session_id}) for session_id in removed]
        for subscriber in list(self._agent_watchers):
            for frame in frames:
                subscriber.offer(frame.data)
        for row in rows:
            session_id = row["sessionId"]
            targeted = self._targeted.get(session_id)
            events = self.source.agent_events(session_id) if targeted else None
            if targeted and events is not None:
                for subscriber in list(targeted):
                    for event in events[subscriber.covered(session_id) + 1:]:
                        # the list a write left is the session's `todos` (its page's strip follows it)
                        changes = [Change("todos", event["data"]["todos"])] if event["type"] == "todo/write" else []
                        subscriber.take(Post(session_id, event, changes, _no_view))


    def _receivers(self, session_id: str) -> list[Subscriber]:
        return [*self._targeted.get(session_id, ()), *self._everything]

    def _deliver(self, session_id: str, event: Event, changes: Sequence[Change]) -> None:
        receivers = self._receivers(session_id)
        if receivers:
            post = Post(session_id, event, changes, self.source.view_of)
            for subscriber in receivers:
                subscriber.take(post)

    def _session_opened(self, session: Session) -> None:
        """A session some connection waits for became live here: the live feed replaces the file."""
        follower = self._followers.pop(session.id, None)
        if follower is not None:
            follower.stop()
        events = session.events[:]
        for subscriber in self._targeted.get(session.id, ()):
            subscriber.catch_up(session.id, events, self.source.registry, self.source.view_of)

    # -- connections ----------------------------------------------------------------------------------------

    async def subscribe(self, subscriber: Subscriber, after_seq: int | None) -> None:
        """Register a connection; replay what it lacks (see the module docstring)."""
        if self._closed:
            subscriber.close()
            return
        subscriber.on_close = lambda: self.unsubscribe(subscriber)
        session_id = subscriber.session_id
        if session_id is None:
            self._everything.add(subscriber)
            for session in self._live_sessions():
                subscriber.start_at(session.id, session.seq - 1)
            return
        # Register before reading the log: an append racing with this read is then either in the copy or still on
        # its way to _deliver, and the watermarks drop whichever arrives second.
        self._targeted.setdefault(session_id, set()).add(subscriber)
        foreign = self.source.agent_events(session_id)
        if foreign is not None:
            self._replay(subscriber, session_id, foreign, after_seq)
            return
        attached = self.source.live(session_id)
        if attached is not None:
            self._replay(subscriber, session_id, attached.events[:], after_seq)
            return
        persistence = self.source.ctx.get(SESSION_PERSISTENCE)
        if persistence is None:
            subscriber.offer(subscribed_frame(session_id, -1).data)
            subscriber.start_at(session_id, -1)
            return
        follower = self._followers.get(session_id)
        if follower is None:
            follower = Follower(session_id, persistence, self.source.registry, self.source.view_of)
            try:
                await follower.start()
            except Exception:
                log.warning("cannot follow session %r", session_id, exc_info=True)
                follower.stop()
                subscriber.close()
                return
            if self._closed or subscriber.closed:
                follower.stop()
                return
            live = self.source.live(session_id)
            if live is not None:  # it opened here while the file was being read
                follower.stop()
                self._replay(subscriber, session_id, live.events[:], after_seq)
                return
            existing = self._followers.get(session_id)
            if existing is not None:  # another connection started one meanwhile
                follower.stop()
                follower = existing
            else:
                self._followers[session_id] = follower
        else:
            # A page reads its history before it subscribes: read the file again now, so the ``lastSeq`` this
            # connection is told is never older than that history (the page drops projection rows beyond it).
            try:
                await follower.poll()
            except Exception:
                log.warning("cannot follow session %r", session_id, exc_info=True)
            if self._closed or subscriber.closed:
                return
        last = follower.count - 1
        subscriber.offer(subscribed_frame(session_id, last).data)
        self._position(subscriber, session_id, last, after_seq)
        follower.add(subscriber)

    def _replay(self, subscriber: Subscriber, session_id: str, events: Any, after_seq: int | None) -> None:
        last = len(events) - 1
        subscriber.offer(subscribed_frame(session_id, last).data)
        self._position(subscriber, session_id, last, after_seq)
        subscriber.catch_up(session_id, events, self.source.registry, self.source.view_of)

    @staticmethod
    def _position(subscriber: Subscriber, session_id: str, last: int, after_seq: int | None) -> None:
        """Where the connection's replay starts: after ``afterSeq`` (clamped to the log), or at the end."""
        subscriber.start_at(session_id, last if after_seq is None else min(after_seq, last))

    def watch_agents(self, subscriber: Subscriber) -> None:
        """Send this connection every foreign session's change from now on (its rows came with ``session.list``)."""
        if self._closed:
            subscriber.close()
            return
        subscriber.on_close = lambda: self.unsubscribe(subscriber)
        self._agent_watchers.add(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._everything.discard(subscriber)
        self._agent_watchers.discard(subscriber)
        session_id = subscriber.session_id
        if session_id is None:
            return
        subs = self._targeted.get(session_id)
        if subs is not None:
            subs.discard(subscriber)
            if not subs:
                del self._targeted[session_id]
        follower = self._followers.get(session_id)
        if follower is not None:
            follower.subscribers.discard(subscriber)
            if session_id not in self._targeted:
                self.loop.call_later(self.linger, self._retire, session_id, follower)

    def _retire(self, session_id: str, follower: Follower) -> None:
        """Stop following a log nobody has watched for :data:`LINGER_S` (a page that reconnects at once, or the
        next visitor, finds it still followed instead of reading the whole log again)."""
        if session_id not in self._targeted and self._followers.get(session_id) is follower:
            follower.stop()
            del self._followers[session_id]

    def _live_sessions(self) -> list[Session]:
        store = self.source.ctx.get(SESSIONS)
        return [] if store is None else list(store.list())

    async def stream_many(self, subscribers: Sequence[Subscriber], after_seqs: Sequence[int | None],
                          agents: Subscriber | None = None) -> AsyncIterator[bytes]:
        """The bytes of one connection that watches several sessions (the board): one subscriber per session, all
        sharing one queue, each subscribed as a single-session connection is. One that cannot be followed ends
        alone; one that falls behind ends the connection (its page reconnects with what it has), as does the hub."""

        def on_drop(subscriber: Subscriber) -> None:
            if subscriber.dropped:
                for other in [*subscribers, *([agents] if agents is not None else [])]:
                    other.close()

        try:
            yield CONNECTED
            subscribing: list[tuple[Subscriber, int | None]] = list(zip(subscribers, after_seqs, strict=True))
            if agents is not None:
                subscribing.append((agents, None))
            for subscriber, after_seq in subscribing:
                if subscriber is agents:
                    self.watch_agents(subscriber)
                else:
                    await self.subscribe(subscriber, after_seq)
                unsubscribe = subscriber.on_close
                if unsubscribe is not None:
                    def closed(subscriber: Subscriber = subscriber, unsubscribe: Any = unsubscribe) -> None:
                        unsubscribe()
                        on_drop(subscriber)

                    subscriber.on_close = closed
            everyone = [subscriber for subscriber, _after in subscribing]
            queue = everyone[0].queue
            while True:
                data = await queue.get()
                if data is None:
                    if self._closed or any(s.dropped for s in everyone) or all(s.closed for s in everyone):
                        return
                    continue
                batch = [data]
                while not queue.empty() and len(batch) < DRAIN_MAX:
                    more = queue.get_nowait()
                    if more is not None:
                        batch.append(more)
                    elif self._closed or any(s.dropped for s in everyone):
                        yield b"".join(batch)
                        return
                yield b"".join(batch)
        finally:
            for subscriber in subscribers:
                self.unsubscribe(subscriber)
            if agents is not None:
                self.unsubscribe(agents)

    async def stream(self, subscriber: Subscriber, after_seq: int | None) -> AsyncIterator[bytes]:
        """The bytes of one mux connection: ``: connected``, then frames until the hub or the client ends it."""
        try:
            yield CONNECTED
            await self.subscribe(subscriber, after_seq)
            queue = subscriber.queue
            while True:
                data = await queue.get()
                if data is None:
                    return
                if queue.empty():
                    yield data
                    continue
                batch = [data]
                ended = False
                while not queue.empty() and len(batch) < DRAIN_MAX:
                    more = queue.get_nowait()
                    if more is None:
                        ended = True
                        break
                    batch.append(more)
                yield b"".join(batch)
                if ended:
                    return
        finally:
            self.unsubscribe(subscriber)



def _no_view(_event: Any) -> None:
    """A foreign session's synthetic events carry no ``view`` (no DSH tool presents them)."""
    return None
