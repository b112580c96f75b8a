"""Where sessions live and what they share, as every command resolves it: the :class:`Storage` (a JSONL root or a
PostgreSQL database) and the ``--telemetry`` choice, checked before anything boots.

The reading half of the front doors' setup: ``dsh-todo plan`` resolves its storage here, so this module imports no
plugin, no live harness and no SDK. The writing half, the standard composition a front door boots on that storage,
is :mod:`dsh_todo.standard`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

from dsh_todo.extras import require
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.errors import StorageError as StorageError
from dsh_todo.harness.otlp import endpoint
from dsh_todo.quoting import safe

DEFAULT_ROOT = Path(".dsh-todo") / "sessions"

Compression = Literal["zstd", "none"]

Telemetry = Literal["full", "feedback-only", "disabled"]
"""What a front door's sessions share with an OpenTelemetry collector: the seam's sharing statuses
(:data:`dsh_todo.harness.telemetry.Sharing`), spelled as ``--telemetry`` takes them."""
TELEMETRY: Final[tuple[Telemetry, ...]] = ("full", "feedback-only", "disabled")
TELEMETRY_VARIABLE: Final = "DSH_TODO_TELEMETRY"


def default_root() -> Path:
    """``$DSH_TODO_ROOT`` or ``./.dsh-todo/sessions``."""
    env = os.environ.get("DSH_TODO_ROOT")
    return Path(env) if env else DEFAULT_ROOT


def default_database() -> str | None:
    """``$DSH_TODO_DATABASE_URL``: a PostgreSQL URL that replaces the JSONL root, or ``None``."""
    return os.environ.get("DSH_TODO_DATABASE_URL") or None


def resolve_telemetry(chosen: str | None = None) -> Telemetry:
    """``chosen`` (``--telemetry``), else ``$DSH_TODO_TELEMETRY``, else ``disabled`` (DSH's default), checked before
    anything boots so that each mistake is one line and exit 2, not a boot error: an unknown word, the ``otel`` extra
    missing, no collector named by ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` (the
    backend has no default collector: a forgotten endpoint must not post sessions to whatever listens on
    localhost). In ``disabled`` nothing is imported and no variable is read."""
    source = "--telemetry"
    if chosen is None:
        chosen, source = os.environ.get(TELEMETRY_VARIABLE) or "disabled", TELEMETRY_VARIABLE
    if chosen not in TELEMETRY:
        raise ConfigError(f"{source} must be full, feedback-only or disabled, not {chosen!r}")
    telemetry = chosen
    if telemetry == "disabled":
        return telemetry
    require("otel")
    if endpoint("logs") is None:
        raise ConfigError(f"telemetry {telemetry} needs a collector: set OTEL_EXPORTER_OTLP_ENDPOINT (or "
                          "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) to its OTLP/HTTP URL")
    return telemetry


class Storage(NamedTuple):
    """Where a front door keeps sessions: a JSONL ``root`` (new logs in ``compression``) or a PostgreSQL
    ``database``. Every command resolves it the same way (:meth:`resolve`), so ``dsh-todo plan`` reads where
    ``dsh-todo run`` wrote. A named tuple: a reading command resolves one without booting anything, so this module
    stays cheap to import (the plugins, the loader and the live harness are :mod:`dsh_todo.standard`'s)."""

    root: Path | None = None
    database: str | None = None
    compression: Compression | None = None
    """``None``: new logs take the root's encoding (zstd in a root without logs)."""
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
            require("postgres")  # named here, once, rather than as a reader's refusal or a boot error
            return cls(database=database, schema=schema)
        where = Path(root) if root is not None else default_root()
        if where.exists() and not where.is_dir():  # refused here, in one line, not deep inside the boot
            raise StorageError(f"the session root {where} is not a directory")
        return cls(root=where, compression=compression)

    def describe(self) -> str:
        """Where, for people, on one line (never a database password; a root's controls escaped)."""
        if self.database is not None:
            from dsh_todo.harness.persistence.postgres.connection import describe

            return f"sessions in {safe(describe(self.database))}"
        return f"sessions under {safe(os.path.abspath(self.root or DEFAULT_ROOT))}"

    def options(self) -> dict[str, Any]:
        """The :func:`~dsh_todo.standard.composition` keywords that persist here."""
        return {"database": self.database, "compression": self.compression, "schema": self.schema}
