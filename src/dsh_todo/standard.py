"""The standard composition every front door boots: tools, sessions, projections, the todo tool, and (given a
root or a database) DSH-format persistence. One place, so the CLI, the web page, MCP and ACP all run the same
harness.

Built from the plugin modules themselves, imported here (:data:`PLUGINS`), not from package names looked up at run
time: the writing half of a front door's setup, beside :mod:`dsh_todo.runtime` (the storage and the telemetry
choice), which a reading command imports alone. The loader's names (entry points, dotted paths) stay for
compositions people write.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import dsh_todo.harness.invariants as invariant_registry
import dsh_todo.harness.persistence.checkpoints as checkpoints
import dsh_todo.harness.persistence.jsonl.plugin as jsonl
import dsh_todo.harness.projections as projections
import dsh_todo.harness.session as session
import dsh_todo.harness.session_invariant as session_invariant
import dsh_todo.harness.telemetry as telemetry_seam
import dsh_todo.harness.telemetry.otel as otel
import dsh_todo.harness.tools as tools
import dsh_todo.tool_todo as tool_todo
import dsh_todo.tool_todo.invariant as todo_invariant
from dsh_todo.harness.loader import boot, resolve
from dsh_todo.harness.otlp import SHARING, endpoint, spans_endpoint
from dsh_todo.harness.telemetry.service import SESSION_TELEMETRY, SHARES
from dsh_todo.runtime import Storage, Telemetry

if TYPE_CHECKING:
    from dsh_todo.harness.context import Context

__all__ = ["PLUGINS", "composition", "open_runtime", "open_storage", "plugin_of", "telemetry_disclosure"]


def telemetry_disclosure(ctx: Context) -> str | None:
    """The one line a front door prints once it has booted: what leaves the machine and where, from the mounted
    backend's own disclosure (``session_telemetry.sharing``, worded by the seam's :data:`SHARES`); ``None`` when no
    telemetry is mounted or it shares nothing, so a default run says nothing it did not say before."""
    seam = ctx.get(SESSION_TELEMETRY)
    sharing = seam.sharing if seam is not None else None
    if sharing is None or sharing == "disabled":
        return None
    logs = endpoint("logs")
    line = f"telemetry {sharing}: {SHARES[sharing]}, as OpenTelemetry logs to {logs[0] if logs else '?'}"
    traces = spans_endpoint() if sharing == "full" else None
    if traces is not None:
        line += f", and its turns, model requests and tool calls as spans to {traces}"
    return line


def composition(root: str | Path | None = None, *, allow_parallel: bool = True, compression: str | None = None,
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
        jsonl: dict[str, Any] = {"root": str(root), "writeBatchMaxDelayMs": batch_delay_ms}
        if compression is not None:  # else new logs take the root's encoding (zstd in a root without logs)
            jsonl["compression"] = compression
        rows.append({"id": "persistence", "name": "@deepseek-ai/dsh-session-persistence-jsonl", "config": jsonl})
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
        mode = next(mode for mode, sharing in SHARING.items() if sharing == telemetry)
        rows += [{"id": "telemetry", "name": "@deepseek-ai/dsh-session-telemetry"},
                 {"id": "telemetry-otel", "name": "@deepseek-ai/dsh-session-telemetry-otel", "config": {"mode": mode}}]
    if database is not None or root is not None:
        # Projection checkpoints, in whichever backend persists. Mounted after persistence (it injects it) and last,
        # so that disposal, which runs in reverse, writes the final checkpoints while every projection unit is
        # registered.
        rows.append({"id": "projection-cache", "name": "@deepseek-ai/dsh-session-projection-cache"})
    return rows


PLUGINS: Final[dict[str, object]] = {
    "@deepseek-ai/dsh-tools": tools,
    "@deepseek-ai/dsh-session": session,
    "@deepseek-ai/dsh-session/invariant": session_invariant,
    "@deepseek-ai/dsh-session-projection": projections,
    "@deepseek-ai/dsh-session-persistence-jsonl": jsonl,
    "@deepseek-ai/dsh-session-projection-cache": checkpoints,
    "@deepseek-ai/dsh-invariants": invariant_registry,
    "@deepseek-ai/dsh-tool-todo": tool_todo,
    "@deepseek-ai/dsh-tool-todo/invariant": todo_invariant,
    "@deepseek-ai/dsh-session-telemetry": telemetry_seam,
    "@deepseek-ai/dsh-session-telemetry-otel": otel,
}
"""The standard composition's plugins by package name, as imported modules: go-to-definition follows a row to its
plugin, and no name is looked up among the entry points (reading every installed distribution's metadata costs some
30 ms of a front door's start, paid before its first answer). The entry points ``pyproject.toml`` declares name the
same modules (a test holds them equal), for compositions written by people (:func:`dsh_todo.harness.loader.boot`
with a YAML file or rows of names). PostgreSQL persistence is :func:`plugin_of`'s: its module imports psycopg; so is
any other registered backend (memory, for tests), found by its entry point."""

POSTGRES: Final = "@deepseek-ai/dsh-session-persistence-postgres"


def plugin_of(name: str) -> object:
    """The plugin of a standard row: :data:`PLUGINS`, or the PostgreSQL backend, imported here, where a database was
    chosen, because it imports psycopg (the ``postgres`` extra); any other plugin by its entry point."""
    if name == POSTGRES:
        from dsh_todo.harness.persistence import postgres

        return postgres
    return PLUGINS[name] if name in PLUGINS else resolve(name)


def open_runtime(root: str | Path | None = None, **options: Any) -> Context:
    """Boot the standard composition; with ``root`` (or ``database=URL``), sessions are persisted there and can be
    loaded back."""
    return boot([{**row, "plugin": plugin_of(row["name"])} for row in composition(root, **options)])


def open_storage(storage: Storage, **options: Any) -> Context:
    """Boot the standard composition persisting to ``storage``: what every front door boots, so this is where each
    says, once, on stderr, what its telemetry shares (:func:`telemetry_disclosure`)."""
    ctx = open_runtime(storage.root, **storage.options(), **options)
    line = telemetry_disclosure(ctx)
    if line is not None:
        print(line, file=sys.stderr, flush=True)
    return ctx
