"""Session logs kept in memory: the persistence contract's third backend, and the worked example of a new one.

What httpx's ``MockTransport`` is to its transports: DSH's JSONL files' and PostgreSQL's contract
(:class:`~.contract.LogBackend`) and contract suite, without a directory or a server, and nothing kept after the
process. As strict as a file: events are stored as the canonical encoder's JSON text, so what a file refuses or
changes is refused or changed alike, and nothing a caller mutates later reaches the log. A batch is stored whole or
not at all (never a torn tail). Contexts booted on one :class:`MemoryBackend` share its logs and its one writer per
session, as processes on one root do. Followers are fed on the appending thread as each batch is stored: nothing to
poll, and a slow follower slows that writer, which a test backend can afford.

A new backend's whole job: the seven members of :class:`~..recorder.Recorder` (``stored_sessions``, ``read_stored``,
``writer_alive``, ``lock`` and its writer, ``write_checkpoint``, ``read_checkpointed``, ``follow``) and ``location``;
:class:`~..recorder.WholeLogBackend` derives the rest of :class:`~..contract.LogBackend`. One derived member is
overridden, for speed (``read_from``: a follower decodes only what is new).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_todo.harness.persistence.contract import Batch, Callback, Checkpointed, Record, Rows, StoredLog, StoredSession
from dsh_todo.harness.persistence.errors import locked, log_exists, not_stored, seq_mismatch, writer_closed
from dsh_todo.harness.persistence.followers import Follower
from dsh_todo.harness.persistence.header import Meta, decode_header, header_line
from dsh_todo.harness.persistence.recorder import WholeLogBackend
from dsh_todo.jsonutil import dumps, loads


@dataclass
class _Log:
    """One stored session: its header and events as JSON text, and its checkpoint ``(as_of_seq, rows text)``."""

    header: str
    events: list[str] = field(default_factory=list)
    checkpoint: tuple[int, str] | None = None


class MemoryBackend(WholeLogBackend["MemoryWriter"]):
    """Session logs in this process's memory, shared by every context booted on this object."""

    location = "memory"
    holds_files = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, _Log] = {}
        self._writers: dict[str, MemoryWriter] = {}
        self._follows: dict[str, list[_Follow]] = {}

    # -- reading --------------------------------------------------------------------------------------------

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
                raise not_stored(session_id, f"in {self.location}")
            header, texts = entry.header, list(entry.events)
        return StoredLog(self.location, decode_header(loads(header)), [loads(text) for text in texts])

    def read_from(self, session_id: str, after_seq: int) -> list[Record]:
        """Derived, but overridden for speed: a follower decodes only the events after ``after_seq``, not the log."""
        with self._lock:
            entry = self._logs.get(session_id)
            texts = entry.events[max(after_seq + 1, 0):] if entry is not None else []
        return [loads(text) for text in texts]

    # -- writing --------------------------------------------------------------------------------------------

    def lock(self, session_id: str, meta: Meta | None = None) -> MemoryWriter:
        with self._lock:
            if meta is not None and session_id in self._logs:
                raise log_exists(session_id, f"in {self.location}")
            if session_id in self._writers:
                raise locked(session_id, f"process {os.getpid()}", self.location, os.getpid())
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
        """The kept rows with the stored events after them (:meth:`~..recorder.WholeLogBackend.checkpointed`)."""
        entry = self._logs.get(session_id)
        checkpoint = None if entry is None else entry.checkpoint
        return None if checkpoint is None else self.checkpointed(session_id, loads(checkpoint[1]))

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> _Follow:
        """``callback(events)`` with what is stored after ``after_seq`` now (on this thread, raising a refusal),
        then with each batch as it is stored, on the appending thread."""
        follow = _Follow(self, session_id, after_seq, callback)
        with self._lock:
            self._follows.setdefault(session_id, []).append(follow)
        return follow.start()


class MemoryWriter:
    """Appends to one session's log in a :class:`MemoryBackend` while holding its writer lock. ``meta`` is the
    header of a new session, stored with its first batch (``None`` when the log exists)."""

    def __init__(self, backend: MemoryBackend, session_id: str, meta: Meta | None) -> None:
        self.backend, self.session_id, self.meta = backend, session_id, meta
        self.cursor = 0
        self.last_batch: Batch | None = None
        self.open = True

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Store ``events`` as one batch; they must continue the log's seq exactly (the file writer's words)."""
        if not events:
            return
        if not self.open:  # said before the seqs are checked, as by the file writer
            raise writer_closed(self.session_id)
        for index, event in enumerate(events):
            if event.get("seq") != self.cursor + index:
                raise seq_mismatch(self.session_id, self.cursor + index, event.get("seq"), index)
        texts = [dumps(event) for event in events]  # all encoded, then stored
        backend = self.backend
        with backend._lock:
            if backend._writers.get(self.session_id) is not self:
                raise writer_closed(self.session_id)
            if self.meta is not None:  # a new session's log appears with its first batch
                backend._logs[self.session_id] = _Log(dumps(header_line(self.meta)))
            backend._logs[self.session_id].events += texts
            follows = list(backend._follows.get(self.session_id, ()))
        self.meta = None
        self.last_batch = Batch(self.cursor, self.cursor + len(events) - 1)
        self.cursor += len(events)
        for follow in follows:
            follow.look()

    def close(self) -> None:
        self.open = False
        with self.backend._lock:
            if self.backend._writers.get(self.session_id) is self:
                del self.backend._writers[self.session_id]


class _Follow(Follower):
    """One follower: each run handed over once, in seq order, never concurrently (a callback that appends to the
    session gets its own events after it returns)."""

    def __init__(self, backend: MemoryBackend, session_id: str, after_seq: int, callback: Callback) -> None:
        super().__init__(session_id, after_seq, callback)
        self.backend = backend
        self._again = False
        self._guard = threading.Lock()

    def look(self, *, raising: bool = False) -> None:
        """Deliver what is stored after ``after_seq``. Whoever finds the follower busy leaves a note and goes; the
        one delivering reads the note after letting go, so nothing is missed and no two runs overlap."""
        self._again = True
        while self._again and not self.closed:
            if not self._guard.acquire(blocking=False):
                return
            try:
                self._again = False
                self.step(self.backend.read_from, self.backend.location, raising=raising)
            finally:
                self._guard.release()

    def close(self) -> None:
        super().close()
        with self.backend._lock:
            follows = self.backend._follows.get(self.session_id, [])
            if self in follows:
                follows.remove(self)
