"""The PostgreSQL session backend: the contract's levels of reading and writing (:mod:`..contract`), over tables
instead of one file per session.

The raw read refuses damage (a seq gap, an event whose own ``seq`` disagrees with its row) but has no torn tail to cut:
a batch is one transaction, so a crash leaves all of it or none. Recovery only appends the closers of an interrupted
turn (the JSONL backend's), in one transaction under the writer lock.

Reads share one autocommit connection (:mod:`.reads`, re-opened once if it broke); each writer has its own
connection, which also holds the session's advisory lock (:mod:`.locking`). Event text is written by the canonical
encoder (:func:`dsh_todo.jsonutil.dumps`) and never re-encoded by the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import psycopg

from dsh_todo.harness.errors import DatabaseUnavailableError
from dsh_todo.harness.persistence.contract import (
    Batch,
    Checkpointed,
    LoadedLog,
    Observer,
    Scan,
    StoredLog,
    StoredSession,
    scan_whole,
)
from dsh_todo.harness.persistence.errors import (
    CorruptSessionLogError,
    SessionFormatUnsupportedError,
    SessionWriteError,
    locked,
    log_exists,
    not_stored,
    seq_mismatch,
    writer_closed,
)
from dsh_todo.harness.persistence.header import Meta, decode_header, header_line, log_identity
from dsh_todo.harness.persistence.postgres.connection import Conn, broken, cause, connect, describe
from dsh_todo.harness.persistence.postgres.feed import EventFeed
from dsh_todo.harness.persistence.postgres.locking import (
    find_holder,
    forget_holder,
    lock_key,
    name_holder,
    record_holder,
    try_lock,
)
from dsh_todo.harness.persistence.postgres.reads import Reads, Row, decode_rows, storable
from dsh_todo.harness.persistence.postgres.schema import Tables, ensure_schema
from dsh_todo.harness.persistence.recorder import WholeLogBackend
from dsh_todo.jsonutil import dumps, loads

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.contract import Callback, Record, Rows, Subscription

T = TypeVar("T")

NOTIFY_PAYLOAD_MAX: Final = 7999
"""PostgreSQL refuses a ``NOTIFY`` payload of 8000 bytes or more."""



def _column_text(value: Any) -> str | None:
    return value if isinstance(value, str) and storable(value) else None


def _column_int(value: Any) -> int | None:
    if type(value) is int or (type(value) is float and value.is_integer()):
        number = int(value)
        return number if -(2**63) <= number < 2**63 else None
    return None


def header_columns(meta: Mapping[str, Any]) -> tuple[Any, ...]:
    """``(header, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset)``."""
    line = header_line(meta)
    return (dumps(line), line["version"], _column_int(line["createdAt"]) or 0, _column_text(line.get("cwd")),
            _column_text(line.get("parentSession")), _column_int(line.get("seedLength")),
            _column_text(line.get("origin")), _column_int(line["delegationDepth"]) or 0,
            _column_text(line.get("agentPreset")))


class PgBackend(WholeLogBackend["PgWriter"]):
    """Session logs in one PostgreSQL database and schema. ``url`` is a libpq connection string or URI."""

    holds_files = False

    def __init__(self, url: str, *, schema: str = "public", poll_interval: float = 5.0) -> None:
        self.url = url
        self.poll_interval = poll_interval
        self._feed: EventFeed | None = None
        self.tables = Tables(schema)
        self.location = f"{describe(url)} (schema {schema})"
        self._lock = threading.Lock()
        self._reads = Reads(url, self.tables, self.location, lambda conn: ensure_schema(conn, self.tables))

    def __repr__(self) -> str:
        return f"PgBackend({self.location!r})"

    # -- connections ----------------------------------------------------------------------------------------

    def run(self, fn: Callable[[Conn], T]) -> T:
        """Run a read on the shared connection (:meth:`.Reads.run`: re-opened and retried once if it broke); the
        first one creates the tables if they are missing."""
        return self._reads.run(fn)

    def query(self, sql: str, params: Sequence[Any] | None = None, conn: Conn | None = None) -> list[tuple[Any, ...]]:
        """The rows of one read, on ``conn`` or else the shared connection (:meth:`.Reads.query`)."""
        return self._reads.query(sql, params, conn)

    def open(self) -> None:
        """Connect now (creating the tables if needed), so a wrong URL fails at boot rather than on first use, with
        :class:`DatabaseUnavailableError` saying where and why in one line."""
        try:
            self.run(lambda _conn: None)
        except psycopg.Error as exc:  # unreachable, refused, or no right to create the tables
            self.close()
            raise DatabaseUnavailableError(f"cannot open the database {self.location}: {cause(exc)}") from None

    def close(self) -> None:
        """Stop following and close the shared reading connection (writers close their own)."""
        with self._lock:
            feed, self._feed = self._feed, None
        if feed is not None:
            feed.close()
        self._reads.close()

    def lock_session(self, session_id: str) -> tuple[Conn, int]:
        """A new writer connection holding ``session_id``'s advisory lock, or :class:`SessionLockedError`."""
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("a session id must be a non-empty string")
        if not storable(session_id):
            raise ValueError(f"session id {session_id!r} cannot be stored in PostgreSQL (it holds NUL or a lone "
                             "surrogate); the JSONL backend can store it")
        self.run(lambda _conn: None)  # the tables exist before anyone writes
        key = lock_key(self.tables.schema, session_id)
        conn = connect(self.url, "writer", keepalive=True)
        try:
            if not try_lock(conn, key):
                holder = name_holder(conn, self.tables, session_id, key)
                raise locked(session_id, "another writer" if holder is None else holder.describe(),
                             f"advisory key {key & 0xFFFFFFFFFFFFFFFF:#018x} in {self.location}",
                             None if holder is None else holder.client_pid)
            record_holder(conn, self.tables, session_id, os.getpid())
        except BaseException:
            conn.close()
            raise
        return conn, key

    # -- locating -------------------------------------------------------------------------------------------

    def locate(self, session_id: str) -> str | None:
        """Where the log of ``session_id`` is (a description, not a path), or ``None`` when it was never written."""
        return self.location if self.next_seq(session_id) is not None else None

    def writer_alive(self, session_id: str) -> bool:
        """Whether a writer holds the session's advisory lock now (in any process, on any machine)."""
        if not storable(session_id):
            return False
        key = lock_key(self.tables.schema, session_id)
        return self.run(lambda conn: find_holder(conn, self.tables, session_id, key)) is not None

    def next_seq(self, session_id: str, conn: Conn | None = None) -> int | None:
        """The stored log length of ``session_id`` (``None``: no log)."""
        rows = self.query(f"SELECT next_seq FROM {self.tables.sessions} WHERE id = %s", (session_id,), conn)
        return int(rows[0][0]) if rows else None

    def next_seqs(self, session_ids: Iterable[str]) -> dict[str, int]:
        """The stored log lengths of several sessions at once (missing ones are left out)."""
        return self._reads.next_seqs(session_ids)

    def stored_sessions(self) -> list[StoredSession]:
        """Every stored session, from the sessions table; headers from a newer format are skipped, as JSONL does."""
        found: list[StoredSession] = []
        for (header,) in self.query(f"SELECT header FROM {self.tables.sessions} ORDER BY created_at, id"):
            try:
                meta = decode_header(loads(header))
            except (ValueError, CorruptSessionLogError, SessionFormatUnsupportedError):
                continue
            found.append(StoredSession(meta["id"], meta.get("cwd"), meta, self.location))
        return found

    # -- reading --------------------------------------------------------------------------------------------

    def read_meta(self, session_id: str) -> Meta:
        rows = self.query(f"SELECT header FROM {self.tables.sessions} WHERE id = %s", (session_id,))
        if not rows:
            raise not_stored(session_id, f"in {self.location}")
        try:
            value = loads(rows[0][0])
        except ValueError:
            raise CorruptSessionLogError(f'corrupt session log: session "{session_id}" in {self.location} has an '
                                         "unparsable header") from None
        try:
            meta = decode_header(value)
        except SessionFormatUnsupportedError as exc:
            raise SessionFormatUnsupportedError(f"{exc} (raw log: {self.location})") from None
        if meta["id"] != session_id:
            raise CorruptSessionLogError(f'corrupt session log: requested id "{session_id}" does not match header '
                                         f'id "{meta["id"]}" in {self.location}')
        return meta

    def read_rows(self, session_id: str, after_seq: int = -1, conn: Conn | None = None) -> list[Row]:
        """The stored ``(seq, batch, text)`` rows after ``after_seq``, in seq order: one consistent read."""
        return self._reads.read_rows(session_id, after_seq, conn)

    def read_from(self, session_id: str, after_seq: int = -1) -> list[Record]:
        """The events after ``after_seq`` (every event for ``-1``): what a follower reads on a notification."""
        return self._reads.read_from(session_id, after_seq)

    def read_stored(self, session_id: str) -> StoredLog:
        """The raw read: header and every event. Refuses damage, repairs nothing, takes no lock."""
        meta = self.read_meta(session_id)
        rows = self.read_rows(session_id)
        events = decode_rows(session_id, rows, 0, self.location)
        return StoredLog(self.location, meta, events, batches=[row[1] for row in rows])

    def scan(self, session_id: str, observe: Observer | None = None, **spare: Any) -> Scan:
        """The log read whole (:func:`~dsh_todo.harness.persistence.contract.scan_whole`); the database's own
        failures are raised as :class:`DatabaseUnavailableError` with psycopg's words."""
        try:
            return scan_whole(self, session_id, observe)
        except psycopg.Error as exc:
            raise DatabaseUnavailableError(str(exc)) from exc

    def written(self) -> dict[str, int]:
        """Every stored session's id and the time of its last event (milliseconds), in one query."""
        found: dict[str, int] = {}
        for session_id, text in self.query(f"SELECT DISTINCT ON (session_id) session_id, event FROM "
                                           f"{self.tables.events} ORDER BY session_id, seq DESC"):
            try:
                stamp = loads(text).get("time")
            except (ValueError, AttributeError):
                continue
            if type(stamp) is int:
                found[str(session_id)] = stamp
        return found

    # -- writing --------------------------------------------------------------------------------------------

    def load(self, session_id: str) -> LoadedLog:
        """Read the log and commit recovery under the writer lock (released again before returning)."""
        loaded, writer = self.resume(session_id)
        writer.close()
        return loaded

    def lock(self, session_id: str, meta: Meta | None = None) -> PgWriter:
        conn, key = self.lock_session(session_id)
        try:
            if meta is not None and self.next_seq(session_id, conn) is not None:
                raise log_exists(session_id, f"in {self.location}")
        except BaseException:
            release(conn, self.tables, session_id, key)
            raise
        return PgWriter(self, conn, key, session_id, meta)

    # -- projection checkpoints -----------------------------------------------------------------------------

    def write_checkpoint(self, session_id: str, header: Mapping[str, Any], rows: Rows, seq: int,
                         batch: Batch) -> None:
        """Store SPEC §6.2's ``{identity, rows}`` record as the session's checkpoint, as exact JSON text.

        A checkpoint never moves backwards (an older one arriving late is ignored) and never gets ahead of the log:
        ``seq`` must be a stored seq, which the statement checks against ``next_seq`` itself.
        """
        if not storable(session_id):
            return
        text = dumps({"identity": log_identity(header), "rows": rows})
        query = (f"INSERT INTO {self.tables.checkpoints} (session_id, as_of_seq, record, updated_at) "
                 f"SELECT %s, %s, %s, now() FROM {self.tables.sessions} WHERE id = %s AND next_seq > %s "
                 "ON CONFLICT (session_id) DO UPDATE SET as_of_seq = EXCLUDED.as_of_seq, record = EXCLUDED.record, "
                 f"updated_at = now() WHERE {self.tables.checkpoints}.as_of_seq <= EXCLUDED.as_of_seq")
        self.run(lambda c: c.execute(query, (session_id, seq, text, session_id, seq)))

    def read_checkpoint(self, session_id: str) -> tuple[dict[str, Any], int] | None:
        """``(record, as_of_seq)`` of the session's checkpoint, or ``None``."""
        rows = self.query(f"SELECT record, as_of_seq FROM {self.tables.checkpoints} WHERE session_id = %s",
                          (session_id,))
        record = loads(rows[0][0]) if rows else None
        return (record, int(rows[0][1])) if isinstance(record, dict) else None

    def read_checkpointed(self, session_id: str) -> Checkpointed | None:
        """The checkpoint, if its identity is this session's, with the stored events from the earliest row on."""
        stored = self.read_checkpoint(session_id)
        if stored is None:
            return None
        rows, identity = stored[0].get("rows"), stored[0].get("identity")
        if (not isinstance(rows, dict) or not rows or not isinstance(identity, dict)
                or identity != log_identity(self.read_meta(session_id))):
            return None
        return self.checkpointed(session_id, rows)

    # -- following and closing ------------------------------------------------------------------------------

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        """``callback(events)`` with the events after ``after_seq``, now and whenever any process commits more,
        through this backend's one :mod:`.feed` (started here, on first use, once the tables exist)."""
        self.run(lambda _conn: None)
        with self._lock:
            if self._feed is None:
                self._feed = EventFeed(self)
            feed = self._feed
        return feed.subscribe(session_id, after_seq, callback)

    async def events(self, session_id: str, after_seq: int = -1) -> AsyncIterator[Sequence[Record]]:
        """:meth:`follow` as an async iterator of event runs (for carriers on an event loop)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Sequence[Record]] = asyncio.Queue()

        def deliver(events: Sequence[Record]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed under us
                loop.call_soon_threadsafe(queue.put_nowait, events)

        subscription = await asyncio.to_thread(self.follow, session_id, after_seq, deliver)
        try:
            while True:
                yield await queue.get()
        finally:
            subscription.close()


def release(conn: Conn, tables: Tables, session_id: str, key: int) -> None:
    """Give up a writer connection's lock (and its holder row), then close it."""
    try:
        if not broken(conn):
            forget_holder(conn, tables, session_id)
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    except psycopg.Error:
        pass  # closing the connection releases the lock anyway
    finally:
        conn.close()


