"""``@deepseek-ai/dsh-session-persistence-memory``: every live session kept in this process's memory.

The worked example of a backend (decision 0042): this folder and one registration, the ``memory`` entry point of
group ``dsh_todo.backends`` in ``pyproject.toml`` (with its plugin entry beside it, for compositions written by
name). Nothing outside the folder imports it: the test helpers and the contract tests find it through
:mod:`~dsh_todo.harness.persistence.registry`, and :func:`scratch` is how the contract tests make a throwaway store.

Config: ``backend`` (the :class:`~.backend.MemoryBackend` to keep logs in; a new, empty one when absent: pass one
object to several boots to share it), ``writeBatchMaxDelayMs`` (200, as JSONL).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.persistence.memory.backend import MemoryBackend, MemoryWriter
from dsh_todo.harness.persistence.service import backend_config, install

name = "@deepseek-ai/dsh-session-persistence-memory"
inject = ["sessions"]

VARIANTS: Final[tuple[str, ...]] = ("",)
"""The configurations the contract tests run this backend in: one."""

NEEDS: Final[tuple[str, ...]] = ()
"""The test fixtures a scratch store needs (none: nothing to start, nothing to clean up)."""

__all__ = ["NEEDS", "VARIANTS", "Config", "MemoryBackend", "MemoryWriter", "apply", "inject", "name", "scratch"]


@dataclass(frozen=True, slots=True)
class Config:
    """``backend``: the :class:`MemoryBackend` to keep logs in (a new, empty one when absent; pass one object to
    several boots to share it); ``writeBatchMaxDelayMs`` as the other persistence plugins."""

    backend: MemoryBackend | None = None
    writeBatchMaxDelayMs: int = 200

    @classmethod
    def parse(cls, raw: Any) -> Config:
        raw, delay = backend_config(name, {} if raw is None else raw, keys=frozenset({"backend"}),
                                    needs="at most a 'backend'")
        backend = raw.get("backend")
        if backend is not None and not isinstance(backend, MemoryBackend):
            raise ConfigError(f"{name}: 'backend' must be a MemoryBackend, not {type(backend).__name__}")
        return cls(backend=backend, writeBatchMaxDelayMs=delay)


def apply(ctx: Context, config: Config) -> None:
    install(ctx, config.backend if config.backend is not None else MemoryBackend(), config.writeBatchMaxDelayMs)


def scratch(place: Path, fixture: Callable[[str], Any], variant: str) -> Callable[[int], dict[str, Any]]:
    """A throwaway store for a test: the persistence row's config, given a batch window. Every boot of it shares one
    :class:`MemoryBackend`, as processes share a root."""
    backend = MemoryBackend()
    return lambda batch_delay_ms: {"backend": backend, "writeBatchMaxDelayMs": batch_delay_ms}
