"""Opening connections: one place that names them, keeps them alive and says where a log lives.

Every connection carries an ``application_name`` saying which process on which host opened it and why
(``dsh-todo writer 4242@build-7``), so ``pg_stat_activity`` tells an operator who holds what. Writer connections also
ask the server to probe an idle client (``tcp_keepalives_*``): a writer's advisory lock lives exactly as long as its
connection, so a machine that vanished without closing its socket must be noticed within a minute or so, not after
the kernel's two-hour default.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any, Final

import psycopg
from psycopg import Connection
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

Conn = Connection[TupleRow]

KEEPALIVE_IDLE_S: Final = 30
KEEPALIVE_INTERVAL_S: Final = 10
KEEPALIVE_COUNT: Final = 3
CONNECT_TIMEOUT_S: Final = 10

_NAME_BYTES: Final = 63  # NAMEDATALEN - 1: the server truncates longer application names


def host_name() -> str:
    return socket.gethostname() or "localhost"


def application_name(role: str) -> str:
    name = f"dsh-todo {role} {os.getpid()}@{host_name()}"
    return name.encode("utf-8")[:_NAME_BYTES].decode("utf-8", "ignore")


def connect(url: str, role: str, *, keepalive: bool = False) -> Conn:
    """An autocommit connection for ``role`` (``reader``, ``writer``, ``listener``...)."""
    options: dict[str, Any] = {"autocommit": True, "application_name": application_name(role)}
    params = conninfo_to_dict(url)
    if "connect_timeout" not in params:
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    if "keepalives" not in params:
        options.update(keepalives=1, keepalives_idle=KEEPALIVE_IDLE_S, keepalives_interval=KEEPALIVE_INTERVAL_S,
                       keepalives_count=KEEPALIVE_COUNT)
    conn: Conn = psycopg.connect(url, **options)
    try:
        if keepalive:
            conn.execute(f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}")
            conn.execute(f"SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}")
            conn.execute(f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}")
            # A writer sits idle between batches for as long as its agent thinks: never let the server end it.
            conn.execute("SET idle_in_transaction_session_timeout = 0")
            if conn.info.server_version >= 140000:
                conn.execute("SET idle_session_timeout = 0")
    except BaseException:
        conn.close()
        raise
    return conn


def describe(url: str) -> str:
    """Where a database is, for messages: ``postgresql://host:port/dbname`` (never the password)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql"
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    if host.startswith("/"):
        host = f"[{host}]"
    port = params.get("port") or "5432"
    dbname = params.get("dbname") or params.get("user") or ""
    return f"postgresql://{host}:{port}/{dbname}"


def cause(exc: BaseException) -> str:
    """Why a connection failed, in one line: libpq's text without the address the caller already names, nor its
    second-line hint (``connection failed: connection to server at "h", port 1 failed: Connection refused`` →
    ``Connection refused``)."""
    text = " ".join(str(exc).split("\n")[0].split())
    return re.sub(r'^connection failed: (connection to server (at|on) .*? failed: )?', "", text) or type(exc).__name__


def broken(conn: Conn | None) -> bool:
    """Whether ``conn`` can no longer be used (closed, or its socket failed)."""
    return conn is None or conn.closed or conn.broken
