"""The ``session_persistence`` service over PostgreSQL: the JSONL service's API, plus followers.

It behaves like :class:`~dsh_todo.harness.persistence.jsonl.JsonlPersistence`, so front doors swap backends without
noticing: every live session is persisted (writer lock taken when it opens, events queued by a post-commit listener
and written in batches by the same :class:`~dsh_todo.harness.persistence.batching.WriteBehind`), ``load`` restores a
stored session with recovery committed, ``flush``/``release``/``close`` mean what they mean there. On top:
:meth:`PgPersistence.follow` and :meth:`PgPersistence.events` deliver events that *other* processes commit
(:mod:`.feed`), and :meth:`PgPersistence.read_from` reads a log from a seq without reading all of it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from dsh_todo.harness.persistence.batching import WriteBehind
from dsh_todo.harness.persistence.header import session_header_fields
from dsh_todo.harness.persistence.postgres.feed import Callback, EventFeed, Subscription
from dsh_todo.harness.persistence.postgres.store import PgStore, PgStoredLog, PgStoredSession, PgWriter
from dsh_todo.harness.persistence.scan import paused_gc
from dsh_todo.harness.projections import ProjectionRegistry
from dsh_todo.harness.session import Event, Session, SessionStore, now_ms

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.logfile import LogWriter

log = logging.getLogger("dsh_todo.persistence")


def _queued(writer: PgWriter) -> LogWriter:
    """``WriteBehind`` is annotated with the JSONL writer but needs only its ``session_id``/``cursor``/``append``/
    ``close`` (and ``last_batch``, ``None`` here: no byte offsets to report), which :class:`PgWriter` provides."""
    return cast("LogWriter", writer)


class PgPersistence:
    """Persists live sessions in PostgreSQL and loads stored ones back into ``sessions``."""

    def __init__(self, sessions: SessionStore, store: PgStore, *, batch_delay_ms: int = 200,
                 poll_interval: float = 5.0, projections: ProjectionRegistry | None = None) -> None:
        self.sessions = sessions
        self.store = store
        self.projections = projections
        self.poll_interval = poll_interval
        self._writes = WriteBehind(batch_delay_ms)
        self._live: dict[str, Session] = {}
        self._resuming: set[str] = set()
        self._feed: EventFeed | None = None
        self._closed = False

    # -- service API (as JSONL) -----------------------------------------------------------------------------

    def load(self, session_id: str) -> Session:
        """The live session ``session_id``, or the stored one restored (recovery committed) and made live."""
        live = self.sessions.get(session_id)
        if live is not None:
            return live
        self._require_open()
        loaded, writer = self.store.resume(session_id)
        session = Session(session_id, header=session_header_fields(loaded.meta))
        try:
            with paused_gc():
                session.restore(loaded.events)
            self._writes.open(_queued(writer))
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
        return session

    def read(self, session_id: str) -> PgStoredLog:
        """A stored log without loading it (no lock, no repair)."""
        return self.store.read(session_id)

    def read_from(self, session_id: str, after_seq: int = -1) -> list[dict[str, Any]]:
        """The stored events after ``after_seq`` (no lock, no repair)."""
        return self.store.read_from(session_id, after_seq)

    def list(self) -> list[PgStoredSession]:
        return self.store.list()

    def flush(self, session_id: str | None = None) -> None:
        """Make everything queued durable now; also lets go of sessions that were closed in the meantime."""
        self._writes.flush(session_id)
        for closed in [sid for sid, session in self._live.items() if session.closed]:
            self.release(closed)

    def release(self, session_id: str) -> None:
        """Flush one session, checkpoint its projections, release its writer lock; later appends are not persisted."""
        session = self._live.pop(session_id, None)
        queue = self._writes.get(session_id)
        if session is not None and queue is not None and session.seq:
            try:
                self._writes.flush(session_id)
                record = self._checkpoint_record(session)
                if record is not None:
                    self.store.write_checkpoint(session_id, record, session.seq - 1)
            except Exception:
                log.warning('could not checkpoint session "%s" on release', session_id, exc_info=True)
        self._writes.release(session_id)

    def cold_projections(self, session_id: str) -> dict[str, Any]:
        """``{asOfSeq, values}`` of a stored session from its checkpoint and the tail after it (SPEC §6.2 restore),
        reading only that tail; a missing or unusable checkpoint row is refolded from seq 0."""
        registry = self.projections
        if registry is None:
            raise RuntimeError("no session_projections registry is composed")
        stored = self.store.read_checkpoint(session_id)
        rows: dict[str, Any] = stored[0].get("rows", {}) if stored is not None else {}
        if not isinstance(rows, dict):
            rows = {}
        floor = registry.restore_floor(rows)
        tail = self.store.read_from(session_id, floor - 1)
        try:
            snapshot: dict[str, Any] = registry.restore(rows, tail, floor).snapshot
        except ValueError:
            snapshot = registry.restore({}, self.store.read_from(session_id, -1), 0).snapshot
        return snapshot

    def close(self) -> None:
        """Flush every session, release every lock, stop following (the plugin's dispose)."""
        # No final checkpoints here: disposal runs in reverse mount order, so the plugins whose projection units a
        # checkpoint would hold may already be gone. A checkpoint only ever lags; the next turn/end catches it up.
        self._closed = True
        self._live.clear()
        try:
            self._writes.close()
        finally:
            if self._feed is not None:
                self._feed.close()
            self.store.close()

    # -- following other writers ----------------------------------------------------------------------------

    @property
    def feed(self) -> EventFeed:
        """The process's ``LISTEN`` feed, started on first use."""
        self._require_open()
        if self._feed is None:
            self._feed = EventFeed(self.store, poll_interval=self.poll_interval)
        return self._feed

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        """``callback(events)`` with the events of ``session_id`` after ``after_seq``, now and whenever any process
        commits more (see :mod:`.feed`). Close the returned subscription to stop."""
        return self.feed.subscribe(session_id, after_seq, callback)

    def events(self, session_id: str, after_seq: int = -1) -> AsyncIterator[Sequence[Event]]:
        """:meth:`follow` as an async iterator of event runs."""
        return self.feed.events(session_id, after_seq)

    # -- session hooks --------------------------------------------------------------------------------------

    def attach(self, session: Session) -> None:
        """Start persisting a session that just became live (``sessions.on_open``)."""
        if self._closed:
            return
        if session.id in self._resuming:
            self._live[session.id] = session
            return
        session.header.setdefault("createdAt", session.events[0]["time"] if session.events else now_ms())
        if self.store.find(session.id) is None:
            writer = self.store.create({"id": session.id, **session.header})
        else:
            writer = self.store.continue_live(session.id, session.events)
        try:
            queue = self._writes.open(_queued(writer))
        except BaseException:
            writer.close()
            raise
        self._live[session.id] = session
        for event in session.events[writer.cursor:]:
            self._writes.enqueue(queue, event)

    def record(self, session: Session, event: Event) -> None:
        """Queue one committed event (``sessions.listen``); never blocks on the database.

        At a ``turn/end`` the projections' checkpoint is staged on the writer, which commits it in the same
        transaction as the batch holding that event (SPEC §6.2's write point; it never leads the log).
        """
        queue = self._writes.get(session.id)
        if queue is None or self._live.get(session.id) is not session:
            return
        self._writes.enqueue(queue, event)
        if event["type"] == "turn/end":
            record = self._checkpoint_record(session)
            if record is not None:
                cast("PgWriter", queue.writer).stage_checkpoint(record, event["seq"])

    def _checkpoint_record(self, session: Session) -> dict[str, Any] | None:
        """SPEC §6.2's projection cache record: ``{identity: {createdAt, cwd?}, rows: {key: {ver, seq, val}}}``."""
        if self.projections is None:
            return None
        try:
            rows = self.projections.checkpoint(session)
        except Exception:
            log.warning('could not checkpoint the projections of session "%s"', session.id, exc_info=True)
            return None
        if not rows:
            return None
        identity: dict[str, Any] = {"createdAt": session.header.get("createdAt")}
        if session.cwd is not None:
            identity["cwd"] = session.cwd
        return {"identity": identity, "rows": rows}

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError("@deepseek-ai/dsh-session-persistence-postgres is disposed")
