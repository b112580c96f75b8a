"""Following a session that another process writes: what its persistence's ``follow`` pushes, as posts.

A log that is not live in this process may still be growing: ``dsh-todo run`` or a DSH agent elsewhere holds its
writer lock and commits a batch every 200 ms or so. Every backend follows a log from what it has already given
(:meth:`~dsh_todo.harness.persistence.contract.LogBackend.follow`): a database reads ``seq > n`` when ``NOTIFY``
rings, a file is read from the byte or frame where the last read stopped. So a change costs what it added, never
the log. A :class:`Follower` subscribes once for every connection that asked for the session, and hands each run of
events to the event loop, where each becomes a :class:`~dsh_todo.carriers.web.frames.Post`: the event with the
projection changes a detached fold of the registry reports for it (the very fold of live sessions).

A follower keeps the fold and the last :data:`~dsh_todo.carriers.web.frames.REPLAY_LIMIT` posts, never the log: a
connection is replayed at most that many events anyway (a page further behind reads the history tail page), so the
server's memory does not grow with the logs it follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from dsh_todo.carriers.web.frames import REPLAY_LIMIT, Post, Subscriber, ViewOf, detached_fold, fold_changes
from dsh_todo.harness.fold import Fold
from dsh_todo.harness.persistence.contract import SessionPersistence, Subscription
from dsh_todo.harness.projections import ProjectionRegistry

log = logging.getLogger("dsh_todo.web")


class Follower:
    """Tails one stored session for the subscribers that asked for it. Every method runs on the event loop."""

    def __init__(self, session_id: str, persistence: SessionPersistence, registry: ProjectionRegistry | None,
                 view_of: ViewOf) -> None:
        self.session_id = session_id
        self.persistence = persistence
        self.registry = registry
        self.view_of = view_of
        self.subscribers: set[Subscriber] = set()
        self.count = 0
        """How many events the log has, as far as this follower has read it."""
        self.recent: deque[Post] = deque(maxlen=REPLAY_LIMIT)
        """The posts of the last events, for the replay of a connection that joins."""
        self._fold = detached_fold(registry, [])
        self._subscription: Subscription | None = None
        self._stopped = False

    async def start(self) -> None:
        """Subscribe from the log's start: the first run (what is stored now) is read on a worker thread and is in
        :attr:`count` and :attr:`recent` when this returns; a log the reader refuses raises its verdict here."""
        loop = asyncio.get_running_loop()

        def deliver(events: Sequence[Mapping[str, Any]]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the server stopped
                loop.call_soon_threadsafe(self._push, events)

        subscription = await asyncio.to_thread(self.persistence.follow, self.session_id, -1, deliver)
        if self._stopped:
            subscription.close()
        else:
            self._subscription = subscription
        # ``deliver`` posted the first run before the worker thread finished: let it land before returning.
        await asyncio.sleep(0)

    async def poll(self) -> None:
        """Look at the log now rather than at the next interval (a backend that polls offers ``poll``)."""
        poll = getattr(self._subscription, "poll", None)
        if poll is not None:
            await asyncio.to_thread(poll)
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._stopped = True
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.close()

    def add(self, subscriber: Subscriber) -> None:
        self.subscribers.add(subscriber)
        subscriber.replay(self.session_id, self.recent, self.count - 1)

    def _push(self, events: Sequence[Mapping[str, Any]]) -> None:
        fresh = [event for event in events if event["seq"] >= self.count]
        if not fresh or self._stopped:
            return
        self.count += len(fresh)
        if not self.subscribers and len(fresh) > REPLAY_LIMIT:
            # Nobody to send these to, and too many to keep: fold them without building their frames.
            head, fresh = fresh[:-REPLAY_LIMIT], fresh[-REPLAY_LIMIT:]
            try:
                self._fold.extend(head)
            except Exception:  # a hand-written event: the events go on without projections
                log.warning("projections cannot fold session %r; its events are sent without projection frames",
                            self.session_id, exc_info=True)
                self._fold = Fold((), seq=self.count - len(fresh) - 1)
        session_id = self.session_id
        for event in fresh:
            post = Post(session_id, event, fold_changes(self._fold, session_id, event), self.view_of)
            self.recent.append(post)
            for subscriber in list(self.subscribers):
                subscriber.take(post)
