"""One writer per session across processes and machines: a PostgreSQL advisory lock on a session-scoped key.

``pg_try_advisory_lock(key)`` on the writer's own connection, through which all its batches go, so the server drops
the lock with the connection and a writer that lost it cannot write (decision 0003); a vanished machine is noticed by
the keepalive probes set in :mod:`.connection`. The key is 64 bits of BLAKE2b over the schema and the session id: two
sessions sharing a key is a 2^-64 event, and would only make one writer wait, never let two in.

The refusal names the holder. ``pg_locks`` says which backend holds the key (always visible, whatever the role);
``dsh_todo_writers`` says which client process on which host opened that backend, and is believed only when its
backend pid matches the lock's current holder.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from dsh_todo.harness.persistence.postgres.connection import Conn, host_name
from dsh_todo.harness.persistence.postgres.schema import Tables


def lock_key(schema: str, session_id: str) -> int:
    """The signed 64-bit advisory key of one session in one schema."""
    digest = hashlib.blake2b(f"dsh-todo\0{schema}\0{session_id}".encode(), digest_size=8,
                             person=b"dsh-todo-lock").digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass(frozen=True, slots=True)
class Holder:
    backend_pid: int
    client_pid: int | None = None
    host: str | None = None
    since: str | None = None

    def describe(self) -> str:
        if self.client_pid is None:
            return f"PostgreSQL backend {self.backend_pid}"
        where = f" on {self.host}" if self.host else ""
        when = f", since {self.since}" if self.since else ""
        return f"process {self.client_pid}{where} (PostgreSQL backend {self.backend_pid}{when})"


def try_lock(conn: Conn, key: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return bool(row and row[0])


def record_holder(conn: Conn, tables: Tables, session_id: str, client_pid: int) -> None:
    """Say who we are in ``dsh_todo_writers`` (for a rival's error message; never consulted as the lock)."""
    conn.execute(
        f"INSERT INTO {tables.writers} (session_id, backend_pid, client_pid, host, since) "
        "VALUES (%s, pg_backend_pid(), %s, %s, now()) ON CONFLICT (session_id) DO UPDATE SET "
        "backend_pid = EXCLUDED.backend_pid, client_pid = EXCLUDED.client_pid, host = EXCLUDED.host, "
        "since = EXCLUDED.since", (session_id, client_pid, host_name()))


def forget_holder(conn: Conn, tables: Tables, session_id: str) -> None:
    conn.execute(f"DELETE FROM {tables.writers} WHERE session_id = %s AND backend_pid = pg_backend_pid()",
                 (session_id,))


def name_holder(conn: Conn, tables: Tables, session_id: str, key: int, *, patience: float = 0.5) -> Holder | None:
    """:func:`find_holder`, waiting up to ``patience`` seconds for a holder that has the lock but has not yet said who
    it is: a writer takes the lock, then records itself, so a rival racing it would otherwise name only the
    PostgreSQL backend, and the same refusal would read differently depending on a few milliseconds."""
    deadline = time.monotonic() + patience
    while True:
        holder = find_holder(conn, tables, session_id, key)
        if holder is None or holder.client_pid is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.01)


def find_holder(conn: Conn, tables: Tables, session_id: str, key: int) -> Holder | None:
    """The backend holding ``key`` in this database, with the client it recorded, if it did."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    row = conn.execute(
        "SELECT l.pid, w.client_pid, w.host, to_char(w.since AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
        "FROM pg_locks l "
        f"LEFT JOIN {tables.writers} w ON w.session_id = %s AND w.backend_pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND l.classid::bigint = %s AND l.objid::bigint = %s LIMIT 1",
        (session_id, unsigned >> 32, unsigned & 0xFFFFFFFF)).fetchone()
    if row is None:
        return None
    return Holder(int(row[0]), None if row[1] is None else int(row[1]), row[2], row[3])
