"""The persistence contract: what a log backend provides, and what the ``session_persistence`` service promises.

One service (:class:`~dsh_todo.harness.persistence.service.PersistenceService`), several backends (DSH's JSONL files,
PostgreSQL, memory): everything a session's life needs that is not about bytes (write-behind, adopting a loaded
session, resuming like DSH, checkpoints at ``turn/end``) lives once, in the service and the checkpoint plugin; a
backend only reads committed events, appends durable batches, holds the one-writer lock, lists sessions and stores a
checkpoint (decision 0004). The value types below are every backend's, so a reader never needs to know which it
holds; the levels of reading (``read_stored``, ``read``, ``resume``) mirror DSH's backend and coordinator. What a
backend must write is smaller than what it offers: :mod:`.recorder` (decision 0042).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from dsh_todo.harness.event_types import Record as Record
from dsh_todo.harness.persistence.errors import log_exists
from dsh_todo.harness.persistence.header import Meta
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.harness.service_key import ServiceKey
from dsh_todo.jsonutil import dumps_bytes

if TYPE_CHECKING:
    from dsh_todo.harness.disposer import Disposer
    from dsh_todo.harness.persistence.interest import Interest
    from dsh_todo.harness.session import Session

Rows = dict[str, dict[str, Any]]
"""A projection checkpoint: ``{key: {ver, seq, val}}`` (SPEC §6.2)."""
Observer = Callable[[list[Record], list[Any]], object]
"""Sees each run of events a read hands over, in log order, with their ``type`` values."""
Start = Callable[[Rows, int], "Observer | None"]
"""Given a checkpoint's rows (and where in the log they stand), the observer of the events after them; ``None``
when the rows are of no use to the caller."""


@dataclass(frozen=True, slots=True)
class TornTail:
    """Where a crash tail starts (``truncate_to``, a byte offset in the file) and the events still recovered from it:
    under zstd, complete lines the whole blocks of an incomplete final frame still decode, part of the good prefix but
    written again, as their frame is cut away. A database never has a torn tail (a batch is one transaction)."""

    truncate_to: int
    recovered: list[Record] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A log as read: header metadata, the contiguous events (packed rows expanded) and its torn tail, if any.

    ``location`` is where it is for people (a path, or a database and schema); ``path`` the file of a JSONL log.
    ``last_record`` is where the record holding the last event starts (JSONL; ``None`` for an empty log or a torn
    last zstd frame); ``batches``, for a database log, the first seq of the batch each event was committed in.
    """

    location: str
    meta: Meta
    events: list[Record]
    torn: TornTail | None = None
    path: Path | None = None
    last_record: int | None = None
    batches: list[int] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        return str(self.meta["id"])


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """A log after committed recovery: ``events`` are the ``kept`` stored events followed by ``closers``."""

    location: str
    meta: Meta
    events: list[Record]
    kept: int
    closers: list[Record]
    rewrote: bool
    truncated_to: int | None = None
    path: Path | None = None

    @property
    def session_id(self) -> str:
        return str(self.meta["id"])


