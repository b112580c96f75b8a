"""Session logs in PostgreSQL, for reading: the PostgreSQL backend itself, opened on demand.

Imported only when a database is named: psycopg is an optional extra, and a reader of files must not need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_todo.harness.errors import DshTodoError
from dsh_todo.logview.health import Refusal

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.postgres import PgBackend


def open_database(url: str, *, schema: str = "public") -> PgBackend:
    """The backend of the sessions stored in PostgreSQL at ``url`` (raises :class:`Refusal` when it cannot)."""
    try:
        from dsh_todo.harness.persistence.postgres import PgBackend
    except ImportError as exc:
        raise Refusal("internal", f"reading a database needs psycopg (install dsh-todo[postgres]): {exc}") from None
    backend = PgBackend(url, schema=schema)
    try:
        backend.open()
    except DshTodoError as exc:  # unreachable (DatabaseUnavailableError), or tables of a newer format
        raise Refusal("internal", str(exc)) from None
    return backend
