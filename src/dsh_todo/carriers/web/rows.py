"""What a ``session.list`` row says beyond the listing's own fields: title, last write, state and standing plan.

The listing (:meth:`~dsh_todo.carriers.web.history.HistorySource.list_rows`, over
:func:`~dsh_todo.logview.list_sessions`) gives each session its id, project, verdict and plan. :class:`RowFacts` adds,
on top of it:

- ``title``: the first user message, trimmed (the page shows the id when there is none);
- ``lastEventAt``: the ``time`` of the last event (epoch ms);
- ``turnEnd``: the ``reason.kind`` of the last ``turn/end``; ``turnOpen``: a turn started after it;
- ``waiting``: the open turn waits on the person (an approval asked, a question not yet answered);
- ``state``: ``live`` when a writer holds the session's lock now (the backend is asked: in this process or another,
  on this machine or, with PostgreSQL, another), else ``refused`` (the reader's verdict, with the listing's
  ``error``), else from the last ``turn/end``: ``ended`` (completed, or any kind but these), ``interrupted`` (also a
  turn left open by a writer that is gone: the reader's recovery closes it so), ``aborted``, ``error``; ``idle``
  when no turn ever ran;
- ``projections`` for a stored session: ``{asOfSeq, values: {todos}}`` from the reader's plan (the block live rows
  and the history tail page carry).

A stored session's summary (:func:`~dsh_todo.logview.summary.summarize`) costs a pass over its log, so it is kept per
session and read again only when the listing reports another last seq for it (a live session's, when its seq
moved); the state is asked every time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from dsh_todo.harness.event_types import Event
from dsh_todo.harness.persistence import LogBackend
from dsh_todo.harness.session import Session
from dsh_todo.logview import PlanView
from dsh_todo.logview.summary import Summary, SummaryFold, summarize

ENDS = {"completed": "ended", "interrupted": "interrupted", "aborted": "aborted", "error": "error"}
"""A last ``turn/end``'s kind → the row's state (``blocked``, ``max-tokens`` and unknown kinds end a turn too:
``ended``, with the kind in ``turnEnd``)."""


def state_of(live: bool, summary: Summary | None, refused: bool = False) -> str:
    if refused:
        return "refused"
    if live:
        return "live"
    if summary is None:
        return "idle"
    if summary.turn_open:
        return "interrupted"  # no writer holds it: the reader's recovery closes this turn as interrupted
    if summary.turn_end is None:
        return "idle"
    return ENDS.get(summary.turn_end, "ended")


def facts(summary: Summary | None) -> dict[str, Any]:
    row: dict[str, Any] = {}
    if summary is None:
        return row
    if summary.title is not None:
        row["title"] = summary.title
    if summary.last_time is not None:
        row["lastEventAt"] = summary.last_time
    if summary.turn_end is not None:
        row["turnEnd"] = summary.turn_end
    if summary.turn_open is not None:
        row["turnOpen"] = summary.turn_open
    if summary.waiting:
        row["waiting"] = True
    return row


class RowFacts:
    """Adds the board's fields to listing rows; one per server (its cache is shared by the requests' threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._summaries: dict[str, tuple[tuple[str, int], Summary | None]] = {}

    def live_row(self, row: dict[str, Any], session: Session, backend: LogBackend | None) -> None:
        """A session live in this process: its events are at hand. It is live while a writer holds its lock (this
        process, unless it released it), or, without persistence, while it is open here."""
        key = ("", session.seq)
        with self._lock:
            cached = self._summaries.get(session.id)
        if cached is not None and cached[0] == key:
            summary = cached[1]
        else:
            events: Sequence[Event] = session.events[:]
            fold = SummaryFold()
            fold.see(events)
            summary = fold.summary()
            with self._lock:
                self._summaries[session.id] = (key, summary)
        live = True if backend is None else _writer_alive(backend, session.id)
        row.update(facts(summary))
        row["state"] = state_of(live, summary)

    def stored_row(self, row: dict[str, Any], view: PlanView, backend: LogBackend) -> None:
        """A stored session, from the listing's view of it (whose ``live`` the backend gave: a writer holds the lock
        as the log is read)."""
        session_id = view.session_id
        if session_id is None:
            return
        if view.health.refused:
            row["state"] = "refused"
            return
        summary = self._summary(backend, view)
        row.update(facts(summary))
        row["state"] = state_of(view.live, summary)
        row["projections"] = {"asOfSeq": view.as_of_seq, "values": {"todos": view.plan}}

    def _summary(self, backend: LogBackend, view: PlanView) -> Summary | None:
        session_id = str(view.session_id)
        key = (view.where, view.as_of_seq)
        with self._lock:
            cached = self._summaries.get(session_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        summary = summarize(backend, session_id, view.path)
        with self._lock:
            self._summaries[session_id] = (key, summary)
        return summary

    def forget_except(self, session_ids: set[str]) -> None:
        """Drop the summaries of sessions no longer listed (so the cache is as large as the root, no larger)."""
        with self._lock:
            for session_id in [key for key in self._summaries if key not in session_ids]:
                del self._summaries[session_id]


def _writer_alive(backend: LogBackend, session_id: str) -> bool:
    try:
        return backend.writer_alive(session_id)
    except Exception:  # a database going away: not known to be live
        return False
