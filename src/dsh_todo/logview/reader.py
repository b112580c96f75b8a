"""The one reader of session logs: a source in, the events, the standing plan and a verdict out.

A *source* is a log path (a session directory or its ``session.jsonl[.zstd]``), or a session id read through a
*backend* (:class:`~dsh_todo.harness.persistence.LogBackend`: a root of files, or PostgreSQL).
Every front door (``plan``, ``events``, ``sessions``, ``watch``, the web page) reads through here, so the same log
gets the same verdict everywhere:

- **refused** (with a code and a one-line reason) when the log cannot be interpreted: it does not exist, it breaks
  the format in its committed part, it was written by a newer harness, it is not where its header says (a copy), a
  session is split across encodings or stored twice, or its standing plan cannot be shown (a hand-written
  ``todo/write`` the view schema refuses; SPEC §13.10);
- **recovered** when crash recovery changed what is shown, in memory only (the file is never touched): a torn tail
  was left out, and/or the closers of an interrupted turn were appended (never while a writer is alive: then the
  turn is genuinely running);
- **ok** otherwise.

:func:`read_session` keeps every event; :func:`read_events` hands each event to its caller as it is read and keeps
none (``dsh-todo events`` and the web page's history pages: memory bounded by what the caller keeps, not by the
log); :func:`read_plan` runs the very same pass but keeps only what the plan and the verdict need, so it costs a
check of every line (most proven in bulk, decision 0015) and no more memory than one piece of the file. Its one
shortcut is a projection checkpoint that proves the bytes before its offset unchanged (their SHA-256 is in the
checkpoint): the rows stand for those bytes, the tail is read exactly, and any anomaly sends the read through every
line, so the answer is the full pass's either way (decision 0010).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, NamedTuple

from dsh_todo.harness.errors import DshTodoError
from dsh_todo.harness.event_types import Record
from dsh_todo.harness.persistence.contract import LogReader, Observer, Rows, Scan
from dsh_todo.harness.persistence.errors import SessionLogError
from dsh_todo.harness.persistence.header import Meta
from dsh_todo.logview.files import backend_at, log_target, names_a_log, not_a_log, session_of
from dsh_todo.logview.health import Health, Refusal, recovered, refusal_of
from dsh_todo.logview.plan import PLAN_INTEREST, PlanFold

Backend = LogReader
"""Any log backend (:class:`~dsh_todo.harness.persistence.contract.LogReader`): a root of files, a database, memory.
The reader needs only its reading members."""
PlanSource = Literal["scan", "full", "checkpoint"]


class SessionView(NamedTuple):
    """A session as a reader shows it.

    ``events`` are the stored events followed by the ``closers`` (a count) that recovery appends in memory;
    :attr:`stored` are the events as stored, which is what the web page pages through (SPEC §6.3 reads stored
    events for a cold session). After a refusal ``events`` is empty, except when only the plan was refused: the
    events were read and stay available. ``plan`` is ``None`` when no plan stands, or when the log was refused.
    """

    where: str
    path: Path | None
    session_id: str | None
    meta: Meta | None
    events: list[Record]
    closers: int
    live: bool
    health: Health
    plan: list[Any] | None = None

    @property
    def stored(self) -> list[Record]:
        return self.events[:len(self.events) - self.closers]


class PlanView(NamedTuple):
    """A session's standing plan as of ``as_of_seq`` (its last stored event), with the same verdict
    :func:`read_session` gives."""

    where: str
    path: Path | None
    session_id: str | None
    meta: Meta | None
    plan: list[Any] | None
    as_of_seq: int
    live: bool
    health: Health
    source: PlanSource = "scan"
    closers: tuple[Record, ...] = ()
    """The interrupted-turn closers recovery appends in memory after the stored events (none while a writer is
    alive)."""


class _Target(NamedTuple):
    backend: Backend
    session_id: str | None
    log: Path | None
    unique: bool = False
    """A listing counted this id under the root and found it once: the read need not look for it again."""

    @property
    def where(self) -> str:
        if self.log is not None:
            return str(self.log)
        return self.backend.location


class _Read(NamedTuple):
    """What one read of a log gave the verdict and the views."""

    meta: Meta
    events: list[Record] | None
    event_count: int
    torn_at: int | None
    cut_frame_events: int
    plan: PlanFold
    closers: list[Record]
    live: bool
    source: PlanSource = "scan"


def resolve(source: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None,
            backend: Backend | None = None) -> _Target:
    """Where ``source`` is read from (raises :class:`Refusal` when it names nothing): with a ``backend`` it is a
    session id; without one, a path when it is a session log or session folder (:func:`~.files.names_a_log`),
    else a session id under ``root``."""
    text = os.fspath(source)
    if backend is None:
        if names_a_log(text):
            files, log = log_target(text)
            return _Target(files, None, log)
        if root is None:
            raise Refusal("not-found", not_a_log(text))
        backend = backend_at(root)
    if not backend.holds_files:
        return _Target(backend, text, None)
    found = backend.locate(text)
    if found is None:
        raise Refusal("not-found", f"{not_a_log(text)}, and no session of that id is stored under {backend.location}")
    return _Target(backend, text, Path(found))


class _Observed(Exception):
    """What the caller's observer raised (a closed pipe, say), carried past the reader's own error handling."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _both(plan: PlanFold, observe: Observer) -> Observer:
    def see(events: list[Record], types: list[Any]) -> None:
        plan.see(events, types)
        try:
            observe(events, types)
        except Exception as exc:
            raise _Observed(exc) from exc

    return see