class PgWriter:
    """Appends to one session's log on its own connection, which holds the session's advisory lock.

    ``cursor`` is the next seq the log expects. Each :meth:`append` (or :meth:`append_batches`) is one transaction:
    the rows, ``next_seq`` advanced if it still holds its old value, and the ``NOTIFY`` (decision 0003).

    If the connection breaks, the lock went with it: the next append opens a new connection, takes the lock again
    (or fails with :class:`SessionLockedError` if another writer got in first) and reconciles: a batch whose commit
    was in flight when the connection broke is either wholly stored (then it is not written twice) or not at all.
    """

    def __init__(self, backend: PgBackend, conn: Conn, key: int, session_id: str, meta: Meta | None) -> None:
        self.backend, self.session_id, self.meta = backend, session_id, meta
        self.cursor = 0
        self.last_batch: Batch | None = None
        """Where the last batch landed: its seqs (rows have no byte offsets)."""
        self._conn: Conn | None = conn
        self._key = key
        self.open = True
        self._io = threading.Lock()
        tables = backend.tables
        self._copy = f"COPY {tables.events} (session_id, seq, batch, type, event) FROM STDIN"
        self._advance = (f"UPDATE {tables.sessions} SET next_seq = %s, updated_at = now() "
                         "WHERE id = %s AND next_seq = %s")
        self._insert_session = (
            f"INSERT INTO {tables.sessions} (id, header, version, created_at, cwd, parent_session, seed_length, "
            "origin, delegation_depth, agent_preset, next_seq) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0)")

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Make ``events`` durable as one batch (one transaction); they must continue the log's seq exactly."""
        self.append_batches([events])

    def append_batches(self, batches: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        """Make several batches durable in one transaction, each keeping its own ``batch`` id (used by import)."""
        batches = [batch for batch in batches if batch]
        if not batches:
            return
        if not self.open:
            raise writer_closed(self.session_id)
        expected = self.cursor
        for batch in batches:
            for event in batch:
                if event.get("seq") != expected:
                    raise seq_mismatch(self.session_id, expected, event.get("seq"), None)
                expected += 1
        with self._io:
            for attempt in (1, 2):
                conn = self._connection(batches)
                if conn is None:  # the previous attempt had committed these very batches
                    return
                try:
                    self._commit(conn, batches, expected)
                    return
                except psycopg.OperationalError:
                    if not broken(conn):
                        raise
                    self._conn = None  # reconnect, take the lock again, and reconcile
                    if attempt == 2:
                        raise

    def _commit(self, conn: Conn, batches: Sequence[Sequence[Mapping[str, Any]]], next_seq: int) -> None:
        session_id = self.session_id
        with conn.transaction():
            if self.meta is not None:  # a new session's row appears with its first batch
                conn.execute(self._insert_session, (session_id, *header_columns(self.meta)))
            with conn.cursor() as cur, cur.copy(self._copy) as copy:
                for batch in batches:
                    first = batch[0]["seq"]
                    for event in batch:
                        kind = _column_text(event.get("type")) or ""
                        copy.write_row((session_id, event["seq"], first, kind, dumps(event)))
            advanced = conn.execute(self._advance, (next_seq, session_id, self.cursor)).rowcount
            if advanced != 1:
                raise SessionWriteError(f'session "{session_id}" changed under its writer (its stored length is not '
                                        f"{self.cursor}); refusing to write")
            payload = f"{session_id}:{next_seq - 1}"
            if len(payload.encode("utf-8")) <= NOTIFY_PAYLOAD_MAX:
                conn.execute("SELECT pg_notify(%s, %s)", (self.backend.tables.channel, payload))
        self.meta = None
        self.last_batch = Batch(self.cursor, next_seq - 1)
        self.cursor = next_seq

    def _connection(self, batches: Sequence[Sequence[Mapping[str, Any]]]) -> Conn | None:
        """The live connection; after a break, a new one holding the lock again, reconciled with what is stored."""
        conn = self._conn
        if not broken(conn):
            assert conn is not None
            return conn
        conn, self._key = self.backend.lock_session(self.session_id)
        try:
            stored = self.backend.next_seq(self.session_id, conn)
            if stored is not None:
                self.meta = None
            if stored is None or stored == self.cursor:
                self._conn = conn
                return conn
            wanted = [dumps(event) for batch in batches for event in batch]
            if stored == self.cursor + len(wanted):
                rows = self.backend.read_rows(self.session_id, self.cursor - 1, conn)
                if [row[2] for row in rows] == wanted:
                    self._conn = conn
                    self.last_batch = Batch(self.cursor, stored - 1)
                    self.cursor = stored
                    return None
            raise SessionWriteError(f'session "{self.session_id}" was written by someone else while its writer was '
                                    f"disconnected (stored length {stored}, expected {self.cursor}); refusing to "
                                    "write")
        except BaseException:
            if self._conn is not conn:
                release(conn, self.backend.tables, self.session_id, self._key)
            raise

    def close(self) -> None:
        """Release the lock and the connection. A session that never wrote leaves no row behind."""
        with self._io:
            if not self.open:
                return
            self.open = False
            conn, self._conn = self._conn, None
        if conn is not None:
            release(conn, self.backend.tables, self.session_id, self._key)
