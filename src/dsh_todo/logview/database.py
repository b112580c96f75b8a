"""Session logs in PostgreSQL, for reading: the PostgreSQL backend itself, opened on demand.

Imported only when a database is named: psycopg is an optional extra, and a reader of files must not need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_todo.logview.health import Refusal

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.postgres import PgBackend


def open_database(url: str, *, schema: str = "public") -> PgBackend:
    """The backend of the sessions stored in PostgreSQL at ``url`` (raises :class:`Refusal` when it cannot)."""
    try:
        from dsh_todo.harness.persistence.postgres import PgBackend
    except ImportError as exc:
        raise Refusal("internal", f"reading a database needs psycopg (install dsh-todo[postgres]): {exc}") from None
    store = PgBackend(url, schema=schema)
    try:
        store.open()
    except Exception as exc:
        store.close()
        raise Refusal("internal", f"cannot open the database {store.location}: {' '.join(str(exc).split())}") from None
    return store
