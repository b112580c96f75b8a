"""Session logs in PostgreSQL, for reading: the reader's backend over :class:`~dsh_todo.harness.persistence.
postgres.store.PgStore`.

Imported only when a database is named: psycopg is an optional extra, and a reader of files must not need it.
Any store with ``read(session_id)`` (``.meta``, ``.events``, ``.torn``) and ``list()`` (``.id``, ``.cwd``,
``.meta``) can stand behind :class:`StoreBackend`; the writer-liveness check is PostgreSQL's own (the session's
advisory lock), so an agent that is writing a session right now is never shown as interrupted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsh_todo.harness.persistence.header import Meta
from dsh_todo.logview.health import Refusal


@dataclass(frozen=True, slots=True)
class StoreEntry:
    """One listed session: the store's entry, with ``where`` saying where it is stored (a description)."""

    id: str
    cwd: str | None
    meta: Meta | None
    where: str
    path: None = None
    problem: Refusal | None = None


class StoreBackend:
    """The reader's view of a session store that is not a directory of files (PostgreSQL today)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"StoreBackend({self.store!r})"

    @property
    def where(self) -> str:
        return str(getattr(self.store, "location", self.store))

    def read(self, session_id: str) -> Any:
        return self.store.read(session_id)

    def list(self) -> list[StoreEntry]:
        return [StoreEntry(entry.id, entry.cwd, entry.meta, str(getattr(entry, "location", self.where)))
                for entry in self.store.list()]

    def writer_alive(self, session_id: str) -> bool:
        """Whether a writer holds the session's advisory lock now (PostgreSQL stores only)."""
        tables = getattr(self.store, "tables", None)
        if tables is None:
            return False
        from dsh_todo.harness.persistence.postgres.locking import find_holder, lock_key

        key = lock_key(tables.schema, session_id)
        holder = self.store.run(lambda conn: find_holder(conn, tables, session_id, key))
        return holder is not None

    def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()


def open_database(url: str, *, schema: str = "public") -> StoreBackend:
    """A backend reading the sessions stored in PostgreSQL at ``url`` (raises :class:`Refusal` when it cannot)."""
    try:
        from dsh_todo.harness.persistence.postgres import PgStore
    except ImportError as exc:
        raise Refusal("internal", f"reading a database needs psycopg (install dsh-todo[postgres]): {exc}") from None
    store = PgStore(url, schema=schema)
    try:
        store.open()
    except Exception as exc:
        store.close()
        raise Refusal("internal", f"cannot open the database {store.location}: {' '.join(str(exc).split())}") from None
    return StoreBackend(store)