def _read(target: _Target, *, keep: bool, observe: Observer | None = None) -> _Read:
    backend = target.backend
    session_id = session_of(target.session_id, target.log)
    if not keep and observe is None:
        fast = _from_checkpoint(target, session_id)
        if fast is not None:
            return fast
    plan = PlanFold()
    found: Scan
    if observe is None:
        found = backend.scan(session_id, plan.see, keep=keep, wanted=PLAN_INTEREST, where=target.log,
                             listed=target.unique)
    else:
        found = backend.scan(session_id, _both(plan, observe), expand=True, where=target.log, listed=target.unique)
    return _Read(found.meta, found.events if observe is None else None, found.count, found.torn_at,
                 found.cut_frame_events, plan, found.closers, found.live)


def _from_checkpoint(target: _Target, session_id: str) -> _Read | None:
    """The read of a log from its projection checkpoint, when the backend proves the events before it unchanged
    and the tail after it gives a plan that can be shown (:meth:`~dsh_todo.harness.persistence.contract.LogBackend.
    scan_checkpointed`). Anything else, and the caller reads every event: this path only ever answers what the full
    pass would."""
    plan = PlanFold()

    def start(rows: Rows, _at: int) -> Observer | None:
        return plan.see if plan.resume(rows) else None

    tail = target.backend.scan_checkpointed(session_id, start, where=target.log, listed=target.unique)
    if tail is None:
        return None
    try:
        plan.plan()
    except Refusal:
        return None
    return _Read(tail.meta, None, tail.count, None, 0, plan, tail.closers, tail.live, "checkpoint")


def _guarded(target: _Target, keep: bool, observe: Observer | None = None) -> _Read | Health:
    """The read, or the refusal it ended in; a backend's own errors (a database going away) are refusals too. What
    ``observe`` raises is raised as it is."""
    try:
        return _read(target, keep=keep, observe=observe)
    except _Observed as exc:
        raise exc.error from None
    except (Refusal, SessionLogError, OSError) as exc:
        return refusal_of(exc)
    except DshTodoError as exc:  # not about the log: its backend failed (a database going away)
        return refusal_of(Refusal("internal", f"cannot read {target.where}: {' '.join(str(exc).split())}"))


