"""``@deepseek-ai/dsh-session-persistence-jsonl``: every live session written to DSH's JSONL layout.

Mount it next to ``@deepseek-ai/dsh-session`` and every session the ``sessions`` service creates is persisted: its
writer lock is taken when the session opens, its events are queued by a post-commit listener and written in
batches, and the log file appears with the first batch. ``ctx.session_persistence.load(id)`` reads a stored log,
commits crash recovery, and adopts the restored session into ``ctx.sessions``, where it keeps being persisted.
Disposing the plugin flushes every queue and releases every lock.

Config (DSH's names): ``root`` (required), ``compression`` (``"zstd"`` by default, or ``"none"``),
``writeBatchMaxDelayMs`` (200), ``packChunks`` (true).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dsh_todo.harness.context import Context, Disposer
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.persistence.batching import WriteBehind, WrittenListener
from dsh_todo.harness.persistence.header import session_header_fields
from dsh_todo.harness.persistence.paths import Compression
from dsh_todo.harness.persistence.scan import paused_gc
from dsh_todo.harness.persistence.store import JsonlStore, StoredLog, StoredSession
from dsh_todo.harness.persistence.wiring import install
from dsh_todo.harness.session import Event, Session, SessionStore, now_ms

log = logging.getLogger("dsh_todo.persistence")

name = "@deepseek-ai/dsh-session-persistence-jsonl"
inject = ["sessions"]

MAX_BATCH_DELAY_MS: Final = 2**31 - 1
"""Node's largest timer delay, DSH's upper bound for the batch window."""

_IGNORED_DSH_KEYS: Final = frozenset({"preparedSessionCacheSize"})


@dataclass(frozen=True, slots=True)
class Config:
    root: str
    compression: Compression = "zstd"
    writeBatchMaxDelayMs: int = 200  # DSH's config key names, kept verbatim
    packChunks: bool = True

    @classmethod
    def parse(cls, raw: Any) -> Config:
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{name} needs a config with a 'root' directory")
        unknown = set(raw) - {"root", "compression", "writeBatchMaxDelayMs", "packChunks"} - _IGNORED_DSH_KEYS
        if unknown:
            raise ConfigError(f"{name}: unknown config keys {sorted(unknown)}")
        root = raw.get("root")
        if not isinstance(root, str) or not root:
            raise ConfigError(f"{name}: 'root' must be a non-empty path string")
        compression = raw.get("compression", "zstd")
        if compression not in ("zstd", "none"):
            raise ConfigError(f"{name}: 'compression' must be \"zstd\" or \"none\", not {compression!r}")
        delay = raw.get("writeBatchMaxDelayMs", 200)
        if type(delay) is not int or not 1 <= delay <= MAX_BATCH_DELAY_MS:
            raise ConfigError(f"{name}: 'writeBatchMaxDelayMs' must be an integer between 1 and {MAX_BATCH_DELAY_MS}")
        pack = raw.get("packChunks", True)
        if type(pack) is not bool:
            raise ConfigError(f"{name}: 'packChunks' must be true or false")
        return cls(root=root, compression=compression, writeBatchMaxDelayMs=delay, packChunks=pack)


class JsonlPersistence:
    """The ``session_persistence`` service: persists live sessions and loads stored ones back into ``sessions``."""

    def __init__(self, sessions: SessionStore, store: JsonlStore, *, batch_delay_ms: int = 200) -> None:
        self.sessions = sessions
        self.store = store
        self._writes = WriteBehind(batch_delay_ms)
        self._live: dict[str, Session] = {}
        self._resuming: set[str] = set()
        self._closed = False

    # -- service API ----------------------------------------------------------------------------------------

    def load(self, session_id: str) -> Session:
        """The live session ``session_id``, or the stored one restored (recovery committed) and made live."""
        live = self.sessions.get(session_id)
        if live is not None:
            return live
        self._require_open()
        loaded, writer = self.store.resume(session_id)
        session = Session(session_id, header=session_header_fields(loaded.meta))
        try:
            with paused_gc():  # restoring freezes every event: millions of acyclic containers
                session.restore(loaded.events)
            self._writes.open(writer)
        except BaseException:
            writer.close()
            raise
        self._resuming.add(session_id)
        try:
            self.sessions.adopt(session)
        except BaseException:
            self._live.pop(session_id, None)
            self._writes.release(session_id)
            raise
        finally:
            self._resuming.discard(session_id)
        self._writes.announce(session_id)
        return session

    def read(self, session_id: str) -> StoredLog:
        """A stored log without loading it (no lock, no repair)."""
        return self.store.read(session_id)

    def list(self) -> list[StoredSession]:
        return self.store.list()

    def flush(self, session_id: str | None = None) -> None:
        """Make everything queued durable now; also lets go of sessions that were closed in the meantime."""
        self._writes.flush(session_id)
        for closed in [sid for sid, session in self._live.items() if session.closed]:
            self.release(closed)

    @property
    def batch_delay(self) -> float:
        """The write-behind window, in seconds."""
        return self._writes.delay

    def flush_soon(self, session_id: str, through: int) -> None:
        """Have everything up to seq ``through`` written soon, in the background, as a batch ending there."""
        self._writes.flush_soon(session_id, through)

    def release(self, session_id: str) -> None:
        """Flush one session and release its writer lock; later appends to it are no longer persisted."""
        self._live.pop(session_id, None)
        self._writes.release(session_id)

    def on_written(self, listener: WrittenListener) -> Disposer:
        """``listener(session_id, batch)`` after each durable batch (see :class:`~.logfile.Batch`)."""
        return Disposer(self._writes.on_written(listener))

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Flush every session and release every lock (the plugin's dispose)."""
        self._closed = True
        self._live.clear()
        self._writes.close()

    # -- session hooks --------------------------------------------------------------------------------------

    def attach(self, session: Session) -> None:
        """Start persisting a session that just became live (``sessions.on_open``)."""
        if self._closed:
            return
        if session.id in self._resuming:  # our own load: its writer is already queued
            self._live[session.id] = session
            return
        session.header.setdefault("createdAt", session.events[0]["time"] if session.events else now_ms())
        if self.store.find(session.id) is None:
            writer = self.store.create({"id": session.id, **session.header})
        else:
            writer = self.store.continue_live(session.id, session.events)
        try:
            queue = self._writes.open(writer)
        except BaseException:
            writer.close()
            raise
        self._live[session.id] = session
        self._writes.announce(session.id)
        for event in session.events[writer.cursor:]:
            self._writes.enqueue(queue, event)

    def record(self, session: Session, event: Event) -> None:
        """Queue one committed event (``sessions.listen``); never blocks on disk."""
        queue = self._writes.get(session.id)
        if queue is None or self._live.get(session.id) is not session:
            return
        self._writes.enqueue(queue, event)

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{name} is disposed")


def apply(ctx: Context, config: Config) -> None:
    sessions = ctx.sessions
    store = JsonlStore(config.root, config.compression, pack_chunks=config.packChunks)
    service = JsonlPersistence(sessions, store, batch_delay_ms=config.writeBatchMaxDelayMs)
    install(ctx, service)