@dataclass(frozen=True, slots=True)
class Scan:
    """One read of a stored log as its reader needs it: the header, how many events are stored, the events when
    kept, and what recovery would do in memory now: the ``closers`` of an interrupted turn (none while a writer is
    ``live``: its turn is running), where a crash tail starts (``torn_at``, a byte offset) and how many stored events
    came out of an incomplete final zstd frame (``cut_frame_events``)."""

    meta: Meta
    count: int
    events: list[Record] | None = None
    closers: list[Record] = field(default_factory=list)
    live: bool = False
    torn_at: int | None = None
    cut_frame_events: int = 0


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One stored session, from its header alone (listing never parses whole logs): ``meta`` is ``None`` when the
    header cannot be read; ``problem`` refuses the session before any read (stored in a way no reader may interpret,
    e.g. one id in two places) without hiding the others."""

    id: str
    cwd: str | None
    meta: Meta | None
    location: str
    path: Path | None = None
    problem: Exception | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """Where one durable batch landed: the seqs it holds and, in a file, its byte range (0 in a database).

    ``start`` is where its first record begins (a line, or a zstd frame); ``last_record`` where the record holding
    ``last_seq`` begins (its line, or the batch's frame): both places a reader can start decoding from, which is what
    a file's projection checkpoint needs.
    """

    first_seq: int
    last_seq: int
    start: int = 0
    end: int = 0
    last_record: int = 0

    def record_of(self, seq: int) -> int:
        """A record boundary at or before the record holding ``seq`` (which must be in this batch)."""
        return self.last_record if seq == self.last_seq else self.start


@dataclass(frozen=True, slots=True)
class Checkpointed:
    """A stored checkpoint a cold reader can start from: its rows and the stored events from ``base`` on."""

    rows: Rows
    tail: list[Record]
    base: int


class LogWriter(Protocol):
    """Appends to one session's log while holding its writer lock. ``cursor`` is the next seq the log expects;
    ``last_batch`` is where the most recent durable batch landed (``None`` until one is known)."""

    @property
    def session_id(self) -> str: ...

    @property
    def cursor(self) -> int: ...

    @property
    def last_batch(self) -> Batch | None: ...

    @property
    def open(self) -> bool: ...

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Make ``events`` durable as one batch; they must continue the log's seq exactly."""

    def close(self) -> None:
        """Release the writer lock. Idempotent."""


class Subscription(Protocol):
    """What :meth:`LogBackend.follow` returns: close it to stop."""

    def close(self) -> None: ...


Callback = Callable[[Sequence[Record]], object]
"""A follower: called with each run of events, in seq order, never concurrently."""


class LogReader(Protocol):
    """Where logs are kept, as a reader sees it: finding, listing and reading, never writing (decision 0014)."""

    location: str
    """Where the sessions are, for people: a root directory, or a database and schema (never a password)."""

    holds_files: bool
    """Whether this backend keeps each log in a file (``StoredSession.path``): a reader may then also be given a
    session by its path, and says so when a name is neither a path nor a stored id."""

    def locate(self, session_id: str) -> str | None:
        """Where the log of ``session_id`` is, for people (a path or a database), or ``None`` when none is stored."""

    def stored_sessions(self) -> list[StoredSession]:
        """Every stored session, from headers only; one that cannot be read carries its ``problem``."""

    def writer_alive(self, session_id: str) -> bool:
        """Whether a writer (in any process) holds the session now: its open turn is running, not interrupted."""

    def read_stored(self, session_id: str) -> StoredLog:
        """Header, good prefix and torn tail; refuses corruption, repairs nothing, takes no lock."""

    def read(self, session_id: str) -> StoredLog:
        """:meth:`read_stored`, refusing unknown event types that are not ``ignorable``."""

    def scan(self, session_id: str, observe: Observer | None = None, *, keep: bool = False,
             wanted: Interest | None = None, expand: bool = False, where: Path | None = None,
             listed: bool = False) -> Scan:
        """One exact pass over the stored log, refused as :meth:`read` refuses it, handing each run of events to
        ``observe`` (kept only with ``keep``). A backend may spare the observer what the caller does not need: given
        ``wanted``, what the observer reads (:class:`~.interest.Interest`; ``None``: every event), it may leave out
        events of the other types it knows, and those the interest lets it (the JSONL backend does from runs of lines
        proven clean in bulk, handing over the open turn whole); without ``expand``, a packed chunk row stands as its
        last member. ``where`` is the log's
        :attr:`StoredSession.path` when the caller has it; ``listed``: the caller has just listed every session and
        found this id once. Errors not about the log (a database going away) are raised as
        :class:`~dsh_todo.harness.errors.DshTodoError`."""

    def scan_checkpointed(self, session_id: str, start: Start, *, where: Path | None = None,
                          listed: bool = False) -> Scan | None:
        """:meth:`scan` from the stored projection checkpoint, when the backend can prove the events before it
        unchanged: ``start(rows, position)`` gives the observer of the exactly read events after it (never kept).
        ``None`` whenever anything is off: the caller then scans the whole log, so the answer is the full pass's."""

    def written(self) -> dict[str, int]:
        """When each stored session was last written, as a number ordering this backend's sessions (a file's
        modification time, an event's time); sessions it cannot tell are left out."""

    def close(self) -> None:
        """Let go of connections and other resources."""


class LogBackend(LogReader, Protocol):
    """Where logs are kept, read and written; one writer per session across processes (and machines)."""

    def resume(self, session_id: str) -> tuple[LoadedLog, LogWriter]:
        """Take the writer lock, commit recovery, and return the recovered log with a writer positioned after it."""

    def create(self, meta: Mapping[str, Any]) -> LogWriter:
        """A writer for a new session (``meta``: ``id``, ``createdAt`` and optional header fields). The lock is
        taken now; the log appears with the first batch."""

    def continue_live(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> LogWriter:
        """A writer for a live session whose log already exists (its stored events must be the session's first)."""

    def write_checkpoint(self, session_id: str, header: Mapping[str, Any], rows: Rows, seq: int,
                         batch: Batch) -> None:
        """Store ``rows`` (as of event ``seq``, held by the durable ``batch``): never called for an event that is
        not durable, so a checkpoint never leads its log."""

    def read_checkpointed(self, session_id: str) -> Checkpointed | None:
        """The session's checkpoint and the stored events after it, or ``None`` when there is none that belongs
        to this log (the caller then folds the whole log)."""

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        """``callback(events)`` with the events after ``after_seq``: those stored now, then whatever any process
        commits, each run once, in seq order, never concurrently, at the cost of what a change added. A log the
        reader refuses is refused with its words; a session not stored yet is followed from its first batch."""


def scan_whole(backend: LogBackend, session_id: str, observe: Observer | None) -> Scan:
    """:meth:`LogBackend.scan` for a backend that reads a log in one piece (a database, memory): its :meth:`read`,
    handed to ``observe`` at once and kept (it is in memory anyway)."""
    stored = backend.read(session_id)
    events = list(stored.events)
    if observe is not None and events:
        observe(events, [event.get("type") for event in events])
    live = backend.writer_alive(session_id)
    torn = stored.torn
    closers = [] if live else interrupted_turn_closers(events, stored.meta)
    return Scan(dict(stored.meta), len(events), events, closers, live,
                None if torn is None else torn.truncate_to, 0 if torn is None else len(torn.recovered))


def same_start(session_id: str, stored: Sequence[Record], live: Sequence[Mapping[str, Any]],
               where: str) -> list[Record]:
    """What :meth:`LogBackend.continue_live` appends to a stored log: nothing (the turn still runs in memory); but a
    log whose events are not the live session's first is another session's of the same id, and refused."""
    if len(stored) > len(live) or any(dumps_bytes(a) != dumps_bytes(b) for a, b in zip(stored, live, strict=False)):
        raise log_exists(session_id, where)
    return []


WrittenListener = Callable[[str, Batch], object]


class SessionPersistence(Protocol):
    """``ctx.session_persistence``: every live session persisted, stored ones loaded back, whatever the backend."""

    @property
    def backend(self) -> LogBackend: ...

    @property
    def closed(self) -> bool: ...

    @property
    def batch_delay(self) -> float:
        """The write-behind window, in seconds."""

    def load(self, session_id: str) -> Session:
        """The live session, or the stored one restored (recovery committed, resumed like DSH) and made live."""

    def read(self, session_id: str) -> StoredLog:
        """A stored log without loading it (no lock, no repair)."""

    def stored_sessions(self) -> list[StoredSession]: ...

    def locate(self, session_id: str) -> str | None: ...

    def flush(self, session_id: str | None = None) -> None:
        """Make everything queued durable now."""

    def flush_soon(self, session_id: str, through: int) -> None:
        """Have everything up to seq ``through`` written soon, in the background, as a batch ending there."""

    def release(self, session_id: str) -> None:
        """Flush one session and release its writer lock; later appends to it are no longer persisted."""

    def on_written(self, listener: WrittenListener) -> Disposer:
        """``listener(session_id, batch)`` after each durable batch, and once after a load with where the log
        stands."""

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription: ...

    def close(self) -> None: ...


SESSION_PERSISTENCE: Final[ServiceKey[SessionPersistence]] = ServiceKey("session_persistence")
"""The persistence service's key: ``ctx[SESSION_PERSISTENCE]`` (the service itself is :mod:`.service`'s)."""