def _session_id(target: _Target, meta: Meta | None) -> str | None:
    if target.session_id is not None:
        return target.session_id
    if meta is not None:
        return str(meta["id"])
    return session_of(None, target.log) if target.log is not None else None


def _verdict(read: _Read) -> tuple[Health, list[Any] | None]:
    try:
        plan = read.plan.plan()
    except Refusal as exc:
        return refusal_of(exc), None
    return recovered(read.torn_at, read.cut_frame_events, read.closers), plan


def read_session(source: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None,
                 backend: Backend | None = None) -> SessionView:
    """Every event of a session (with the in-memory recovery applied), its standing plan and its verdict."""
    try:
        target = resolve(source, root=root, backend=backend)
    except (Refusal, SessionLogError, OSError) as exc:
        return SessionView(os.fspath(source), None, None, None, [], 0, False, refusal_of(exc))
    return _session_view(target)


def _session_view(target: _Target) -> SessionView:
    read = _guarded(target, keep=True)
    if isinstance(read, Health):
        return SessionView(target.where, target.log, _session_id(target, None), None, [], 0, False, read)
    health, plan = _verdict(read)
    events = (read.events or []) + read.closers
    return SessionView(target.where, target.log, _session_id(target, read.meta), read.meta, events,
                       len(read.closers), read.live, health, plan)


def read_plan(source: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None,
              backend: Backend | None = None) -> PlanView:
    """The standing plan and the verdict of :func:`read_session`, without keeping the events of a file."""
    try:
        target = resolve(source, root=root, backend=backend)
    except (Refusal, SessionLogError, OSError) as exc:
        return PlanView(os.fspath(source), None, None, None, None, -1, False, refusal_of(exc))
    return _plan_view(target)


def _plan_view(target: _Target, observe: Observer | None = None) -> PlanView:
    read = _guarded(target, keep=False, observe=observe)
    if isinstance(read, Health):
        return PlanView(target.where, target.log, _session_id(target, None), None, None, -1, False, read)
    health, plan = _verdict(read)
    source: PlanSource = "full" if read.events is not None or observe is not None else read.source
    return PlanView(target.where, target.log, _session_id(target, read.meta), read.meta, plan, read.event_count - 1,
                    read.live, health, source, tuple(read.closers))


def read_events(source: str | os.PathLike[str], observe: Observer, *, root: str | os.PathLike[str] | None = None,
                backend: Backend | None = None) -> PlanView:
    """The plan and verdict of :func:`read_plan` from one full pass that hands every stored event, in log order,
    to ``observe(events, types)`` as it is read and keeps none of them (a database's events are read whole, as its
    backend reads them). A log that changes while it is read is read again (:func:`~dsh_todo.harness.persistence.
    reading.scan_log`), so ``observe`` may see a run of events again from seq 0: it goes by the events' ``seq``.
    After a refusal it may have seen some events; what it raises is raised as it is."""
    try:
        target = resolve(source, root=root, backend=backend)
    except (Refusal, SessionLogError, OSError) as exc:
        return PlanView(os.fspath(source), None, None, None, None, -1, False, refusal_of(exc))
    return _plan_view(target, observe)


def list_sessions(backend: Backend) -> list[PlanView]:
    """Every session of a backend with its plan and verdict; one that cannot be read is a refused row, never a
    reason to hide the others. Raises only when the listing itself fails (an unreadable root, a lost database)."""
    views: list[PlanView] = []
    for entry in backend.stored_sessions():
        if entry.problem is not None:
            views.append(PlanView(entry.location, entry.path, entry.id, entry.meta, None, -1, False,
                                  refusal_of(entry.problem)))
            continue
        target = _Target(backend, entry.id, entry.path, unique=True)  # the listing counted every id
        view = _plan_view(target)
        if view.meta is None and entry.meta is not None:  # refused: the header still says who and where
            view = PlanView(view.where, view.path, view.session_id, entry.meta, None, -1, False, view.health)
        views.append(view)
    return views

