"""Following a session log that another process is writing.

A log under the persistence root that is not live in this process may still be growing: ``dsh-todo run`` or a DSH
agent elsewhere holds its writer lock and appends a batch every 200 ms or so. A :class:`Follower` watches the file's
identity (inode, size, mtime) a few times a second and, when it changes, re-reads the log the way any viewer does
(no lock, no repair: the good prefix) and hands the new events to its subscribers, with the projection frames they
cause, folded by a detached fold of the projection registry (the very fold of live sessions). A log that does not
exist yet is looked for, more slowly, until it appears. The read runs on a worker thread, so a large zstd log never
stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_todo.carriers.web.frames import Post, Subscriber, ViewOf, detached_fold, fold_changes
from dsh_todo.harness.persistence.contract import SessionPersistence
from dsh_todo.harness.persistence.errors import SessionNotFoundError
from dsh_todo.harness.projections import ProjectionRegistry

log = logging.getLogger("dsh_todo.web")

FIND_EVERY = 5
"""While the log does not exist, look for it every this many polls (a directory scan, not a stat)."""

def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


class Follower:
    """Tails one stored session for the subscribers that asked for it."""

    def __init__(self, session_id: str, persistence: SessionPersistence, registry: ProjectionRegistry | None,
                 view_of: ViewOf, *, interval: float = 0.1) -> None:
        self.session_id = session_id
        self.persistence = persistence
        self.registry = registry
        self.view_of = view_of
        self.interval = interval
        self.subscribers: set[Subscriber] = set()
        self.events: list[Mapping[str, Any]] = []
        self._fold = detached_fold(registry, [])
        self._path: Path | None = None
        self._identity: tuple[int, int, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._polls = 0
        self._warned = False
        self._reading = asyncio.Lock()

    async def start(self) -> None:
        """Read what exists now, then keep polling in the background."""
        await self.poll()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"follow {self.session_id}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def add(self, subscriber: Subscriber) -> None:
        self.subscribers.add(subscriber)
        subscriber.catch_up(self.session_id, self.events, self.registry, self.view_of)

    async def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(self.interval)
                try:
                    await self.poll()
                except Exception:
                    if not self._warned:
                        log.warning("cannot follow session %r", self.session_id, exc_info=True)
                        self._warned = True

    async def poll(self) -> None:
        """Read the log again if its file changed; deliver what is new. One read at a time."""
        async with self._reading:
            await self._poll()

    async def _poll(self) -> None:
        self._polls += 1
        if self._path is None:
            if self._polls > 1 and self._polls % FIND_EVERY:
                return
            where = await asyncio.to_thread(self.persistence.locate, self.session_id)
            if where is None:
                return
            self._path = Path(where)
        identity = _identity(self._path)
        if identity is None or identity == self._identity:
            return
        try:
            stored = await asyncio.to_thread(self.persistence.read, self.session_id)
        except SessionNotFoundError:  # moved away since it was found: look for it again
            self._path = None
            return
        events = stored.events
        self._identity = identity
        self._warned = False
        self._advance(events)

    def _advance(self, events: Sequence[Mapping[str, Any]]) -> None:
        known = len(self.events)
        if len(events) < known:
            # Only a replaced file can shrink a log (recovery cuts torn bytes no reader ever saw as events).
            log.warning("session %r log shrank from %d to %d events; starting over", self.session_id, known,
                        len(events))
            self.events = list(events)
            self._fold = detached_fold(self.registry, self.events)
            return
        fresh = events[known:]
        self.events.extend(fresh)
        if not self.subscribers:
            try:
                self._fold.extend(fresh)
            except Exception:  # a hand-written event: a refold says why, and the events go on without projections
                self._fold = detached_fold(self.registry, self.events)
            return
        session_id = self.session_id
        for event in fresh:
            post = Post(session_id, event, fold_changes(self._fold, session_id, event), self.view_of)
            for subscriber in list(self.subscribers):
                subscriber.take(post)
