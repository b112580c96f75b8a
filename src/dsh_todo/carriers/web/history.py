"""Where the page's sessions come from, and the history pages it reads (SPEC §6.3).

A session is either *live* (in this process's ``sessions`` service, driven by an in-process agent) or *stored* (a log
under the persistence root, possibly still being written by another process). Live wins when both exist. Reads never
take a writer lock and never repair: the page is a viewer, and the writer may be another process.

A page is a contiguous run of events. The tail page ends at the log's end; an earlier page ends just before
``beforeSeq``. Walking back from its end, a page takes events until it holds ``maxMessages`` surface messages (user,
assistant, tool result), then reaches further back to the ``tool/call`` of every result it holds, so a tool row never
loses its arguments at a page edge, and takes the non-message events just before its first message (the turn and
step markers that open it). ``hasMore`` says whether earlier events exist. Only the tail page carries
``projections``, computed from the very events the page was cut from, so its ``asOfSeq`` is the page's last seq.

Projections are folded here by a detached fold of the registry (``fold_for``) over an immutable copy of the log,
rather than read from the registry's live cells: the agent may be appending on another thread, and the registry's
cells are not meant to be shared across threads. It is the same fold, so it gives the same values.

A stored session's page is cut while the reader streams the log by, keeping none of it (:func:`read_events`): a
:class:`PageWindow` keeps only the events the page can still reach, and the tail page's fold advances run by run.
So a page costs the server the page, not the log (issue 22: a 100 MB log took 550 MB for one tail page).

Stored sessions are read through the one log reader (:mod:`dsh_todo.logview`), so the page gives a log the verdict
the command line gives it: a refused log is an error answer with the reader's reason (and a row with an ``error``
in the session list, never a failed list); a log whose standing plan cannot be shown fails only the tail read, with
``internal`` (SPEC §13.10). Pages show the events as stored: recovery's closers exist only in memory, and a cold
session's history is its stored events (SPEC §6.3), which is also what a follower of the file delivers after it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from dsh_todo.carriers.web.agents import AgentWatch, synthetic_events
from dsh_todo.carriers.web.protocol import RpcError
from dsh_todo.carriers.web.rows import RowFacts
from dsh_todo.harness.agent_loop import parse_arguments
from dsh_todo.harness.context import Context
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.fold import Fold
from dsh_todo.harness.persistence import LogBackend
from dsh_todo.harness.persistence.contract import SESSION_PERSISTENCE
from dsh_todo.harness.projections import SESSION_PROJECTIONS, ProjectionRegistry
from dsh_todo.harness.session import SESSIONS, Session
from dsh_todo.harness.tools.registry import TOOLS
from dsh_todo.logview import Health, list_sessions, read_events

CONVERSATION_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
"""The messages a page counts and shows: the conversation. A ``system/message`` (format v4 logs the system prompt)
is surface-eligible for a model but not a message of the conversation a person pages through."""

log = logging.getLogger("dsh_todo.web")


class HistorySource:
    """Where the page's sessions and their history come from: the carrier's read side over one booted context (live
    sessions first, then the persistence root's logs, read through :mod:`dsh_todo.logview`)."""

    def __init__(self, ctx: Context, agents: AgentWatch | None = None) -> None:
        self.ctx = ctx
        self.facts = RowFacts()
        self.agents = agents
        """The other coding agents' sessions the user chose to show (``None``: none chosen)."""

    def agent_events(self, session_id: str) -> list[dict[str, Any]] | None:
        """A foreign session's page as events (:func:`~dsh_todo.carriers.web.agents.synthetic_events`), ``None``
        when ``session_id`` is not one."""
        if self.agents is None or not self.agents.owns(session_id):
            return None
        session = self.agents.session(session_id)
        return None if session is None else synthetic_events(session)

    @property
    def backend(self) -> LogBackend | None:
        """The composed persistence's backend, which the reader reads through (``None`` without persistence)."""
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        return None if persistence is None else persistence.backend

    @property
    def registry(self) -> ProjectionRegistry | None:
        registry: ProjectionRegistry | None = self.ctx.get(SESSION_PROJECTIONS)
        return registry

    def live(self, session_id: str) -> Session | None:
        store = self.ctx.get(SESSIONS)
        if store is None:
            return None
        session: Session | None = store.get(session_id)
        return session

    def list_rows(self) -> list[dict[str, Any]]:
        """One row per session, live first where an id is both live and stored; newest first."""
        rows: dict[str, dict[str, Any]] = {}
        store = self.ctx.get(SESSIONS)
        if store is not None:
            for session in store.list():
                row: dict[str, Any] = {"sessionId": session.id, "live": True}
                if session.cwd is not None:
                    row["cwd"] = session.cwd
                created = session.header.get("createdAt")
                if type(created) is int:
                    row["createdAt"] = created
                try:
                    block = self.projections(session.events[:])
                except Exception:
                    block = None
                if block is not None and block["values"]:
                    row["projections"] = block
                self.facts.live_row(row, session, self.backend)
                rows[session.id] = row
        backend = self.backend
        if backend is not None:
            try:
                views = list_sessions(backend)
            except Exception as exc:  # the listing itself failed: an unreadable root, a lost database
                raise RpcError("internal", f"could not list the stored sessions: {exc}", status=500) from None
            for view in views:
                if view.session_id is None or view.session_id in rows:
                    continue
                row = {"sessionId": view.session_id, "live": False}
                meta = view.meta or {}
                if isinstance(meta.get("cwd"), str):
                    row["cwd"] = meta["cwd"]
                row.update(lineage(meta))
                created = meta.get("createdAt")
                if type(created) is int:
                    row["createdAt"] = created
                if view.health.refused:
                    row["error"] = {"code": view.health.code, "message": view.health.reason}
                elif view.health.state == "recovered":
                    row["recovered"] = view.health.reason
                self.facts.stored_row(row, view, backend)
                rows[view.session_id] = row
            self.facts.forget_except(set(rows))
        if self.agents is not None:
            for row in self.agents.rows():
                rows.setdefault(row["sessionId"], row)
        return sorted(rows.values(), key=lambda r: (-int(r.get("lastEventAt", r.get("createdAt", 0))), r["sessionId"]))

    def projections(self, events: Sequence[Event]) -> dict[str, Any] | None:
        """``{asOfSeq, values}`` for these events, or ``None`` when no projection registry is composed."""
        registry = self.registry
        if registry is None:
            return None
        return registry.fold_for(events).snapshot()

    def view_of(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ``view`` a ``tool/call`` carries: the tool's ``presentCall`` intent, when it has one (SPEC §4.4)."""
        if event.get("type") != "tool/call":
            return None
        tools = self.ctx.get(TOOLS)
        data = event.get("data")
        if tools is None or not isinstance(data, Mapping):
            return None
        name, raw = data.get("name"), data.get("arguments")
        if not isinstance(name, str) or not isinstance(raw, str):
            return None
        definition = tools.get(name)
        if definition is None:
            return None
        try:
            intent = definition.present(parse_arguments(raw))
        except Exception:
            log.debug("presentCall of %s failed", name, exc_info=True)
            return None
        return None if intent is None else {"for": "call", "view": intent}

    def entry(self, event: Mapping[str, Any]) -> dict[str, Any]:
        item: dict[str, Any] = {"event": event}
        view = self.view_of(event)
        if view is not None:
            item["view"] = view
        return item


def lineage(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Who delegated a DSH session: the header's ``parentSession``, ``origin`` and ``delegationDepth`` (when set)."""
    row: dict[str, Any] = {}
    if isinstance(meta.get("parentSession"), str):
        row["parentId"] = meta["parentSession"]
    if isinstance(meta.get("origin"), str):
        row["origin"] = meta["origin"]
    depth = meta.get("delegationDepth")
    if type(depth) is int and depth > 0:
        row["delegationDepth"] = depth
    return row


def refusal(session_id: str, health: Health) -> RpcError:
    """The error answer for a log the reader refused: its code, with the reader's reason as the message."""
    if health.code == "not-found":
        return not_found(session_id)
    status = 500 if health.code == "internal" else 422
    return RpcError(health.code or "internal", health.reason, status=status)


def not_found(session_id: str) -> RpcError:
    return RpcError("not-found", f'session "{session_id}" does not exist', status=404,
                    details={"sessionId": session_id})


def page_bounds(events: Sequence[Event], before: int | None, max_messages: int) -> tuple[int, int]:
    """``(start, end)`` of the page ending before ``before`` (or at the log end) with ``max_messages`` messages."""
    end = len(events) if before is None else min(before, len(events))
    start = 0
    count = 0
    for index in range(end - 1, -1, -1):
        if events[index]["type"] in CONVERSATION_TYPES:
            count += 1
            if count >= max_messages:
                start = index
                break
    # A page begins just after the previous page's last message: the turn and step markers that open this page's
    # first message (and anything else between two messages) travel with it.
    while start > 0 and events[start - 1]["type"] not in CONVERSATION_TYPES:
        start -= 1
    reach = start
    for index in range(start, end):
        event = events[index]
        if event["type"] == "tool/result":
            sources = event.get("sourceEventSeqs")
            if isinstance(sources, Sequence):
                for seq in sources:
                    if type(seq) is int and 0 <= seq < reach:
                        reach = seq
    return reach, end


def _least_source(event: Mapping[str, Any]) -> int | None:
    """The earliest event a ``tool/result`` points back to (``page_bounds``' rule: int seqs from 0)."""
    sources = event.get("sourceEventSeqs")
    if not isinstance(sources, Sequence):
        return None
    return min((seq for seq in sources if type(seq) is int and seq >= 0), default=None)


class PageWindow:
    """The cut of :func:`page_bounds`, made while a log streams by: it keeps the events from the page's current
    reach on (each run of events is trimmed to it), the last ``max_messages`` messages' positions, and, for the
    tail page, the projections' fold. Memory: the page, whatever the log.

    A ``tool/result`` may point back before what was let go (never in logs the harness writes, where a result's
    call is in its own step): :attr:`reach` then lies before :attr:`kept`, and the caller reads the page again."""

    def __init__(self, before: int | None, max_messages: int, fold: Fold | None) -> None:
        self.before = before
        self.max_messages = max_messages
        self.fresh_fold = fold
        self.reset()

    def reset(self) -> None:
        self.kept: deque[Event] = deque()
        self.messages: deque[tuple[int, int | None]] = deque(maxlen=self.max_messages)
        """``(seq of the message before it, least source)`` of the last messages before the page's end."""
        self.last_message = -1
        self.next_seq = 0
        self.fold = None if self.fresh_fold is None else self.fresh_fold.copy()
        self.fold_error: Exception | None = None

    def see(self, events: Sequence[Event], kinds: list[Any]) -> None:
        if not events:
            return
        if events[0]["seq"] < self.next_seq:  # the log changed while read, and is read again from the start
            self.reset()
        self.next_seq = events[-1]["seq"] + 1
        if self.fold is not None:
            try:
                self.fold.extend(events)
            except Exception as exc:
                self.fold, self.fold_error = None, exc
        before = self.before
        for event, kind in zip(events, kinds, strict=True):
            seq = event["seq"]
            if before is not None and seq >= before:
                break
            self.kept.append(event)
            if kind in CONVERSATION_TYPES:
                self.messages.append((self.last_message, _least_source(event) if kind == "tool/result" else None))
                self.last_message = seq
        reach = self.reach
        kept = self.kept
        while kept and kept[0]["seq"] < reach:
            kept.popleft()

    @property
    def reach(self) -> int:
        """Where the page starts, as the events seen so far place it."""
        start = self.messages[0][0] + 1 if len(self.messages) == self.max_messages else 0
        reach = start
        for _, least in self.messages:
            if least is not None and least < reach:
                reach = least
        return reach

    @property
    def complete(self) -> bool:
        """Whether :attr:`kept` holds the whole page."""
        return not self.kept or self.kept[0]["seq"] <= self.reach


def history_page(source: HistorySource, session_id: str, *, before: int | None,
                 max_messages: int) -> dict[str, Any]:
    """The ``value`` of a ``session.history`` answer (blocking for stored logs). Raises :class:`RpcError` when it
    cannot be given."""
    tail = before is None
    foreign = source.agent_events(session_id)
    if foreign is not None:
        return agent_page(foreign, before, max_messages)
    session = source.live(session_id)
    tail_error: RpcError | None = None
    if session is not None:
        events: Sequence[Event] = session.events[:]  # one C-level slice: an atomic copy while an agent appends
        start, end = page_bounds(events, before, max_messages)
        page: Sequence[Event] = events[start:end]
        has_more = start > 0
        fold: Fold | None = None
        fold_error: Exception | None = None
        if tail and source.registry is not None:
            try:
                fold = source.registry.fold_for(events)
            except Exception as exc:
                fold_error = exc
    else:
        backend = source.backend
        if backend is None:
            raise not_found(session_id)
        registry = source.registry
        window = PageWindow(before, max_messages, registry.fold_for() if tail and registry is not None else None)
        view = read_events(session_id, window.see, backend=backend)
        health = view.health
        if health.refused:
            if not (health.code == "internal" and view.meta is not None):  # read, but its plan cannot be shown
                raise refusal(session_id, health)
            tail_error = RpcError("internal", health.reason, status=500)
        reach = window.reach
        if not window.complete:  # a result pointed back before what was let go: read the page's events again
            again: list[Event] = []
            end_seq = window.next_seq if before is None else before
            read_events(session_id, lambda run, _kinds: again.extend(e for e in run if reach <= e["seq"] < end_seq),
                        backend=backend)
            window.kept = deque(again)
        page = [event for event in window.kept if event["seq"] >= reach]
        has_more = reach > 0
        fold, fold_error = window.fold, window.fold_error
    value: dict[str, Any] = {"events": [source.entry(event) for event in page], "hasMore": has_more}
    if tail:
        if tail_error is not None:
            raise tail_error
        if source.registry is not None:
            try:
                if fold_error is not None:
                    raise fold_error
                assert fold is not None
                block = fold.snapshot()
            except Exception as exc:
                # SPEC §13.10: a hand-written event the view schema refuses fails the tail read with ``internal``.
                raise RpcError("internal", f"could not build the session's projections: {exc}", status=500) from None
            value["projections"] = block
    return value


def agent_page(events: Sequence[Event], before: int | None, max_messages: int) -> dict[str, Any]:
    """A foreign session's history page, cut from its synthetic events as a DSH log's page is; the tail page's
    ``todos`` is the list its last write left."""
    start, end = page_bounds(events, before, max_messages)
    value: dict[str, Any] = {"events": [{"event": event} for event in events[start:end]], "hasMore": start > 0}
    if before is None:
        plans = [event["data"]["todos"] for event in events if event["type"] == "todo/write"]
        value["projections"] = {"asOfSeq": len(events) - 1, "values": {"todos": plans[-1] if plans else None}}
    return value
