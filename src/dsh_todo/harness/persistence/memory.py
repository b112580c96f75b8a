"""Session logs kept in memory: the persistence contract's third backend, for tests and throwaway runs.

What httpx's ``MockTransport`` is to its transports: DSH's JSONL files' and PostgreSQL's contract
(:class:`~.contract.LogBackend`) and contract suite, without a directory or a server, and nothing kept after the
process. As strict as a file: events are stored as the canonical encoder's JSON text, so what a file refuses or
changes is refused or changed alike, and nothing a caller mutates later reaches the log. A batch is stored whole or
not at all (never a torn tail). Contexts booted on one :class:`MemoryBackend` share its logs and its one writer per
session, as processes on one root do. Followers are fed on the appending thread as each batch is stored: nothing to
poll, and a slow follower slows that writer, which a test backend can afford.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.persistence.contract import (
    Batch,
    Callback,
    Checkpointed,
    Event,
    LoadedLog,
    Observer,
    Rows,
    Scan,
    Start,
    StoredLog,
    StoredSession,
    scan_whole,
)
from dsh_todo.harness.persistence.errors import (
    SessionExistsError,
    SessionLockedError,
    SessionLogError,
    SessionNotFoundError,
    refuse_unknown_types,
)
from dsh_todo.harness.persistence.followers import Refusals, hand_over
from dsh_todo.harness.persistence.header import check_meta, decode_header, header_line
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.harness.persistence.service import backend_config, install
from dsh_todo.jsonutil import dumps, loads

name = "@deepseek-ai/dsh-session-persistence-memory"
inject = ["sessions"]

LOCATION: Final = "memory"


@dataclass
class _Log:
    """One stored session: its header and events as JSON text, and its checkpoint ``(as_of_seq, rows text)``."""

    header: str
    events: list[str] = field(default_factory=list)
    checkpoint: tuple[int, str] | None = None


class MemoryBackend:
    """Session logs in this process's memory, shared by every context booted on this object."""

    location = LOCATION
    holds_files = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, _Log] = {}
        self._writers: dict[str, MemoryWriter] = {}
        self._follows: dict[str, list[_Follow]] = {}

    # -- reading --------------------------------------------------------------------------------------------

    def locate(self, session_id: str) -> str | None:
        return self.location if session_id in self._logs else None

    def stored_sessions(self) -> list[StoredSession]:
        """Every stored session, in the order PostgreSQL lists them (``createdAt``, then id)."""
        with self._lock:
            headers = [entry.header for entry in self._logs.values()]
        metas = sorted((decode_header(loads(text)) for text in headers), key=lambda m: (m["createdAt"], m["id"]))
        return [StoredSession(meta["id"], meta.get("cwd"), meta, self.location) for meta in metas]

    def writer_alive(self, session_id: str) -> bool:
        return session_id in self._writers

    def read_stored(self, session_id: str) -> StoredLog:
        with self._lock:
            entry = self._logs.get(session_id)
            if entry is None:
                raise SessionNotFoundError(f'session "{session_id}" has no stored log in {self.location}')
            header = entry.header
        return StoredLog(self.location, decode_header(loads(header)), self.events_after(session_id, -1))

    def read(self, session_id: str) -> StoredLog:
        stored = self.read_stored(session_id)
        refuse_unknown_types(session_id, stored.events, self.location)
        return stored

    def scan(self, session_id: str, observe: Observer | None = None, **spare: Any) -> Scan:
        """The log read whole: the options that let a backend spare work have nothing to spare here."""
        return scan_whole(self, session_id, observe)

    def scan_checkpointed(self, session_id: str, start: Start, **spare: Any) -> None:
        """Nothing to spare either: a reader folds the whole log."""

    def written(self) -> dict[str, int]:
        """The ``time`` of each session's last event."""
        with self._lock:
            lasts = {session_id: entry.events[-1] for session_id, entry in self._logs.items() if entry.events}
        return {session_id: time for session_id, text in lasts.items() if type(time := loads(text).get("time")) is int}

    def events_after(self, session_id: str, after_seq: int) -> list[Event]:
        """The stored events after ``after_seq`` (none for a session not stored)."""
        with self._lock:
            entry = self._logs.get(session_id)
            texts = entry.events[max(after_seq + 1, 0):] if entry is not None else []
        return [loads(text) for text in texts]

    # -- writing --------------------------------------------------------------------------------------------

    def resume(self, session_id: str) -> tuple[LoadedLog, MemoryWriter]:
        """Take the writer lock and append the closers of an interrupted turn (the one recovery a batch-atomic
        store can need). A second resume finds nothing to do."""
        if session_id not in self._logs:  # refused before the writer lock is looked at, as a file's resume
            raise SessionNotFoundError(f'session "{session_id}" has no stored log in {self.location}')

        def recover(events: list[Event]) -> list[Event]:
            refuse_unknown_types(session_id, events, self.location)
            return interrupted_turn_closers(events)

        stored, closers, writer = self._reopen(session_id, recover)
        loaded = LoadedLog(self.location, stored.meta, [*stored.events, *closers], len(stored.events), closers,
                           rewrote=bool(closers))
        return loaded, writer

    def create(self, meta: Mapping[str, Any]) -> MemoryWriter:
        check_meta(meta)
        return self._lock_session(meta["id"], {"version": 0, **meta})

    def continue_live(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> MemoryWriter:
        def same_start(stored: list[Event]) -> list[Event]:
            if len(stored) > len(events) or any(dumps(a) != dumps(b) for a, b in zip(stored, events, strict=False)):
                raise _exists(session_id)
            return []

        return self._reopen(session_id, same_start)[2]

    def _reopen(self, session_id: str, check: Callable[[list[Event]], list[Event]],
                ) -> tuple[StoredLog, list[Event], MemoryWriter]:
        """Lock a stored session, position a writer after its log and append what ``check`` returns (it may
        refuse); the lock is let go again if anything fails."""
        writer = self._lock_session(session_id)
        try:
            stored = self.read_stored(session_id)
            writer.cursor = len(stored.events)
            closers = check(stored.events)
            writer.append(closers)
        except BaseException:
            writer.close()
            raise
        return stored, closers, writer

    def _lock_session(self, session_id: str, meta: dict[str, Any] | None = None) -> MemoryWriter:
        """Take the writer lock; with ``meta``, for a new session whose log appears with its first batch (no one
        else can store it while the lock is held)."""
        with self._lock:
            if meta is not None and session_id in self._logs:
                raise _exists(session_id)
            if session_id in self._writers:
                pid = os.getpid()
                raise SessionLockedError(
                    f'session "{session_id}" is already open for writing by process {pid} (lock: {self.location}); '
                    "a session log takes one writer at a time", holder_pid=pid)
            writer = self._writers[session_id] = MemoryWriter(self, session_id, meta)
        return writer

    # -- checkpoints, following, closing --------------------------------------------------------------------

    def write_checkpoint(self, session_id: str, header: Mapping[str, Any], rows: Rows, seq: int,
                         batch: Batch) -> None:
        """Keep ``rows`` as of ``seq``: never ahead of the log, never behind the checkpoint already kept."""
        text = dumps(rows)
        with self._lock:
            entry = self._logs.get(session_id)
            if entry is not None and seq < len(entry.events) and (entry.checkpoint or (-1, ""))[0] <= seq:
                entry.checkpoint = (seq, text)

    def read_checkpointed(self, session_id: str) -> Checkpointed | None:
        """The checkpoint's rows and the stored events from its earliest row's next seq on."""
        entry = self._logs.get(session_id)
        if entry is None or entry.checkpoint is None:
            return None
        rows: Rows = loads(entry.checkpoint[1])
        seqs: list[Any] = [row.get("seq") for row in rows.values()]
        if not rows or not all(type(seq) is int for seq in seqs):
            return None
        tail = self.events_after(session_id, min(seqs))
        refuse_unknown_types(session_id, tail, self.location)
        return Checkpointed(rows, tail, min(seqs) + 1)

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> _Follow:
        """``callback(events)`` with what is stored after ``after_seq`` now (on this thread, raising a refusal),
        then with each batch as it is stored, on the appending thread."""
        follow = _Follow(self, session_id, after_seq, callback)
        with self._lock:
            self._follows.setdefault(session_id, []).append(follow)
        try:
            follow.pump(raising=True)
        except BaseException:
            follow.close()
            raise
        return follow

    def close(self) -> None:
        """Nothing to let go of: the logs stay for whatever context mounts this backend next (that is what sharing
        one is for); writers and followers are closed by their owners."""


class MemoryWriter:
    """Appends to one session's log in a :class:`MemoryBackend` while holding its writer lock. ``meta`` is the
    header of a new session, stored with its first batch (``None`` when the log exists)."""

    def __init__(self, backend: MemoryBackend, session_id: str, meta: dict[str, Any] | None) -> None:
        self.backend, self.session_id, self.meta = backend, session_id, meta
        self.cursor = 0
        self.last_batch: Batch | None = None
        self.open = True

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Store ``events`` as one batch; they must continue the log's seq exactly (the file writer's words)."""
        if not events:
            return
        if not self.open:  # said before the seqs are checked, as by the file writer
            raise RuntimeError(f'the writer of session "{self.session_id}" is closed')
        for index, event in enumerate(events):
            if event.get("seq") != self.cursor + index:
                raise ValueError(f'append seq mismatch for "{self.session_id}": expected {self.cursor + index} '
                                 f"at index {index}, got {event.get('seq')!r}")
        texts = [dumps(event) for event in events]  # all encoded, then stored
        backend = self.backend
        with backend._lock:
            if backend._writers.get(self.session_id) is not self:
                raise RuntimeError(f'the writer of session "{self.session_id}" is closed')
            if self.meta is not None:  # a new session's log appears with its first batch
                backend._logs[self.session_id] = _Log(dumps(header_line(self.meta)))
            backend._logs[self.session_id].events += texts
            follows = list(backend._follows.get(self.session_id, ()))
        self.meta = None
        self.last_batch = Batch(self.cursor, self.cursor + len(events) - 1)
        self.cursor += len(events)
        for follow in follows:
            follow.pump()

    def close(self) -> None:
        self.open = False
        with self.backend._lock:
            if self.backend._writers.get(self.session_id) is self:
                del self.backend._writers[self.session_id]


class _Follow:
    """One follower: each run handed over once, in seq order, never concurrently (a callback that appends to the
    session gets its own events after it returns)."""

    def __init__(self, backend: MemoryBackend, session_id: str, after_seq: int, callback: Callback) -> None:
        self.backend, self.session_id, self.after_seq, self.callback = backend, session_id, after_seq, callback
        self.closed = self._again = False
        self._guard = threading.Lock()
        self._refusals = Refusals(session_id)

    def pump(self, *, raising: bool = False) -> None:
        """Deliver what is stored after ``after_seq``. Whoever finds the follower busy leaves a note and goes; the
        one delivering reads the note after letting go, so nothing is missed and no two runs overlap."""
        self._again = True
        while self._again and not self.closed:
            if not self._guard.acquire(blocking=False):
                return
            try:
                self._again = False
                events = self.backend.events_after(self.session_id, self.after_seq)
                try:
                    refuse_unknown_types(self.session_id, events, self.backend.location)
                except SessionLogError as exc:
                    if raising:
                        raise
                    self._refusals.say(exc)
                    continue
                if events:
                    self.after_seq = events[-1]["seq"]
                    hand_over(self.callback, self.session_id, events)
            finally:
                self._guard.release()

    def close(self) -> None:
        self.closed = True
        with self.backend._lock:
            follows = self.backend._follows.get(self.session_id, [])
            if self in follows:
                follows.remove(self)


def _exists(session_id: str) -> SessionExistsError:
    return SessionExistsError(f'session "{session_id}" already has a log in {LOCATION}; '
                              "load it to go on with it, or pick another id")


# -- the plugin ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """``backend``: the :class:`MemoryBackend` to keep logs in (a new, empty one when absent; pass one object to
    several boots to share it); ``writeBatchMaxDelayMs`` as the other persistence plugins."""

    backend: MemoryBackend | None = None
    writeBatchMaxDelayMs: int = 200

    @classmethod
    def parse(cls, raw: Any) -> Config:
        raw, delay = backend_config(name, {} if raw is None else raw, keys=frozenset({"backend"}),
                                    needs="at most a 'backend'")
        backend = raw.get("backend")
        if backend is not None and not isinstance(backend, MemoryBackend):
            raise ConfigError(f"{name}: 'backend' must be a MemoryBackend, not {type(backend).__name__}")
        return cls(backend=backend, writeBatchMaxDelayMs=delay)


def apply(ctx: Context, config: Config) -> None:
    install(ctx, config.backend if config.backend is not None else MemoryBackend(), config.writeBatchMaxDelayMs)
