"""The tables: what a session log looks like in PostgreSQL (each table's columns: ``README.md`` beside this file;
why exact ``text`` rows and a ``batch`` column: decision 0003), and how they come to exist.

Every table lives in one PostgreSQL schema (``public`` unless configured), so several independent stores can share a
database, and carries the ``dsh_todo_`` prefix, so they can share a schema with an application's own tables.
``dsh_todo_schema`` holds the layout's version, so a newer layout is refused with "upgrade", never misread.

The tables are created on first use, under a transaction-scoped advisory lock so that two processes starting at
once do not race their ``CREATE TABLE IF NOT EXISTS``. A role without ``CREATE`` can still use tables an
administrator created.
"""

from __future__ import annotations

import re
from typing import Final

from psycopg import Connection
from psycopg.rows import TupleRow

from dsh_todo.harness.errors import StorageError
from dsh_todo.harness.persistence.errors import SessionFormatUnsupportedError

SCHEMA_VERSION: Final = 1
CHANNEL: Final = "dsh_todo_events"
"""The ``NOTIFY`` channel of the ``public`` schema; another schema ``s`` uses ``dsh_todo_events_s``."""

SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,39}")

# A fixed advisory key serializing table creation (the ASCII of "dshtodo" plus a schema-independent tag).
_DDL_LOCK_KEY: Final = 0x647368746F646F01


def check_schema_name(schema: str) -> str:
    """Schema names are plain lower-case identifiers, so they can be spliced into SQL and channel names (a
    :class:`~dsh_todo.harness.errors.StorageError`, still a ``ValueError``: the setup names an unusable schema)."""
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise StorageError(f"PostgreSQL schema name must match [a-z_][a-z0-9_]{{0,39}}, not {schema!r}")
    return schema


class Tables:
    """The qualified table names (and the notify channel) of one schema, ready to splice into SQL."""

    __slots__ = ("channel", "checkpoints", "events", "meta", "schema", "sessions", "writers")

    def __init__(self, schema: str = "public") -> None:
        self.schema = check_schema_name(schema)
        quoted = f'"{schema}"'
        self.sessions = f"{quoted}.dsh_todo_sessions"
        self.events = f"{quoted}.dsh_todo_events"
        self.writers = f"{quoted}.dsh_todo_writers"
        self.checkpoints = f"{quoted}.dsh_todo_checkpoints"
        self.meta = f"{quoted}.dsh_todo_schema"
        self.channel = CHANNEL if schema == "public" else f"{CHANNEL}_{schema}"

    def ddl(self) -> list[str]:
        return [
            f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"',
            f"CREATE TABLE IF NOT EXISTS {self.meta} (version integer NOT NULL)",
            f"""CREATE TABLE IF NOT EXISTS {self.sessions} (
                id               text PRIMARY KEY,
                header           text NOT NULL,
                version          integer NOT NULL,
                created_at       bigint NOT NULL,
                cwd              text,
                parent_session   text,
                seed_length      bigint,
                origin           text,
                delegation_depth bigint NOT NULL,
                agent_preset     text,
                next_seq         bigint NOT NULL,
                updated_at       timestamptz NOT NULL DEFAULT now())""",
            f"""CREATE TABLE IF NOT EXISTS {self.events} (
                session_id text   NOT NULL REFERENCES {self.sessions} (id) ON DELETE CASCADE,
                seq        bigint NOT NULL,
                batch      bigint NOT NULL,
                type       text   NOT NULL,
                event      text   NOT NULL,
                PRIMARY KEY (session_id, seq))""",
            f"""CREATE TABLE IF NOT EXISTS {self.writers} (
                session_id  text PRIMARY KEY,
                backend_pid integer NOT NULL,
                client_pid  integer NOT NULL,
                host        text NOT NULL,
                since       timestamptz NOT NULL DEFAULT now())""",
            f"""CREATE TABLE IF NOT EXISTS {self.checkpoints} (
                session_id text   PRIMARY KEY REFERENCES {self.sessions} (id) ON DELETE CASCADE,
                as_of_seq  bigint NOT NULL,
                record     text   NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now())""",
        ]


def _stored_version(conn: Connection[TupleRow], tables: Tables) -> int | None:
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (tables.meta,)).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(f"SELECT max(version) FROM {tables.meta}").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def ensure_schema(conn: Connection[TupleRow], tables: Tables) -> None:
    """Create the tables if missing; refuse a layout from a newer harness. ``conn`` must be in autocommit mode."""
    version = _stored_version(conn, tables)
    if version is None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_KEY,))
            version = _stored_version(conn, tables)  # another process may have created them while we waited
            if version is None:
                for statement in tables.ddl():
                    conn.execute(statement)  # a validated identifier, never user text
                conn.execute(f"INSERT INTO {tables.meta} (version) VALUES (%s)", (SCHEMA_VERSION,))
                return
    if version > SCHEMA_VERSION:
        raise SessionFormatUnsupportedError(
            f'the dsh-todo tables in schema "{tables.schema}" use layout v{version}, but this harness reads only '
            f"v{SCHEMA_VERSION}: they were created by a newer harness — upgrade the harness to open them")
