"""Following a session log that another process is writing.

A log under the persistence root that is not live in this process may still be growing: ``dsh-todo run`` or a DSH
agent elsewhere holds its writer lock and appends a batch every 200 ms or so. A :class:`Follower` watches the file's
identity (inode, size, mtime) a few times a second and, when it changes, re-reads the log the way any viewer does
(no lock, no repair: the good prefix) and hands the new events to its subscribers, with the projection frames they
cause, folded exactly as the registry folds live sessions. A log that does not exist yet is looked for, more slowly,
until it appears. The read runs on a worker thread, so a large zstd log never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_todo.carriers.web.frames import Folder, Subscriber, event_frame, projection_frame
from dsh_todo.harness.persistence import SessionNotFoundError
from dsh_todo.harness.persistence.jsonl import JsonlPersistence
from dsh_todo.harness.persistence.store import JsonlStore
from dsh_todo.harness.projections import ProjectionRegistry
from dsh_todo.logview import FileBackend

log = logging.getLogger("dsh_todo.web")

FIND_EVERY = 5
"""While the log does not exist, look for it every this many polls (a directory scan, not a stat)."""

ViewOf = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


class Follower:
    """Tails one stored session for the subscribers that asked for it."""

    def __init__(self, session_id: str, persistence: JsonlPersistence, registry: ProjectionRegistry | None,
                 view_of: ViewOf, *, interval: float = 0.1) -> None:
        self.session_id = session_id
        self.persistence = persistence
        # Read as the page's history is: through the log reader, each file in its own encoding.
        store = getattr(persistence, "store", None)
        self.files = FileBackend(store.root) if isinstance(store, JsonlStore) else None
        self.registry = registry
        self.view_of = view_of
        self.interval = interval
        self.subscribers: set[Subscriber] = set()
        self.events: list[Mapping[str, Any]] = []
        self._folder = Folder(registry, [])
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
            self._path = await asyncio.to_thread(self._find)
            if self._path is None:
                return
        identity = _identity(self._path)
        if identity is None or identity == self._identity:
            return
        path = self._path

        def read() -> list[dict[str, Any]]:
            assert self.files is not None
            events = self.files.read_path(path).events
            assert events is not None
            return events

        events = await asyncio.to_thread(read)
        self._identity = identity
        self._warned = False
        self._advance(events)

    def _find(self) -> Path | None:
        """The log of this session, or ``None`` while it does not exist (refusals propagate: they are logged)."""
        if self.files is None:
            return None
        try:
            return self.files.locate(self.session_id)
        except SessionNotFoundError:
            return None

    def _advance(self, events: Sequence[Mapping[str, Any]]) -> None:
        known = len(self.events)
        if len(events) < known:
            # Only a replaced file can shrink a log (recovery cuts torn bytes no reader ever saw as events).
            log.warning("session %r log shrank from %d to %d events; starting over", self.session_id, known,
                        len(events))
            self.events = list(events)
            self._folder = Folder(self.registry, self.events)
            return
        fresh = events[known:]
        self.events.extend(fresh)
        session_id = self.session_id
        if not self.subscribers:
            for event in fresh:
                self._folder.step(event)
            return
        for event in fresh:
            seq: int = event["seq"]
            frame = event_frame(session_id, event, self.view_of(event))
            changes = self._folder.step(event)
            for subscriber in list(self.subscribers):
                subscriber.event(session_id, seq, frame)
            for key, value in changes:
                pframe = projection_frame(session_id, key, value, seq)
                for subscriber in list(self.subscribers):
                    subscriber.projection(session_id, key, seq, pframe)
