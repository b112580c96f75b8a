"""What a new backend must supply (:class:`Recorder`), and the rest of the contract derived from it once
(:class:`WholeLogBackend`), as eventsourcing derives an application's event store from its recorder (decision 0042).

:class:`~.contract.LogBackend` is what the service and the readers call: sixteen members beside ``location``. A
backend that keeps each batch whole (a database, memory) writes only the seven of :class:`Recorder` (six of those
sixteen, and the writer ``lock``) and subclasses :class:`WholeLogBackend` for the other ten: the reads that refuse
unknown types, recovery (the closers of an interrupted turn), ``resume``, ``create``, ``continue_live``, the scans,
``locate``, ``written``, ``close``. It may override a derived member where it knows a faster way (PostgreSQL answers
``locate`` and ``written`` in one query each). The JSONL backend implements :class:`~.contract.LogBackend` itself: a
file can be torn, and its bulk-proven scan and checkpoint proof are what a reader of long logs needs (decisions
0010, 0015).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from dsh_todo.harness.persistence.contract import (
    Batch,
    Callback,
    Checkpointed,
    LoadedLog,
    LogBackend,
    LogWriter,
    Observer,
    Record,
    Rows,
    Scan,
    Start,
    StoredLog,
    StoredSession,
    Subscription,
    same_start,
    scan_whole,
)
from dsh_todo.harness.persistence.errors import (
    SessionLogError,
    SessionNotFoundError,
    not_stored,
    refuse_unknown_types,
)
from dsh_todo.harness.persistence.header import SESSION_FORMAT_VERSION, Meta, check_meta
from dsh_todo.harness.persistence.repair import interrupted_turn_closers


class Positioned(LogWriter, Protocol):
    """A writer :class:`WholeLogBackend` positions after the log it read under the writer's lock."""

    cursor: int


W = TypeVar("W", bound=Positioned, covariant=True)


class Recorder(Protocol[W]):
    """The seven members a new backend must supply, beside ``location`` (where its sessions are, for people): a
    listing from headers, the raw read, the writer lock and whether it is held, a checkpoint stored and read back
    with its tail, and followers fed. Everything else a reader or the service calls is derived from these by
    :class:`WholeLogBackend`; the in-memory backend (``memory/``) is the worked example."""

    location: str

    def stored_sessions(self) -> list[StoredSession]:
        """Every stored session, from headers only; one that cannot be read carries its ``problem``."""
        ...

    def read_stored(self, session_id: str) -> StoredLog:
        """Header and every stored event; refuses damage (a seq gap, an unparsable event), repairs nothing, takes no
        lock; :func:`~.errors.not_stored` for a session not stored."""
        ...

    def writer_alive(self, session_id: str) -> bool:
        """Whether a writer (in any process) holds the session now."""
        ...

    def lock(self, session_id: str, meta: Meta | None = None) -> W:
        """Take the writer lock: a writer for the stored log (the caller positions it) or, with ``meta``, for a new
        session whose log appears with its first batch, refused if one is stored (checked under the lock). The
        writer's ``append`` stores a batch whole or not at all."""
        ...

    def write_checkpoint(self, session_id: str, header: Mapping[str, Any], rows: Rows, seq: int,
                         batch: Batch) -> None:
        """Store ``rows`` as of the durable event ``seq``: never ahead of the log, never behind the one stored."""
        ...

    def read_checkpointed(self, session_id: str) -> Checkpointed | None:
        """The stored checkpoint, if it is this log's, with the stored events after it
        (:meth:`WholeLogBackend.checkpointed` builds the answer from the stored rows)."""
        ...

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        """:meth:`~.contract.LogBackend.follow` (a :class:`~.followers.Follower` does the handing over)."""
        ...


