"""Following a session that another process writes to a database: pushed, not polled.

:class:`~dsh_todo.carriers.web.follow.Follower` watches a JSONL file. A persistence that can push (it has
``follow(session_id, after_seq, callback)``, as the PostgreSQL one does through ``LISTEN``/``NOTIFY``) needs no
polling: :class:`PushFollower` reads the log once, subscribes from its last seq, and hands every run of committed
events to the event loop, where the base class turns them into exactly the posts a followed file would give (each
event with the projection changes the registry's detached fold reports for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from dsh_todo.carriers.web.follow import Follower
from dsh_todo.carriers.web.frames import ViewOf
from dsh_todo.harness.persistence.contract import SessionPersistence
from dsh_todo.harness.persistence.errors import SessionNotFoundError
from dsh_todo.harness.projections import ProjectionRegistry

log = logging.getLogger("dsh_todo.web")


class PushFollower(Follower):
    """Tails one stored session through its persistence's push feed."""

    def __init__(self, session_id: str, persistence: SessionPersistence, registry: ProjectionRegistry | None,
                 view_of: ViewOf,
                 *, interval: float = 0.1) -> None:
        super().__init__(session_id, persistence, registry, view_of, interval=interval)
        self._subscription: Any = None
        self._stopped = False

    async def start(self) -> None:
        """Read what exists now, then subscribe after it (the feed re-reads from that seq, so nothing falls between)."""
        loop = asyncio.get_running_loop()
        persistence: Any = self.persistence

        def read() -> list[Mapping[str, Any]]:
            try:
                events: list[Mapping[str, Any]] = persistence.read(self.session_id).events
            except SessionNotFoundError:  # not written yet: the feed announces its first batch
                return []
            return events

        self._advance(await asyncio.to_thread(read))

        def deliver(events: Sequence[Mapping[str, Any]]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the server stopped
                loop.call_soon_threadsafe(self._push, events)

        subscription = await asyncio.to_thread(persistence.follow, self.session_id, len(self.events) - 1, deliver)
        if self._stopped:
            subscription.close()
        else:
            self._subscription = subscription

    def _push(self, events: Sequence[Mapping[str, Any]]) -> None:
        known = len(self.events)
        fresh = [event for event in events if event["seq"] >= known]
        if fresh:
            self._advance([*self.events, *fresh])

    def stop(self) -> None:
        self._stopped = True
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.close()
        super().stop()


def make_follower(session_id: str, persistence: SessionPersistence, registry: ProjectionRegistry | None,
                  view_of: ViewOf, *, interval: float = 0.1) -> Follower:
    """A push follower when the backend can push (a database), else the file-polling one."""
    if persistence.backend.pushes:
        return PushFollower(session_id, persistence, registry, view_of, interval=interval)
    return Follower(session_id, persistence, registry, view_of, interval=interval)
