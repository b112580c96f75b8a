"""The standard composition every front door boots: tools, sessions, projections, the todo tool, and (given a
root) DSH-format persistence. One place, so the CLI, the web page, MCP and ACP all run the same harness."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dsh_todo.harness import Context, boot

DEFAULT_ROOT = Path(".dsh-todo") / "sessions"


def default_root() -> Path:
    """``$DSH_TODO_ROOT`` or ``./.dsh-todo/sessions``."""
    env = os.environ.get("DSH_TODO_ROOT")
    return Path(env) if env else DEFAULT_ROOT


def default_database() -> str | None:
    """``$DSH_TODO_DATABASE_URL``: a PostgreSQL URL that replaces the JSONL root, or ``None``."""
    return os.environ.get("DSH_TODO_DATABASE_URL") or None


def composition(root: str | Path | None = None, *, allow_parallel: bool = True, compression: str = "zstd",
                invariants: bool = False, batch_delay_ms: int = 200,
                database: str | None = None) -> list[dict[str, Any]]:
    """The rows to boot. With ``database`` (a PostgreSQL URL), sessions persist there instead of under ``root``."""
    rows: list[dict[str, Any]] = [
        {"id": "tools", "name": "@deepseek-ai/dsh-tools"},
        {"id": "session", "name": "@deepseek-ai/dsh-session"},
        {"id": "projections", "name": "@deepseek-ai/dsh-session-projection"},
    ]
    if database is not None:
        rows.append({"id": "persistence", "name": "@deepseek-ai/dsh-session-persistence-postgres",
                     "config": {"url": database, "writeBatchMaxDelayMs": batch_delay_ms}})
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


def open_runtime(root: str | Path | None = None, **options: Any) -> Context:
    """Boot the standard composition; with ``root`` (or ``database=URL``), sessions are persisted there and can be
    loaded back."""
    return boot(composition(root, **options))
