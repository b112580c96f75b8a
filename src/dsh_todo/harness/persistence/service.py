"""The one ``session_persistence`` service, over any :class:`~.contract.LogBackend`.

Every live session the ``sessions`` service opens is persisted: its writer lock is taken when it opens, its events are
queued by a post-commit listener and written in batches (:class:`~.batching.WriteBehind`), and its log appears with
the first batch. A load commits crash recovery, adopts the session into ``sessions`` and marks the resume as DSH
does. The backend plugins differ only in the backend they hand to :func:`install`.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.context import Context, Disposer
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.persistence.batching import WriteBehind
from dsh_todo.harness.persistence.contract import (
    Callback,
    LogBackend,
    StoredLog,
    StoredSession,
    Subscription,
    WrittenListener,
)
from dsh_todo.harness.session import Session, SessionStore, now_ms

log = logging.getLogger("dsh_todo.persistence")

END_SEED: Final = "session/end-seed"
"""The marker DSH appends when a session is built from a stored seed (SPEC §5.4)."""


class PersistenceService:
    """Persists live sessions and loads stored ones back into ``sessions``, through one backend (its methods are
    documented by :class:`~.contract.SessionPersistence`)."""

    def __init__(self, sessions: SessionStore, backend: LogBackend, *, batch_delay_ms: int = 200) -> None:
        self.sessions = sessions
        self.backend = backend
        self.closed = False
        self._writes = WriteBehind(batch_delay_ms)
        self.batch_delay = self._writes.delay
        self._live: dict[str, Session] = {}
        self._unsettled: weakref.WeakSet[Session] = weakref.WeakSet()
        """Sessions attached since the last flush: one a later ``on_open`` hook refused never went live, so no close
        hook releases its lock and queue; a flush does. Once a flush has seen a session live, its close hook releases
        it, so a flush looks at these only, never at every live session (an HTTP server may hold thousands). Held
        weakly: a process that never flushes keeps no session alive here. (A hook that flushes while a session is
        being opened settles it early: were a later hook to refuse it, its lock would wait for the dispose.)"""
        self._resuming: set[str] = set()

    # -- reading and loading --------------------------------------------------------------------------------

    def load(self, session_id: str) -> Session:
        """The live session ``session_id``, or the stored one restored (recovery committed) and made live.

        Like DSH, a session built from a non-empty stored seed gets one ``session/end-seed`` marker unless the seed
        already ends with one, so a log resumed here and by DSH in turns stays the log DSH alone would write.
        """
        live = self.sessions.get(session_id)
        if live is not None:
            return live
        self._require_open()
        loaded, writer = self.backend.resume(session_id)
        header = {key: value for key, value in loaded.meta.items() if key not in ("id", "type")}
        session = Session(session_id, header=header)
        try:
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
        if loaded.events and loaded.events[-1]["type"] != END_SEED:
            session.append(END_SEED, {})
        return session

    def read(self, session_id: str) -> StoredLog:
        return self.backend.read(session_id)

    def stored_sessions(self) -> list[StoredSession]:
        return self.backend.stored_sessions()

    def locate(self, session_id: str) -> str | None:
        return self.backend.locate(session_id)

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        self._require_open()
        return self.backend.follow(session_id, after_seq, callback)

    # -- writing --------------------------------------------------------------------------------------------

    def flush(self, session_id: str | None = None) -> None:
        """Make everything queued durable now; also lets go of sessions refused after they were attached.

        A refused session that cannot be written is logged, not raised: nobody was told its events were kept, and
        the caller asked about another session (or all of them), whose writes did succeed."""
        self._writes.flush(session_id)
        if self._unsettled:
            unsettled = list(self._unsettled)
            self._unsettled.clear()
            for session in unsettled:
                if session.closed and self._live.get(session.id) is session:
                    try:
                        self.release(session.id)
                    except Exception as exc:
                        log.warning('could not write what a refused session "%s" logged before it was refused: %s',
                                    session.id, exc)

    def flush_soon(self, session_id: str, through: int) -> None:
        self._writes.flush_soon(session_id, through)

    def release(self, session_id: str) -> None:
        self._live.pop(session_id, None)
        self._writes.release(session_id)

    def on_written(self, listener: WrittenListener) -> Disposer:
        return Disposer(self._writes.on_written(listener))

    def close(self) -> None:
        """Flush every session, release every lock, let go of the backend (the plugin's dispose)."""
        self.closed = True
        self._live.clear()
        try:
            self._writes.close()
        finally:
            self.backend.close()

    # -- session hooks --------------------------------------------------------------------------------------

    def attach(self, session: Session) -> None:
        """Start persisting a session that just became live (``sessions.on_open``)."""
        if self.closed:
            return
        if session.id in self._resuming:  # our own load: its writer is already queued (load lets it go if refused)
            self._live[session.id] = session
            return
        session.header.setdefault("createdAt", session.events[0]["time"] if session.events else now_ms())
        if self.backend.locate(session.id) is None:
            writer = self.backend.create({"id": session.id, **session.header})
        else:
            writer = self.backend.continue_live(session.id, session.events)
        try:
            queue = self._writes.open(writer)
        except BaseException:
            writer.close()
            raise
        self._live[session.id] = session
        self._unsettled.add(session)
        self._writes.announce(session.id)
        for event in session.events[writer.cursor:]:
            self._writes.enqueue(queue, event)

    def record(self, session: Session, event: Event) -> None:
        """Queue one committed event (``sessions.listen``); never blocks on the backend."""
        queue = self._writes.get(session.id)
        if queue is None or self._live.get(session.id) is not session:
            return
        self._writes.enqueue(queue, event)

    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("session persistence is disposed")


MAX_BATCH_DELAY_MS: Final = 2**31 - 1
"""Node's largest timer delay, DSH's upper bound for the batch window."""


def backend_config(plugin: str, raw: Any, *, keys: frozenset[str], needs: str) -> tuple[Mapping[str, Any], int]:
    """A persistence plugin's config as a mapping with only ``keys`` (and ``writeBatchMaxDelayMs``), plus its
    batch window checked as DSH checks it (an integer from 1 ms to Node's largest timer delay; 200 by default)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{plugin} needs a config with {needs}")
    unknown = set(raw) - keys - {"writeBatchMaxDelayMs"}
    if unknown:
        raise ConfigError(f"{plugin}: unknown config keys {sorted(unknown)}")
    delay = raw.get("writeBatchMaxDelayMs", 200)
    if type(delay) is not int or not 1 <= delay <= MAX_BATCH_DELAY_MS:
        raise ConfigError(f"{plugin}: 'writeBatchMaxDelayMs' must be an integer between 1 and {MAX_BATCH_DELAY_MS}")
    return raw, delay


def text_field(plugin: str, raw: Mapping[str, Any], key: str, what: str) -> str:
    """A required non-empty string setting (``root``, ``url``)."""
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{plugin}: '{key}' must be a non-empty {what}")
    return value


def install(ctx: Context, backend: LogBackend, batch_delay_ms: int) -> PersistenceService:
    """Persist every live session (those already open too) through ``backend``; release on close; provide the
    service as ``session_persistence`` and dispose it with the plugin."""
    sessions = ctx.sessions
    service = PersistenceService(sessions, backend, batch_delay_ms=batch_delay_ms)
    sessions.on_open(service.attach)
    sessions.on_close(lambda session: service.release(session.id))
    sessions.listen(service.record)
    for session in sessions.list():
        service.attach(session)
    ctx.provide("session_persistence", service)
    ctx.on_dispose(service.close)
    return service
