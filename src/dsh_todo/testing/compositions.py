"""The standard runtime as a test boots it: in memory, persisted in memory, or persisted in one PostgreSQL schema.

All are the rows every front door boots (:func:`dsh_todo.standard.composition`), so a test sees the tool, its
validation, the ``todos`` projection and (when persisted) the persistence plugins exactly as a deployment does. In
memory there is no directory to clean up; on a database, a schema per test keeps tests apart on one server.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dsh_todo.harness.context import Context
from dsh_todo.harness.loader import boot
from dsh_todo.harness.persistence.contract import LogBackend
from dsh_todo.harness.persistence.registry import backend_plugin
from dsh_todo.standard import composition

__all__ = ["backend_composition", "database_composition", "memory_composition", "memory_context",
           "memory_log_composition"]

_POSTGRES = "@deepseek-ai/dsh-session-persistence-postgres"
_JSONL = "@deepseek-ai/dsh-session-persistence-jsonl"


def memory_composition(*, allow_parallel: bool = True, invariants: bool = False) -> list[dict[str, Any]]:
    """The standard composition's rows with nothing persisted; ``invariants`` adds the invariant companions."""
    return composition(None, allow_parallel=allow_parallel, invariants=invariants)


@contextmanager
def memory_context(*, allow_parallel: bool = True, invariants: bool = False) -> Iterator[Context]:
    """Boot :func:`memory_composition` and dispose it on exit (every plugin's registrations are taken back)."""
    ctx = boot(memory_composition(allow_parallel=allow_parallel, invariants=invariants))
    try:
        yield ctx
    finally:
        ctx.dispose()


def memory_log_composition(backend: LogBackend | None = None, *, batch_delay_ms: int = 200,
                           allow_parallel: bool = True) -> list[dict[str, Any]]:
    """The standard composition persisted, with its logs kept in memory, in ``backend`` (the ``memory`` backend's
    own, a new one when ``None``): write-behind, loading back, recovery and checkpoints as on a root, with nothing on
    disk. Boot these rows twice with one backend and the two contexts share its logs and its writer locks, as two
    processes share a root."""
    config: dict[str, Any] = {"writeBatchMaxDelayMs": batch_delay_ms}
    if backend is not None:
        config["backend"] = backend
    return backend_composition("memory", config, allow_parallel=allow_parallel)


def backend_composition(backend: str, config: dict[str, Any], *,
                        allow_parallel: bool = True) -> list[dict[str, Any]]:
    """The standard composition persisted through the backend registered as ``backend``
    (:mod:`~dsh_todo.harness.persistence.registry`) with its plugin's ``config``: the JSONL rows with the persistence
    row's plugin swapped, so every other row and its place stay the standard composition's."""
    rows = composition(".", allow_parallel=allow_parallel)
    plugin = backend_plugin(backend)
    persistence = next(row for row in rows if row["name"] == _JSONL)
    persistence["name"] = plugin.name
    persistence["config"] = config
    return rows


def database_composition(url: str, *, schema: str = "public", batch_delay_ms: int = 200, poll_ms: int = 5000,
                         allow_parallel: bool = True) -> list[dict[str, Any]]:
    """The standard composition persisted to PostgreSQL at ``url`` in ``schema`` (its tables appear on first use).

    ``batch_delay_ms`` is the write-behind window and ``poll_ms`` the followers' safety poll behind ``NOTIFY``;
    tests shorten both to keep cross-process tests quick.
    """
    rows = composition(None, allow_parallel=allow_parallel, database=url)
    persistence = next(row for row in rows if row["name"] == _POSTGRES)
    persistence["config"] = {"url": url, "schema": schema, "writeBatchMaxDelayMs": batch_delay_ms,
                             "pollIntervalMs": poll_ms}
    return rows
