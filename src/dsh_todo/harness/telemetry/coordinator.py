"""Capture: which events become records, when, and how far each session has been handed off.

A :class:`Coordinator` joins one backend (a :class:`Sink`) to the ``sessions`` service, in one of DSH's two ways:

- ``live``: every committed event is captured as it is appended (a post-commit listener, so it never sees an event
  an invariant vetoed), sessions are adopted when they go live (and those already live when capture starts), a
  session's close sends its ``shutdown`` record, and agent errors are relayed as ``agent-error`` records;
- ``on-demand``: nothing is followed; :meth:`Coordinator.capture_session` replays the log up to a seq when the
  backend decides (the OTel backend's ``FEEDBACK_ONLY`` mode, at each ``feedback/record``).

Both run each record through the redact rules (:class:`~.service.SessionTelemetry`) right before the hand-off. Every
step is contained: a failing rule withholds that one record (fail-closed), a failing backend loses that one record,
and neither ever reaches the append that caused it (the session would only log the failure anyway: once an event is
in the log nothing may take it back).

The handoff cursor is the highest seq handed to a backend, per session object, kept at module scope like DSH's: a
re-mounted backend in the same process resumes after it instead of handing history over again, and it dies with the
session. With no cursor, capture starts at the session's construction boundary (``first_live_seq``): events a
session was restored with (a resume) were exported by the process that appended them, so they are never handed over
twice; they still feed the chunk projection, so a resumed session drops mid-step chunks as the first process did.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from dsh_todo.harness.disposer import Disposer
from dsh_todo.harness.telemetry.record import TelemetryRecord, agent_error_record, ledger_record, shutdown_record
from dsh_todo.harness.telemetry.service import Rule, redact

if TYPE_CHECKING:
    from dsh_todo.harness.event_types import Event
    from dsh_todo.harness.session import Session, SessionStore

log = logging.getLogger("dsh_todo.telemetry")

Capture = Literal["live", "on-demand"]


class Sink(Protocol):
    """What a backend gives capture: a non-blocking hand-off. ``emit`` runs on the append path (live capture), so it
    must only enqueue; batching, retries, loss and export are the backend's."""

    def emit(self, record: TelemetryRecord) -> None: ...


_HANDED_OFF: Final = object()
"""The cursor's key in ``session.extensions``: per session, the highest seq handed to a backend (handed off, not
delivered). Kept on the session, it lives exactly as long as the session, as DSH's module-scope ``WeakMap`` does."""


class Coordinator:
    """One backend's capture over the ``sessions`` service; :meth:`stop` (or disposing its plugin) ends it."""

    def __init__(self, sessions: SessionStore, sink: Sink, rules: Sequence[Rule], capture: Capture = "live") -> None:
        """``rules`` is the seam's live list (``session_telemetry.rules``): rules added later apply from then on."""
        self._sessions = sessions
        self._sink = sink
        self._rules = rules
        self.capture = capture
        self._adopted: weakref.WeakSet[Session] = weakref.WeakSet()
        """The adopted sessions, for the shutdown records at stop; ``session.extensions[self]`` answers the hot
        path's "is it adopted?" without building a weak reference per event."""
        self._chunks: weakref.WeakKeyDictionary[Session, set[tuple[object, object]]] = weakref.WeakKeyDictionary()
        self._registrations: list[Disposer] = []
        if capture == "live":
            self._registrations += [sessions.on_open(self._adopt), sessions.listen(self._on_event),
                                    sessions.on_close(self._on_close), sessions.on_agent_error(self._on_agent_error)]
            for session in sessions.list():
                self._adopt(session)

    # -- capture --------------------------------------------------------------------------------------------

    def capture_session(self, session: Session, through_seq: int | None = None) -> None:
        """Hand over the log after the cursor, through ``through_seq`` when given; each event contained on its own,
        so one withheld record never starves the rest of the replay."""
        cursor = session.extensions.get(_HANDED_OFF, session.first_live_seq - 1)
        for event in session.events:
            seq = event["seq"]
            if through_seq is not None and seq > through_seq:
                break
            try:
                if seq <= cursor:
                    self._track(session, event)
                else:
                    self._capture(session, event)
            except Exception:
                log.warning("telemetry: capture of %s seq %s failed", event["type"], seq, exc_info=True)

    def _adopt(self, session: Session) -> None:
        if self in session.extensions:
            return
        session.extensions[self] = True
        self._adopted.add(session)
        self.capture_session(session)

    def _on_event(self, session: Session, event: Event) -> None:
        if self not in session.extensions:  # not adopted yet (an earlier open hook appending): adoption replays it
            return
        try:
            self._capture(session, event)
        except Exception:
            log.warning("telemetry: capture of %s seq %s failed", event["type"], event["seq"], exc_info=True)

    def _track(self, session: Session, event: Event) -> None:
        """The at-or-below-cursor half of a replay: remember first chunks, hand nothing over."""
        if event["type"] == "assistant/chunk":
            data = event["data"]
            self._seen(session).add((data.get("turn"), data.get("step")))

    def _capture(self, session: Session, event: Event) -> None:
        if event["type"] == "assistant/chunk":
            data = event["data"]
            key = (data.get("turn"), data.get("step"))
            seen = self._seen(session)
            if key in seen:  # only the first chunk of a (turn, step) leaves: the stream-started signal
                return
            seen.add(key)
        rules = self._rules
        record = ledger_record(session, event)
        self._sink.emit(redact(rules, record) if rules else record)
        session.extensions[_HANDED_OFF] = event["seq"]

    def _seen(self, session: Session) -> set[tuple[object, object]]:
        seen = self._chunks.get(session)
        if seen is None:
            seen = self._chunks[session] = set()
        return seen

    # -- operational records ----------------------------------------------------------------------------------

    def _on_close(self, session: Session) -> None:
        if session.extensions.pop(self, None) is None:
            return
        self._adopted.discard(session)
        self._send(shutdown_record, session)

    def _on_agent_error(self, agent_id: str, session: Session, turn: int, step: int, error: BaseException) -> None:
        self._send(agent_error_record, agent_id, session, turn, step, error)

    def _send(self, build: Callable[..., TelemetryRecord], *args: Any) -> None:
        try:
            self._sink.emit(redact(self._rules, build(*args)))
        except Exception:
            log.warning("telemetry: an operational record failed", exc_info=True)

    def stop(self) -> None:
        """End capture: every session still live gets its ``shutdown`` record first, then nothing more is followed.
        (The backend's own shutdown comes after: it must still deliver these.)"""
        for disposer in self._registrations:
            disposer()
        self._registrations.clear()
        for session in list(self._adopted):
            session.extensions.pop(self, None)
            if not session.closed:
                self._send(shutdown_record, session)
        self._adopted = weakref.WeakSet()