class WholeLogBackend(Recorder[W], LogBackend, Protocol[W]):
    """:class:`~.contract.LogBackend` derived from a :class:`Recorder`, for a backend that keeps a log in one piece:
    a batch is stored whole or not at all, so nothing is torn and recovery is only the closers of an interrupted
    turn. Subclass it and write the recorder's seven members."""

    holds_files: bool = False

    def locate(self, session_id: str) -> str | None:
        """:attr:`location` when the session is listed (a backend with an index answers faster)."""
        return self.location if any(item.id == session_id for item in self.stored_sessions()) else None

    def read_from(self, session_id: str, after_seq: int) -> list[Record]:
        """The stored events after ``after_seq`` (refusing damage as :meth:`read_stored` does; none for a session
        not stored yet, which a follower waits for)."""
        try:
            events = self.read_stored(session_id).events
        except SessionNotFoundError:
            return []
        return events[max(after_seq + 1, 0):]

    def written(self) -> dict[str, int]:
        """The ``time`` of each listed session's last event; a session that cannot be read is left out."""
        found: dict[str, int] = {}
        for item in self.stored_sessions():
            if item.problem is not None:
                continue
            try:
                events = self.read_stored(item.id).events
            except SessionLogError:  # a log that cannot be read has no time to order it by
                continue
            if events and type(time := events[-1].get("time")) is int:
                found[item.id] = time
        return found

    def close(self) -> None:
        """Nothing to let go of unless the backend holds connections."""
        return None

    def read(self, session_id: str) -> StoredLog:
        stored = self.read_stored(session_id)
        refuse_unknown_types(session_id, stored.events, self.location)
        return stored

    def scan(self, session_id: str, observe: Observer | None = None, **spare: Any) -> Scan:
        """The log read whole: the options that let a backend spare work have nothing to spare here."""
        return scan_whole(self, session_id, observe)

    def scan_checkpointed(self, session_id: str, start: Start, **spare: Any) -> Scan | None:
        """Nothing to spare either: the log is read in one piece, and its checkpoint serves the service's restore
        (:meth:`read_checkpointed`), not a proof for readers."""
        return None

    def resume(self, session_id: str) -> tuple[LoadedLog, W]:
        """Take the writer lock and append the closers of an interrupted turn. A second resume finds nothing to do."""
        if self.locate(session_id) is None:  # refused before the writer lock is looked at, as a file's resume
            raise not_stored(session_id, f"in {self.location}")

        def recover(stored: StoredLog) -> list[Record]:
            refuse_unknown_types(session_id, stored.events, self.location)
            return interrupted_turn_closers(stored.events, stored.meta)

        stored, closers, writer = self._reopen(session_id, recover)
        loaded = LoadedLog(self.location, stored.meta, [*stored.events, *closers], len(stored.events), closers,
                           rewrote=bool(closers))
        return loaded, writer

    def create(self, meta: Mapping[str, Any]) -> W:
        check_meta(meta)
        return self.lock(meta["id"], {"version": SESSION_FORMAT_VERSION, **meta})  # v0 only when asked for

    def continue_live(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> W:
        return self._reopen(session_id, lambda stored: same_start(session_id, stored.events, events,
                                                                  f"in {self.location}"))[2]

    def _reopen(self, session_id: str, check: Callable[[StoredLog], list[Record]],
                ) -> tuple[StoredLog, list[Record], W]:
        """Lock a stored session, position a writer after its log and append what ``check`` returns (it may
        refuse); the lock is let go again if anything fails."""
        writer = self.lock(session_id)
        try:
            stored = self.read_stored(session_id)
            writer.cursor = len(stored.events)
            closers = check(stored)
            writer.append(closers)
        except BaseException:
            writer.close()
            raise
        return stored, closers, writer

    def checkpointed(self, session_id: str, rows: object) -> Checkpointed | None:
        """A stored checkpoint's ``rows`` and the stored events from its earliest row's next seq on (refused as
        :meth:`read` refuses them), or ``None`` when the rows are no checkpoint's."""
        if not isinstance(rows, dict) or not rows:
            return None
        seqs: list[Any] = [row.get("seq") if isinstance(row, dict) else -1 for row in rows.values()]
        if not all(type(seq) is int and seq >= 0 for seq in seqs):
            return None
        tail = self.read_from(session_id, min(seqs))
        refuse_unknown_types(session_id, tail, self.location)
        return Checkpointed(rows, tail, min(seqs) + 1)
