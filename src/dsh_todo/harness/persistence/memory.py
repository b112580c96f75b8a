"""Session logs kept in memory: a third backend of the persistence contract, for tests and throwaway runs.

What httpx's ``MockTransport`` is to its transports and eventsourcing's POPO recorder to its databases: the same
contract (:class:`~.contract.LogBackend`) as DSH's JSONL files and PostgreSQL, with nothing kept after the process,
so a test can run the whole persisted runtime (write-behind, loading back, recovery, checkpoints, following) without
a directory or a server. It is held to the contract suite beside the other two.

It is as strict as a file: a batch is stored as the canonical JSON text of each event (:func:`dsh_todo.jsonutil.dumps`,
the encoder the file and database writers use), so what cannot be encoded is refused at append with the same error,
what is encoded lossily comes back as a file would give it back, and nothing a caller mutates later reaches the log.
Every read parses anew. A batch is stored whole or not at all, so there is never a torn tail (as in a database).

One writer per session within one :class:`MemoryBackend`: boot several contexts on the same backend object (the
plugin's ``backend`` config) and they see each other's logs and exclude each other's writers, as two processes on
one root do. Followers are called on the appending thread, right after the batch is stored (nothing to poll): a
slow follower slows that writer, which a test backend can afford.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
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
            header, texts = entry.header, list(entry.events)
        return StoredLog(self.location, decode_header(loads(header)), [loads(text) for text in texts])

    def read(self, session_id: str) -> StoredLog:
        stored = self.read_stored(session_id)
        refuse_unknown_types(session_id, stored.events, self.location)
        return stored

    def scan(self, session_id: str, observe: Observer | None = None, *, keep: bool = False, plan_only: bool = False,
             expand: bool = False, where: Any = None, listed: bool = False) -> Scan:
        return scan_whole(self, session_id, observe)

    def scan_checkpointed(self, session_id: str, start: Start, *, where: Any = None,
                          listed: bool = False) -> Scan | None:
        """Nothing to spare: the log is in memory, so a reader folds it whole."""
        return None

    def written(self) -> dict[str, int]:
        """The ``time`` of each session's last event."""
        stamps: dict[str, int] = {}
        for entry in self.stored_sessions():
            events = self.read_stored(entry.id).events
            if events and type(events[-1].get("time")) is int:
                stamps[entry.id] = events[-1]["time"]
        return stamps

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
        if session_id not in self._logs:
            raise SessionNotFoundError(f'session "{session_id}" has no stored log in {self.location}')
        writer = self._lock_session(session_id, None, materialized=True)
        try:
            stored = self.read_stored(session_id)
            refuse_unknown_types(session_id, stored.events, self.location)
            closers = interrupted_turn_closers(stored.events)
            writer.meta, writer.cursor = stored.meta, len(stored.events)
            writer.append(closers)
        except BaseException:
            writer.close()
            raise
        loaded = LoadedLog(self.location, stored.meta, [*stored.events, *closers], len(stored.events), closers,
                           rewrote=bool(closers))
        return loaded, writer

    def create(self, meta: Mapping[str, Any]) -> MemoryWriter:
        check_meta(meta)
        session_id: str = meta["id"]
        if session_id in self._logs:
            raise _exists(session_id)
        return self._lock_session(session_id, {"version": 0, **meta}, materialized=False)

    def continue_live(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> MemoryWriter:
        """A writer for a live session whose log exists; its stored events must be the session's first."""
        writer = self._lock_session(session_id, None, materialized=True)
        try:
            stored = self.read_stored(session_id)
            count = len(stored.events)
            if count > len(events) or any(dumps(a) != dumps(b) for a, b in zip(stored.events, events, strict=False)):
                raise _exists(session_id)
        except BaseException:
            writer.close()
            raise
        writer.meta, writer.cursor = stored.meta, count
        return writer

    def _lock_session(self, session_id: str, meta: dict[str, Any] | None, *, materialized: bool) -> MemoryWriter:
        with self._lock:
            if session_id in self._writers:
                pid = os.getpid()
                raise SessionLockedError(
                    f'session "{session_id}" is already open for writing by process {pid} (lock: {self.location}); '
                    "a session log takes one writer at a time", holder_pid=pid)
            writer = self._writers[session_id] = MemoryWriter(self, session_id, meta or {"id": session_id},
                                                              materialized=materialized)
        return writer

    def _store(self, writer: MemoryWriter, texts: list[str]) -> list[_Follow]:
        """Store one encoded batch (creating the log with its first one); returns the followers to feed."""
        session_id = writer.session_id
        with self._lock:
            if self._writers.get(session_id) is not writer:
                raise RuntimeError(f'the writer of session "{session_id}" is closed')
            entry = self._logs.get(session_id)
            if entry is None:
                entry = self._logs[session_id] = _Log(dumps(header_line(writer.meta)))
            elif not writer.materialized:
                raise _exists(session_id)
            entry.events += texts
            return list(self._follows.get(session_id, ()))

    def _release(self, writer: MemoryWriter) -> None:
        with self._lock:
            if self._writers.get(writer.session_id) is writer:
                del self._writers[writer.session_id]

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
        kept = entry.checkpoint if entry is not None else None
        if kept is None:
            return None
        rows: Rows = loads(kept[1])
        seqs: list[Any] = [row.get("seq") for row in rows.values()]
        if not rows or not all(type(seq) is int for seq in seqs):
            return None
        base = min(seqs) + 1
        tail = self.events_after(session_id, base - 1)
        refuse_unknown_types(session_id, tail, self.location)
        return Checkpointed(rows, tail, base)

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
    """Appends to one session's log in a :class:`MemoryBackend` while holding its writer lock."""

    def __init__(self, backend: MemoryBackend, session_id: str, meta: dict[str, Any], *, materialized: bool) -> None:
        self.backend = backend
        self.session_id = session_id
        self.meta = meta
        self.cursor = 0
        self.materialized = materialized
        self.last_batch: Batch | None = None
        self._closed = False

    @property
    def open(self) -> bool:
        return not self._closed

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Store ``events`` as one batch; they must continue the log's seq exactly (the file writer's words)."""
        if not events:
            return
        if self._closed:
            raise RuntimeError(f'the writer of session "{self.session_id}" is closed')
        for index, event in enumerate(events):
            if event.get("seq") != self.cursor + index:
                raise ValueError(f'append seq mismatch for "{self.session_id}": expected {self.cursor + index} '
                                 f"at index {index}, got {event.get('seq')!r}")
        follows = self.backend._store(self, [dumps(event) for event in events])  # all encoded, then stored
        self.materialized = True
        self.last_batch = Batch(self.cursor, self.cursor + len(events) - 1)
        self.cursor += len(events)
        for follow in follows:
            follow.pump()

    def close(self) -> None:
        self._closed = True
        self.backend._release(self)


class _Follow:
    """One follower: each run handed over once, in seq order, never concurrently. Whoever finds it idle delivers
    until nothing is left (a callback that appends to the session gets its own events after it returns)."""

    def __init__(self, backend: MemoryBackend, session_id: str, after_seq: int, callback: Callback) -> None:
        self.backend, self.session_id, self.after_seq, self.callback = backend, session_id, after_seq, callback
        self.closed = False
        self._guard = threading.Lock()
        self._busy = self._again = False
        self._refusals = Refusals(session_id)

    def pump(self, *, raising: bool = False) -> None:
        with self._guard:
            self._again = True
            if self._busy:
                return
            self._busy = True
        try:
            while True:
                with self._guard:
                    if not self._again or self.closed:
                        self._busy = False
                        return
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
        except BaseException:
            with self._guard:
                self._busy = False
            raise

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
