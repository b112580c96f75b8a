"""Reading stored logs on one connection: a session's rows after a seq, and sessions' lengths.

The backend reads through one :class:`Reads` (its shared connection, which also creates the tables on first use),
and the event feed through another of its own, on the feed's thread: the few queries a follower needs, not a second
backend (decision 0043). Event text is parsed back here, refusing a gap or an event whose ``seq`` disagrees with
its row.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import psycopg

from dsh_todo.harness.persistence.contract import Record
from dsh_todo.harness.persistence.errors import CorruptSessionLogError
from dsh_todo.harness.persistence.postgres.connection import Conn, broken, connect
from dsh_todo.harness.persistence.postgres.schema import Tables
from dsh_todo.jsonutil import loads

Row = tuple[int, int, str]
"""``(seq, batch, event JSON text)``."""

T = TypeVar("T")

_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")
"""What PostgreSQL ``text`` cannot hold: NUL, and a lone surrogate (which has no UTF-8)."""


def storable(text: str) -> bool:
    return _UNSTORABLE.search(text) is None


def decode_rows(session_id: str, rows: Sequence[Row], first_seq: int, location: str) -> list[Record]:
    """Parse event rows, refusing a gap or an event whose ``seq`` disagrees with its key."""
    corrupt = f'corrupt session log: session "{session_id}" in {location}'
    events: list[Record] = []
    for expected, (seq, _batch, text) in enumerate(rows, first_seq):
        if seq != expected:
            raise CorruptSessionLogError(f"{corrupt} has a seq gap (expected {expected}, got {seq})")
        try:
            event = loads(text)
        except ValueError:
            raise CorruptSessionLogError(f"{corrupt} has an unparsable event at seq {seq}") from None
        if type(event) is not dict or event.get("seq") != seq:
            raise CorruptSessionLogError(f"{corrupt} stores an event whose seq is not its key {seq}")
        events.append(event)
    return events


class Reads:
    """One autocommit connection for reading (opened on first use, re-opened once if it broke) and the queries every
    reader of the tables shares. ``prepare(conn)`` runs once, on the first connection (the backend's: the tables)."""

    def __init__(self, url: str, tables: Tables, location: str,
                 prepare: Callable[[Conn], None] | None = None) -> None:
        self.url = url
        self.tables = tables
        self.location = location
        self._prepare = prepare
        self._lock = threading.Lock()
        self._conn: Conn | None = None

    def _connection(self) -> Conn:
        conn = self._conn
        if broken(conn):
            conn = self._conn = connect(self.url, "reader")
        assert conn is not None
        if self._prepare is not None:
            self._prepare(conn)
            self._prepare = None
        return conn

    def run(self, fn: Callable[[Conn], T]) -> T:
        """Run a read on the connection; a connection that broke is re-opened and the read retried once."""
        with self._lock:
            try:
                return fn(self._connection())
            except psycopg.OperationalError:
                if not broken(self._conn):
                    raise
            return fn(self._connection())

    def query(self, sql: str, params: Sequence[Any] | None = None, conn: Conn | None = None) -> list[tuple[Any, ...]]:
        """The rows of one read, on ``conn`` or else this connection (:meth:`run`). A text parameter (a session id)
        that PostgreSQL cannot hold (:func:`storable`) names nothing stored: no rows."""
        if params is not None and not all(storable(value) for value in params if isinstance(value, str)):
            return []

        def fetch(c: Conn) -> list[tuple[Any, ...]]:
            cursor = c.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []

        return fetch(conn) if conn is not None else self.run(fetch)

    def read_rows(self, session_id: str, after_seq: int = -1, conn: Conn | None = None) -> list[Row]:
        """The stored ``(seq, batch, text)`` rows after ``after_seq``, in seq order: one consistent read."""
        return self.query(f"SELECT seq, batch, event FROM {self.tables.events} WHERE session_id = %s AND seq > %s "
                          "ORDER BY seq", (session_id, after_seq), conn)

    def read_from(self, session_id: str, after_seq: int = -1) -> list[Record]:
        """The events after ``after_seq`` (every event for ``-1``): what a follower reads on a notification."""
        return decode_rows(session_id, self.read_rows(session_id, after_seq), after_seq + 1, self.location)

    def next_seqs(self, session_ids: Iterable[str]) -> dict[str, int]:
        """The stored log lengths of several sessions at once (missing ones are left out)."""
        ids = [sid for sid in session_ids if storable(sid)]
        rows = self.query(f"SELECT id, next_seq FROM {self.tables.sessions} WHERE id = ANY(%s)", (ids,)) if ids else []
        return {str(row[0]): int(row[1]) for row in rows}

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
