"""``@deepseek-ai/dsh-session-projection-cache``: projection checkpoints for every persisted log (SPEC §6.2).

A cold reader (``dsh-todo plan``, a carrier opening a session that is not loaded) wants a session's projections
without folding its whole log. This plugin keeps, for every persisted session, the projection checkpoint
(``{key: {ver, seq, val}}``, :meth:`~dsh_todo.harness.projections.ProjectionRegistry.checkpoint`) in the session's
backend (:meth:`~.contract.LogBackend.write_checkpoint`): beside a JSONL log as ``projections.json`` with the byte
offset a reader starts decoding from (:mod:`.jsonl.checkpoint`), or in PostgreSQL's checkpoints table. A cold read
then restores from the rows and folds only the tail (:meth:`ProjectionCache.restore`). One design for every backend.

**It never leads the log.** A checkpoint is written only for an event that is already durable: at every
``turn/end`` the rows are copied (a deep copy of each state; nothing is folded), the write-behind is asked for a
batch ending at that event (``session_persistence.flush_soon``: written at once by the writer thread), and the rows
are handed to the plugin's writing thread from the durability callback once that batch is durable. ``turn/end``
itself therefore costs a copy and no I/O, and the record a cold reader starts from holds at most one turn
(under zstd, the frame ends at the ``turn/end``). Those batch boundaries are asked for at most once per batch
window per session, so turns that end faster than that (a replay, a benchmark) are batched as usual and the record
holds at most one window of events.
A front door that flushes the ``turn/end`` itself (to acknowledge it) gets it written at once in one batch with
whatever it queued since its last flush, which is then the record (one fsync for the caller, not one per cut).
Closing a session and disposing the plugin write one more checkpoint, for the session's last event, once
persistence has flushed it.

**Written behind.** The file itself (temporary file, fsync, rename) is written by this plugin's own background
thread, never by the caller whose flush made the batch durable: a ``turn/end`` flushed by a front door is
acknowledged after the log's one fsync, not after the checkpoint's fsync and rename too (docs/decisions/0009). Only
the newest checkpoint waiting per session is kept, so a burst of turns costs one file write. Closing a session and
disposing the plugin write synchronously, after what is waiting; :meth:`ProjectionCache.settle` waits for the
thread (tests, benchmarks). A crash leaves the previous checkpoint, which only lags. A session holding an event type
this harness does not know (and not marked ``ignorable``) gets no further checkpoints, so a cold reader always meets
such an event in the tail it reads, and refuses the log exactly as a full read does.

**Validation on read.** The backend hands back only a checkpoint that belongs to this log (identity, location) with
the stored events after it; per row, :class:`~dsh_todo.harness.projections.ProjectionRegistry` decides: a row whose
``ver`` is not the live unit's ``stateVersion``, whose value fails the unit's state schema, or whose ``seq`` is not
covered by the tail (beyond the log: it would lead) is discarded, and that unit is folded from seq 0 instead.

**Failures are said once.** A checkpoint that cannot be written (a full disk) is one line per session until one is
written again, not a traceback per turn (tracebacks only at ``DEBUG``, ``dsh-todo --debug``). On dispose, a log that
cannot be flushed gets no final checkpoint; that failure is the log's, said by whoever heard of it first
(:class:`~dsh_todo.harness.errors.SessionWriteError`'s ``repeat``), so it is said here only if nobody had.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import SessionWriteError
from dsh_todo.harness.persistence.contract import Batch, Rows, SessionPersistence
from dsh_todo.harness.projections import ProjectionRegistry, Restored
from dsh_todo.harness.session import KNOWN_SESSION_EVENT_TYPES, Event, Session, SessionStore

log = logging.getLogger("dsh_todo.persistence")

name = "@deepseek-ai/dsh-session-projection-cache"
inject = ["sessions", "session_projections", "session_persistence"]


class _Pending:
    """Rows copied at a ``turn/end`` (``seq``), waiting for that event to become durable."""

    __slots__ = ("header", "rows", "seq")

    def __init__(self, seq: int, rows: Rows, header: Mapping[str, Any]) -> None:
        self.seq = seq
        self.rows = rows
        self.header = dict(header)


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
        self._pending: dict[str, _Pending] = {}
        self._durable: dict[str, Batch] = {}
        self._written: dict[str, int] = {}
        self._failing: set[str] = set()
        """Sessions whose last checkpoint write failed (said once, until one is written again)."""
        self._checked: dict[str, int] = {}
        self._tainted: set[str] = set()
        self._cut_at: dict[str, float] = {}
        self._closed = False
        self._behind = threading.Condition()
        self._waiting: dict[str, tuple[Mapping[str, Any], int, Rows, Batch]] = {}
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
        with self._lock:
            durable = self._durable.get(session.id)
            if durable is None or durable.last_seq < seq:
                self._pending[session.id] = _Pending(seq, rows, session.header)
                durable = None
        if durable is None:
            # A batch boundary right after the turn/end, written by the writer thread: the checkpoint's record
            # (its line, or its zstd frame) then holds at most this turn, which bounds what a cold reader decodes.
            # At most one per batch window: turns ending faster than that (a replay, a benchmark) batch as usual.
            now = time.monotonic()
            if now - self._cut_at.get(session.id, -math.inf) >= self.persistence.batch_delay:
                self._cut_at[session.id] = now
                self.persistence.flush_soon(session.id, seq)
        elif durable.first_seq <= seq:  # the writer thread made this event durable before we got here
            self._submit(session.id, session.header, seq, rows, durable)

    def on_written(self, session_id: str, batch: Batch) -> None:
        """A batch of ``session_id`` is durable: write the pending checkpoint if the batch holds its event."""
        with self._lock:
            self._durable[session_id] = batch
            pending = self._pending.get(session_id)
            if pending is None or pending.seq > batch.last_seq:
                return
            del self._pending[session_id]
        if pending.seq >= batch.first_seq:
            self._submit(session_id, pending.header, pending.seq, pending.rows, batch)

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
            except SessionWriteError as exc:
                if exc.repeat:
                    log.debug('no checkpoint of session "%s" on dispose: %s', session.id, exc, exc_info=True)
                else:
                    log.warning('could not checkpoint session "%s" on dispose: %s', session.id, exc,
                                exc_info=log.isEnabledFor(logging.DEBUG))
            except Exception as exc:
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
            self._write(session.id, session.header, seq, rows, durable)

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
        if session.id in self._tainted:
            return False
        start = self._checked.get(session.id, 0)
        known = KNOWN_SESSION_EVENT_TYPES
        for event in session.events[start:seq + 1]:
            if event["type"] not in known and event.get("ignorable") is not True:
                self._tainted.add(session.id)
                return False
        self._checked[session.id] = seq + 1
        return True

    def _submit(self, session_id: str, header: Mapping[str, Any], seq: int, rows: Rows, batch: Batch) -> None:
        """Hand a checkpoint to the background thread (replacing an older one still waiting for this session)."""
        with self._behind:
            if self._closed and self._thread is None:
                return
            self._waiting[session_id] = (header, seq, rows, batch)
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
                header, seq, rows, batch = self._waiting.pop(session_id)
                self._busy = True
            self._write(session_id, header, seq, rows, batch)

    def _write(self, session_id: str, header: Mapping[str, Any], seq: int, rows: Rows, batch: Batch) -> None:
        """Write ``rows`` (as of ``seq``, which ``batch`` holds) unless a checkpoint as recent is already there."""
        with self._write_lock:
            if self._written.get(session_id, -1) >= seq:
                return
            try:
                self.backend.write_checkpoint(session_id, header, rows, seq, batch)
            except Exception as exc:
                if session_id not in self._failing:
                    self._failing.add(session_id)
                    log.warning('could not write the projection checkpoint of session "%s": %s', session_id, exc,
                                exc_info=log.isEnabledFor(logging.DEBUG))
                return
            self._failing.discard(session_id)
            self._written[session_id] = seq

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._pending.pop(session_id, None)
            self._durable.pop(session_id, None)
        self._written.pop(session_id, None)
        self._failing.discard(session_id)
        self._checked.pop(session_id, None)
        self._cut_at.pop(session_id, None)
        self._tainted.discard(session_id)


def apply(ctx: Context) -> None:
    persistence = ctx.session_persistence  # seen through this plugin's scope
    cache = ProjectionCache(ctx.sessions, ctx.session_projections, persistence)
    ctx.sessions.listen(cache.on_event)
    ctx.sessions.on_close(cache.on_close)
    persistence.on_written(cache.on_written)
    ctx.provide("session_projection_cache", cache)
    ctx.on_dispose(cache.close)
