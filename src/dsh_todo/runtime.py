"""The standard composition every front door boots: tools, sessions, projections, the todo tool, and (given a
root) DSH-format persistence. One place, so the CLI, the web page, MCP and ACP all run the same harness."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from dsh_todo.harness.errors import StorageError as StorageError

if TYPE_CHECKING:
    from dsh_todo.harness import Context

DEFAULT_ROOT = Path(".dsh-todo") / "sessions"

Compression = Literal["zstd", "none"]


def default_root() -> Path:
    """``$DSH_TODO_ROOT`` or ``./.dsh-todo/sessions``."""
    env = os.environ.get("DSH_TODO_ROOT")
    return Path(env) if env else DEFAULT_ROOT


def default_database() -> str | None:
    """``$DSH_TODO_DATABASE_URL``: a PostgreSQL URL that replaces the JSONL root, or ``None``."""
    return os.environ.get("DSH_TODO_DATABASE_URL") or None




class Storage(NamedTuple):
    """Where a front door keeps sessions: a JSONL ``root`` (new logs in ``compression``) or a PostgreSQL
    ``database``. Every command resolves it the same way (:meth:`resolve`), so ``dsh-todo plan`` reads where
    ``dsh-todo run`` wrote. A named tuple: a reading command resolves one without booting anything, so this module
    stays cheap to import (the loader and its plugin discovery load only in :func:`open_runtime`)."""

    root: Path | None = None
    database: str | None = None
    compression: Compression = "zstd"
    schema: str = "public"
    """The PostgreSQL schema holding the tables (a database only)."""

    @classmethod
    def resolve(cls, root: str | Path | None = None, database: str | None = None,
                compression: Compression | None = None, schema: str = "public") -> Storage:
        """An explicit ``root`` or ``database`` wins over the environment; with neither,
        ``$DSH_TODO_DATABASE_URL`` if set, else ``$DSH_TODO_ROOT``, else ``./.dsh-todo/sessions``."""
        if root is not None and database is not None:
            raise StorageError("choose one of --root and --database")
        if database is None and root is None:
            database = default_database()
        if database is not None:
            if compression is not None:
                raise StorageError("--compression is for JSONL roots; a database stores events as text")
            from dsh_todo.extras import require

            require("postgres")  # named here, once, rather than as a reader's refusal or a boot error
            return cls(database=database, schema=schema)
        where = Path(root) if root is not None else default_root()
        if where.exists() and not where.is_dir():  # refused here, in one line, not deep inside the boot
            raise StorageError(f"the session root {where} is not a directory")
        return cls(root=where, compression=compression or "zstd")

    def describe(self) -> str:
        """Where, for people (never a database password)."""
        if self.database is not None:
            from dsh_todo.harness.persistence.postgres.connection import describe

            return f"sessions in {describe(self.database)}"
        return f"sessions under {os.path.abspath(self.root or DEFAULT_ROOT)}"

    def options(self) -> dict[str, Any]:
        """The :func:`composition` keywords that persist here."""
        return {"database": self.database, "compression": self.compression, "schema": self.schema}


def composition(root: str | Path | None = None, *, allow_parallel: bool = True, compression: str = "zstd",
                invariants: bool = False, batch_delay_ms: int = 200,
                database: str | None = None, schema: str = "public") -> list[dict[str, Any]]:
    """The rows to boot. With ``database`` (a PostgreSQL URL), sessions persist there instead of under ``root``."""
    rows: list[dict[str, Any]] = [
        {"id": "tools", "name": "@deepseek-ai/dsh-tools"},
        {"id": "session", "name": "@deepseek-ai/dsh-session"},
        {"id": "projections", "name": "@deepseek-ai/dsh-session-projection"},
    ]
    if database is not None:
        config: dict[str, Any] = {"url": database, "writeBatchMaxDelayMs": batch_delay_ms}
        if schema != "public":
            config["schema"] = schema
        rows.append({"id": "persistence", "name": "@deepseek-ai/dsh-session-persistence-postgres",
                     "config": config})
    elif root is not None:
        rows.append({"id": "persistence", "name": "@deepseek-ai/dsh-session-persistence-jsonl",
                     "config": {"root": str(root), "compression": compression,
                                "writeBatchMaxDelayMs": batch_delay_ms}})
    if invariants:
        rows += [{"id": "invariants", "name": "@deepseek-ai/dsh-invariants", "config": {}},
                 {"id": "session-invariant", "name": "@deepseek-ai/dsh-session/invariant"}]
    rows.append({"id": "tool-todo", "name": "@deepseek-ai/dsh-tool-todo",
                 "config": {"allowParallelInProgress": allow_parallel}})
    if invariants:
        rows.append({"id": "tool-todo-invariant", "name": "@deepseek-ai/dsh-tool-todo/invariant"})
    if database is not None or root is not None:
        # Projection checkpoints, in whichever backend persists. Mounted after persistence (it injects it) and last,
        # so that disposal, which runs in reverse, writes the final checkpoints while every projection unit is
        # registered.
        rows.append({"id": "projection-cache", "name": "@deepseek-ai/dsh-session-projection-cache"})
    return rows


STANDARD_PLUGINS: dict[str, str] = {
    "@deepseek-ai/dsh-tools": "dsh_todo.harness.tools",
    "@deepseek-ai/dsh-session": "dsh_todo.harness.session",
    "@deepseek-ai/dsh-session/invariant": "dsh_todo.harness.session_invariant",
    "@deepseek-ai/dsh-session-projection": "dsh_todo.harness.projections",
    "@deepseek-ai/dsh-session-persistence-jsonl": "dsh_todo.harness.persistence.jsonl",
    "@deepseek-ai/dsh-session-projection-cache": "dsh_todo.harness.persistence.checkpoints",
    "@deepseek-ai/dsh-session-persistence-postgres": "dsh_todo.harness.persistence.postgres",
    "@deepseek-ai/dsh-invariants": "dsh_todo.harness.invariants",
    "@deepseek-ai/dsh-tool-todo": "dsh_todo.tool_todo",
    "@deepseek-ai/dsh-tool-todo/invariant": "dsh_todo.tool_todo.invariant",
    "@deepseek-ai/dsh-session-telemetry": "dsh_todo.harness.telemetry",
    "@deepseek-ai/dsh-session-telemetry-otel": "dsh_todo.harness.telemetry.otel",
}
"""Our own plugins' modules by package name: the entry points pyproject.toml declares (a test holds them equal),
imported directly, since looking a name up among the entry points reads every installed distribution's metadata
(some 30 ms of a front door's start, paid before its first answer)."""


def open_runtime(root: str | Path | None = None, **options: Any) -> Context:
    """Boot the standard composition; with ``root`` (or ``database=URL``), sessions are persisted there and can be
    loaded back."""
    import importlib

    from dsh_todo.harness.loader import boot

    rows = composition(root, **options)
    return boot([{**row, "plugin": importlib.import_module(STANDARD_PLUGINS[row["name"]])} for row in rows])


def open_storage(storage: Storage, **options: Any) -> Context:
    """Boot the standard composition persisting to ``storage``."""
    return open_runtime(storage.root, **storage.options(), **options)
