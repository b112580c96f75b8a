"""``@deepseek-ai/dsh-session-projection-cache``: projection checkpoints for every persisted log (SPEC §6.2).

A cold reader (``dsh-todo plan``, a carrier opening a session that is not loaded) wants a session's projections
without folding its whole log, so each persisted session's checkpoint (``{key: {ver, seq, val}}``) is kept in its
backend (:meth:`~.contract.LogBackend.write_checkpoint`: ``projections.json`` beside a JSONL log, PostgreSQL's
checkpoints table) and a cold read folds only the tail after it (:meth:`ProjectionCache.restore`). This plugin
decides when; the backend decides where (the persistence README has both).

**Never ahead of the log.** At a ``turn/end`` the rows are copied (nothing folded, no I/O) and the write-behind is
asked for a batch ending there (``flush_soon``, at most once per batch window per session, so a replay's fast turns
batch as usual); the rows are written once that batch is durable, so the record a cold reader starts from holds at
most one turn or one window. Closing a session and disposing the plugin checkpoint its last event once flushed.

**Written behind** (decision 0009): this plugin's own thread writes each checkpoint, keeping only the newest waiting
per session, so an acknowledged flush costs the log's one fsync and not the checkpoint's too. Close and dispose write
synchronously after what is waiting (:meth:`ProjectionCache.settle` waits for the thread). A crash leaves the previous
checkpoint, which only lags. A session holding an event type this harness would refuse gets no further checkpoints,
so a cold reader meets that event in its tail and refuses the log as a full read does. On read, the backend hands
back only a checkpoint of this log and :class:`~dsh_todo.harness.projections.ProjectionRegistry` discards any row it
cannot trust (another ``stateVersion``, a value failing the schema, a ``seq`` the tail does not reach).

**Failures are said once**: a checkpoint that cannot be written is one line per session until one is written again
(tracebacks at ``DEBUG``). On dispose, a log that cannot be flushed gets no final checkpoint; that failure is the
log's, said here only if nobody had (:class:`~dsh_todo.harness.errors.SessionWriteError`'s ``repeat``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import SessionWriteError
from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES, Event
from dsh_todo.harness.persistence.contract import Batch, Rows, SessionPersistence
from dsh_todo.harness.projections import ProjectionRegistry, Restored
from dsh_todo.harness.session import Session, SessionStore

log = logging.getLogger("dsh_todo.persistence")

name = "@deepseek-ai/dsh-session-projection-cache"
inject = ["sessions", "session_projections", "session_persistence"]


class _Due(NamedTuple):
    """Rows copied at event ``seq`` of a session with this header, to write once that event is durable."""

    seq: int
    rows: Rows
    header: Mapping[str, Any]


class ProjectionCache:
    """The ``session_projection_cache`` service: writes checkpoints for live sessions, restores cold ones."""

    def __init__(self, sessions: SessionStore, projections: ProjectionRegistry,
                 persistence: SessionPersistence) -> None:
        self.sessions = sessions
        self.projections = projections
        self.persistence = persistence
        self.backend = persistence.backend
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[str, _Due] = {}
        self._durable: dict[str, Batch] = {}
        self._written: dict[str, int] = {}
        self._failing: set[str] = set()
        """Sessions whose last checkpoint write failed (said once, until one is written again)."""
        self._checked: dict[str, int] = {}
        """How many of each session's events hold no type this harness would refuse; -1 once one does."""
        self._cut_at: dict[str, float] = {}
        self._closed = False
        self._behind = threading.Condition()
        self._waiting: dict[str, tuple[_Due, Batch]] = {}
        self._busy = False
        self._thread: threading.Thread | None = None

    # -- cold reads -----------------------------------------------------------------------------------------

    def restore(self, session_id: str) -> Restored:
        """The projections of a stored session, from its checkpoint and the tail after it when one is usable,
        else from the whole log. The events are as stored (no interrupted-turn closers); refusals and corruption
        errors are a full read's."""
        found = self.backend.read_checkpointed(session_id)
        if found is not None:
            with contextlib.suppress(ValueError):
                return self.projections.restore(found.rows, found.tail, found.base)
        stored = self.backend.read(session_id)
        return self.projections.restore({}, stored.events, 0)

    # -- live sessions --------------------------------------------------------------------------------------

    def on_event(self, session: Session, event: Event) -> None:
        """At ``turn/end``: copy the rows now, write them once the batch holding this event is durable."""
        if event["type"] != "turn/end" or self._closed:
            return
        seq: int = event["seq"]
        rows = self._rows(session, seq)
        if rows is None:
            return
        due = _Due(seq, rows, dict(session.header))
        with self._lock:
            durable = self._durable.get(session.id)
            if durable is None or durable.last_seq < seq:
                self._pending[session.id] = due
                durable = None
        if durable is None:
            # A batch boundary right after the turn/end (at most one per window): the checkpoint's record holds
            # at most this turn, which bounds what a cold reader decodes.
            now = time.monotonic()
            if now - self._cut_at.get(session.id, -math.inf) >= self.persistence.batch_delay:
                self._cut_at[session.id] = now
                self.persistence.flush_soon(session.id, seq)
        elif durable.first_seq <= seq:  # the writer thread made this event durable before we got here
            self._submit(session.id, due, durable)

    def on_written(self, session_id: str, batch: Batch) -> None:
        """A batch of ``session_id`` is durable: write the pending checkpoint if the batch holds its event."""
        with self._lock:
            self._durable[session_id] = batch
            pending = self._pending.get(session_id)
            if pending is None or pending.seq > batch.last_seq:
                return
            del self._pending[session_id]
        if pending.seq >= batch.first_seq:
            self._submit(session_id, pending, batch)

    def on_close(self, session: Session) -> None:
        """A session closed (persistence has flushed it): checkpoint its last event, then forget it."""
        try:
            self._final(session)
        finally:
            self._forget(session.id)

    def close(self) -> None:
        """The plugin's dispose: checkpoint every live persisted session at its last event."""
        if self._closed:
            return
        self._closed = True
        for session in self.sessions.list():
            try:
                if not self.persistence.closed:
                    self.persistence.flush(session.id)
                self._final(session)
            except Exception as exc:
                if isinstance(exc, SessionWriteError) and exc.repeat:
                    log.debug('no checkpoint of session "%s" on dispose: %s', session.id, exc, exc_info=True)
                else:
                    log.warning('could not checkpoint session "%s" on dispose: %s', session.id, exc,
                                exc_info=log.isEnabledFor(logging.DEBUG))
        self.settle()
        with self._behind:
            thread, self._thread = self._thread, None
            self._behind.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def settle(self) -> None:
        """Wait until every checkpoint handed to the background thread is written (or failed and logged)."""
        with self._behind:
            while self._waiting or self._busy:
                self._behind.wait()

    # -- internals ------------------------------------------------------------------------------------------

    def _final(self, session: Session) -> None:
        seq = session.seq - 1
        if seq < 0:
            return
        with self._lock:
            durable = self._durable.get(session.id)
            self._pending.pop(session.id, None)
        self.settle()  # what is still waiting is older: written first, so this one is the last word
        if durable is None or durable.last_seq != seq:
            return  # not (all) durable: the previous checkpoint stands
        rows = self._rows(session, seq)
        if rows is not None:
            self._write(session.id, _Due(seq, rows, session.header), durable)

    def _rows(self, session: Session, seq: int) -> Rows | None:
        """The registry's checkpoint of ``session`` as of ``seq`` (its last event), or ``None`` if none is due."""
        if session.seq - 1 != seq or not self._clean_through(session, seq):
            return None
        rows = self.projections.checkpoint(session)
        if not rows or any(row["seq"] != seq for row in rows.values()):
            return None
        return rows

    def _clean_through(self, session: Session, seq: int) -> bool:
        """No event up to ``seq`` has a type this harness would refuse (checked incrementally)."""
        start = self._checked.get(session.id, 0)
        if start < 0:
            return False
        known = KNOWN_SESSION_EVENT_TYPES
        for event in session.events[start:seq + 1]:
            if event["type"] not in known and event.get("ignorable") is not True:
                self._checked[session.id] = -1
                return False
        self._checked[session.id] = seq + 1
        return True

    def _submit(self, session_id: str, due: _Due, batch: Batch) -> None:
        """Hand a checkpoint to the background thread (replacing an older one still waiting for this session)."""
        with self._behind:
            if self._closed and self._thread is None:
                return
            self._waiting[session_id] = (due, batch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dsh-checkpoint-writer", daemon=True)
                self._thread.start()
            self._behind.notify_all()

    def _run(self) -> None:
        while True:
            with self._behind:
                self._busy = False
                self._behind.notify_all()
                while not self._waiting:
                    if self._thread is not threading.current_thread():
                        return
                    self._behind.wait()
                session_id = next(iter(self._waiting))
                due, batch = self._waiting.pop(session_id)
                self._busy = True
            self._write(session_id, due, batch)

    def _write(self, session_id: str, due: _Due, batch: Batch) -> None:
        """Write ``due`` (its event held by ``batch``) unless a checkpoint as recent is already there."""
        with self._write_lock:
            if self._written.get(session_id, -1) >= due.seq:
                return
            try:
                self.backend.write_checkpoint(session_id, due.header, due.rows, due.seq, batch)
            except Exception as exc:
                if session_id not in self._failing:
                    self._failing.add(session_id)
                    log.warning('could not write the projection checkpoint of session "%s": %s', session_id, exc,
                                exc_info=log.isEnabledFor(logging.DEBUG))
                return
            self._failing.discard(session_id)
            self._written[session_id] = due.seq

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._pending.pop(session_id, None)
            self._durable.pop(session_id, None)
        self._written.pop(session_id, None)
        self._failing.discard(session_id)
        self._checked.pop(session_id, None)
        self._cut_at.pop(session_id, None)


def apply(ctx: Context) -> None:
    persistence = ctx.session_persistence  # seen through this plugin's scope
    cache = ProjectionCache(ctx.sessions, ctx.session_projections, persistence)
    ctx.sessions.listen(cache.on_event)
    ctx.sessions.on_close(cache.on_close)
    persistence.on_written(cache.on_written)
    ctx.provide("session_projection_cache", cache)
    ctx.on_dispose(cache.close)
