"""The standard composition every front door boots: tools, sessions, projections, the todo tool, and (given a
root) DSH-format persistence. One place, so the CLI, the web page, MCP and ACP all run the same harness."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.errors import StorageError as StorageError

if TYPE_CHECKING:
    from dsh_todo.harness import Context

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
    from dsh_todo.extras import require

    require("otel")
    from dsh_todo.harness.telemetry.otel import endpoint

    if endpoint("logs") is None:
        raise ConfigError(f"telemetry {telemetry} needs a collector: set OTEL_EXPORTER_OTLP_ENDPOINT (or "
                          "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) to its OTLP/HTTP URL")
    return telemetry


def telemetry_disclosure(ctx: Context) -> str | None:
    """The one line a front door prints once it has booted: what leaves the machine and where, from the mounted
    backend's own disclosure (``session_telemetry.sharing``, worded by the seam's :data:`SHARES`); ``None`` when no
    telemetry is mounted or it shares nothing, so a default run says nothing it did not say before."""
    seam = ctx.get("session_telemetry")
    sharing = seam.sharing if seam is not None else None
    if sharing is None or sharing == "disabled":
        return None
    from dsh_todo.harness.telemetry.otel import endpoint, spans_endpoint
    from dsh_todo.harness.telemetry.service import SHARES

    logs = endpoint("logs")
    line = f"telemetry {sharing}: {SHARES[sharing]}, as OpenTelemetry logs to {logs[0] if logs else '?'}"
    traces = spans_endpoint() if sharing == "full" else None
    if traces is not None:
        line += f", and its turns, model requests and tool calls as spans to {traces}"
    return line




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
                database: str | None = None, schema: str = "public",
                telemetry: Telemetry = "disabled") -> list[dict[str, Any]]:
    """The rows to boot. With ``database`` (a PostgreSQL URL), sessions persist there instead of under ``root``.
    With ``telemetry`` other than ``disabled``, the telemetry seam and its OTel backend in that mode (its endpoint
    and every exporter setting from the ``OTEL_*`` variables); ``disabled`` mounts neither, so the standard
    composition pays nothing for telemetry it does not use."""
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
    if telemetry != "disabled":
        # After the tool's rows: disposal runs in reverse, so the backend's shutdown records leave while every
        # session is still open, before persistence closes them.
        from dsh_todo.harness.telemetry.otel import SHARING

        mode = next(mode for mode, sharing in SHARING.items() if sharing == telemetry)
        rows += [{"id": "telemetry", "name": "@deepseek-ai/dsh-session-telemetry"},
                 {"id": "telemetry-otel", "name": "@deepseek-ai/dsh-session-telemetry-otel", "config": {"mode": mode}}]
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
    "@deepseek-ai/dsh-session-persistence-jsonl": "dsh_todo.harness.persistence.jsonl.plugin",
    "@deepseek-ai/dsh-session-projection-cache": "dsh_todo.harness.persistence.checkpoints",
    "@deepseek-ai/dsh-session-persistence-postgres": "dsh_todo.harness.persistence.postgres",
    "@deepseek-ai/dsh-session-persistence-memory": "dsh_todo.harness.persistence.memory",
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
    """Boot the standard composition persisting to ``storage``: what every front door boots, so this is where each
    says, once, on stderr, what its telemetry shares (:func:`telemetry_disclosure`)."""
    ctx = open_runtime(storage.root, **storage.options(), **options)
    line = telemetry_disclosure(ctx)
    if line is not None:
        print(line, file=sys.stderr, flush=True)
    return ctx
