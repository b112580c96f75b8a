"""``@deepseek-ai/dsh-session-persistence-jsonl``: every live session written to DSH's JSONL layout.

Mount it next to ``@deepseek-ai/dsh-session`` and every session the ``sessions`` service creates is persisted in
DSH's on-disk layout under ``root`` (:class:`~.backend.JsonlBackend`), through the one ``session_persistence`` service
(:mod:`.service`). New logs use ``compression``; stored logs are read in whichever encoding each file has.

Config (DSH's names): ``root`` (required), ``compression`` (``"zstd"`` by default, or ``"none"``),
``writeBatchMaxDelayMs`` (200), ``packChunks`` (true).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.paths import Compression
from dsh_todo.harness.persistence.service import backend_config, install, text_field

__all__ = ["NEEDS", "VARIANTS", "Config", "apply", "inject", "name", "scratch"]

name = "@deepseek-ai/dsh-session-persistence-jsonl"
inject = ["sessions"]

_KEYS: Final = frozenset({"root", "compression", "packChunks", "preparedSessionCacheSize"})
"""``preparedSessionCacheSize`` is DSH's too, accepted and ignored (this backend keeps no prepared sessions)."""

VARIANTS: Final[tuple[str, ...]] = ("none", "zstd")
"""The configurations the contract tests run this backend in: each encoding (:mod:`..registry`)."""

NEEDS: Final[tuple[str, ...]] = ()
"""The test fixtures a scratch store needs: none (a root in the test's own directory)."""


@dataclass(frozen=True, slots=True)
class Config:
    root: str
    compression: Compression | None = None
    """``None``: new logs take the root's encoding (zstd in a root without logs)."""
    writeBatchMaxDelayMs: int = 200  # DSH's config key names, kept verbatim
    packChunks: bool = True

    @classmethod
    def parse(cls, raw: Any) -> Config:
        raw, delay = backend_config(name, raw, keys=_KEYS, needs="a 'root' directory")
        root = text_field(name, raw, "root", "path string")
        compression = raw.get("compression")
        if compression not in ("zstd", "none", None):
            raise ConfigError(f"{name}: 'compression' must be \"zstd\" or \"none\", not {compression!r}")
        pack = raw.get("packChunks", True)
        if type(pack) is not bool:
            raise ConfigError(f"{name}: 'packChunks' must be true or false")
        return cls(root=root, compression=compression, writeBatchMaxDelayMs=delay, packChunks=pack)


def apply(ctx: Context, config: Config) -> None:
    backend = JsonlBackend(config.root, config.compression, pack_chunks=config.packChunks)
    install(ctx, backend, config.writeBatchMaxDelayMs)


def scratch(place: Path, fixture: Callable[[str], Any], variant: str) -> Callable[[int], dict[str, Any]]:
    """A throwaway store for a test: a root under ``place`` whose new logs are in ``variant``'s encoding."""
    return lambda batch_delay_ms: {"root": str(place / "root"), "compression": variant,
                                   "writeBatchMaxDelayMs": batch_delay_ms}
