"""Turns, steps and tool calls on an agent's log: the one writer every front door goes through.

DSH's log shape (SPEC §4.3, §5.2): a turn is ``turn/start {turn}`` … ``turn/end {turn, reason}``, numbered from 1 per
session and never nested; a step is ``step/start``/``step/end`` inside it, numbered from 1 per turn; a tool call is
``tool/call`` (the model's raw argument text) → whatever the tool appends (``todo/write``) → ``tool/result`` pointing
back at the call (``sourceEventSeqs``, ``surfaceOp: "append"``). The agent loop, the MCP and ACP carriers and the
framework adapters all write through :class:`Turns`, so these rules, the abort rule and durability live here once.

Where a turn begins and ends is the front door's choice, made with one of two tools (docs/decisions/0005):

- :class:`TurnScope` around a unit of work that has a beginning and an end: the agent loop's prompt, a framework run
  wrapped in ``todos.turn()`` or pydantic-ai's run hook. It closes the turn with the reason the block earned.
- :meth:`Turns.call_alone` for a front door that only sees tool calls (an MCP connection, a framework tool called
  outside any run scope): the call joins the turn open at the end of the log, and when there is none it opens the
  writer's *standing* turn, which stays open for the calls that follow until :meth:`Turns.close` or the next scope.

Why a standing turn: the standing plan is the last ``todo/write`` with no later ``turn/start`` (SPEC §5.4). A call
that opened a turn of its own would clear the plan before it ran, so a rejected or aborted call (which writes none)
would hide the plan a person was reading. Within a standing turn only accepted calls change the plan.

Aborts: a call cancelled while its tool runs (``CancelledError``, ``KeyboardInterrupt``) still gets its error
``tool/result`` (``Error: tool call aborted``, ``AbortError``/``ABORTED``); a turn whose block is cancelled ends
``aborted``. A cancelled standing-turn call ends its step only: the connection or binding goes on.

Threads: a framework may run a call on a thread, and an event loop, of its own (Google ADK's tool thread pool,
LangChain's executor) while the run's turn is closed on the loop thread. Every write of the writer takes one thread
lock, and a turn's end first waits, up to :data:`SETTLE_TIMEOUT_S`, for the calls in flight on other threads, so a
call that already began ends inside its turn with its real answer; a call arriving meanwhile waits for the end and
then takes a turn as any later call does. A call in flight on the closing thread itself (a task its run left behind)
cannot be waited for and is answered aborted, as above. See docs/decisions/0035.

Durability: with persistence (anything with ``flush(session_id)`` and ``release(session_id)``), every call is
flushed before its result is handed back, and every closed turn is flushed; :meth:`Turns.close` releases the log.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from dsh_todo.harness.agent import Agent
from dsh_todo.harness.errors import AbortError
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.frozen import frozen_array, frozen_object
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.session import Session, SessionStore, lossless_data
from dsh_todo.harness.tools.registry import AbortSignal, ToolRegistry, ToolResult, error_result
from dsh_todo.ids import random_uuid
from dsh_todo.jsonutil import loads

if TYPE_CHECKING:
    from dsh_todo.harness.context import Context

__all__ = ["PARSE", "Durable", "OpenTurn", "TurnScope", "Turns", "aborted", "completed", "next_turn_number",
           "open_turn", "parse_arguments", "turn_end_reason"]

Reason = dict[str, Any]

BOUNDARIES: Final = frozenset({"turn/start", "turn/end", "step/start", "step/end"})

SETTLE_TIMEOUT_S: Final = 30.0
"""How long a turn's end waits for the calls in flight on other threads (they are short: the todo rules); past it,
they are answered aborted and the turn ends (a call that then still finishes may write after it: the one limit)."""

_ABORTED: Final = error_result("tool call aborted", AbortError("tool call aborted").info())

PARSE: Final[Any] = object()
"""``arguments`` left to be parsed from the call's raw text by the reference's rule (:func:`parse_arguments`)."""

EXTERNAL_MODEL: Final = frozen_object(kind="model", provider="external", model="external")
"""The source of an advertised call's ``assistant/message``: a model outside this harness (an MCP client's, an
agent framework's), which the log knows only by the calls it made."""


def parse_arguments(raw: str) -> Any:
    """The reference's rule (SPEC §1.4): empty → ``{}``; not JSON → the raw string (validation then refuses it)."""
    if raw == "":
        return {}
    try:
        return loads(raw)
    except ValueError:
        return raw


def completed() -> Reason:
    return {"kind": "completed"}


def aborted(kind: str = "user") -> Reason:
    """``turn/end`` reason for a turn stopped from outside: ``user`` (a cancel), ``disposed`` (its owner went away)."""
    return {"kind": "aborted", "reason": {"kind": kind}}


def turn_end_reason(exc: BaseException | None) -> Reason:
    """The ``turn/end`` reason for a block that ended with ``exc`` (``None``: it completed)."""
    if exc is None:
        return completed()
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
        return aborted()
    return {"kind": "error", "error": {"name": type(exc).__name__, "message": str(exc)}}


class OpenTurn(NamedTuple):
    """Where the log stands inside an open turn."""

    turn: int
    step: int
    """The highest step number in the turn so far (0: none yet)."""
    step_open: bool
    """Whether step ``step`` is still open."""


def open_turn(session: Session) -> OpenTurn | None:
    """The open turn at the end of the log, or ``None`` when the last turn event is a ``turn/end`` (or there is none).

    Reads backwards from the end, so the cost is the length of the current turn, not of the log.
    """
    step = 0
    step_open: bool | None = None
    for event in reversed(session.events):
        kind = event["type"]
        if kind == "turn/end":
            return None
        if kind == "turn/start":
            return OpenTurn(int(event["data"]["turn"]), step, bool(step_open))
        if kind in ("step/start", "step/end"):
            if step_open is None:
                step_open = kind == "step/start"
            step = max(step, int(event["data"].get("step", 0)))
    return None


def next_turn_number(session: Session) -> int:
    """One more than the highest turn number in the log (turns count from 1 per session)."""
    turns = 0
    for event in session.events:
        if event["type"] == "turn/start":
            turns = max(turns, int(event["data"].get("turn", 0)))
    return turns + 1


class Durable(Protocol):
    """What :class:`Turns` needs of session persistence: make one session durable now; flush it and let it go."""

    def flush(self, session_id: str) -> None: ...

    def release(self, session_id: str) -> None: ...


class Turns:
    """One agent's session written as turns: boundaries, tool calls, aborts and durability.

    The writer remembers the turn it opened (it closes only that one) and where the log stands in it; when anything
    else appended a turn or step boundary since it last looked, it reads the position from the log again, so a host
    or a second writer on the same session is joined rather than contradicted.
    """

    def __init__(self, tools: ToolRegistry, agent: Agent, *, persistence: Durable | None = None,
                 sessions: SessionStore | None = None) -> None:
        self.tools = tools
        self.agent = agent
        self.persistence = persistence
        self.sessions = sessions
        self.owned: int | None = None
        """The turn this writer opened and has not closed."""
        self.standing = False
        """Whether :attr:`owned` is the standing turn :meth:`call_alone` opened (closed by the next scope or close)."""
        self._where: OpenTurn | None = None
        self._seen = -1
        self._pending: dict[int, tuple[int, int, str]] = {}
        """Calls logged but not yet answered: ``tool/call`` seq → (turn, step, call id)."""
        self._guard = threading.Condition(threading.RLock())
        """Held by every write of this writer (reentrant: a call's tool appends inside it on its own thread)."""
        self._in_flight: dict[int, int] = {}
        """Calls running right now, by the thread that runs them (``threading.get_ident``)."""
        self._quiescing = 0
        """Turn ends waiting for the calls in flight on other threads; a call arriving meanwhile waits for them."""
        self._format_version: int | None = None

    @classmethod
    def of(cls, ctx: Context, agent: Agent) -> Turns:
        """A writer for ``agent`` with the context's tools, its persistence (when mounted) and its sessions."""
        return cls(ctx.tools, agent, persistence=ctx.get("session_persistence"), sessions=ctx.sessions)

    @property
    def session(self) -> Session:
        return self.agent.session

    @property
    def format_version(self) -> int:
        """The session's log format (:attr:`Session.format_version`), read once: its header does not change while
        a writer writes it, and the shape of every advertised call and result depends on it."""
        version = self._format_version
        if version is None:
            version = self._format_version = self.session.format_version
        return version

    def position(self) -> OpenTurn | None:
        """The open turn at the end of the log (:func:`open_turn`), remembered while no one else moves it."""
        events = self.session.events
        seen, count = self._seen, len(events)
        if seen != count:  # (nothing appended since the last look: the answer stands, without building a scan)
            # The events since the last look in one slice: a read of the log per event was a trip into the session
            # module and back each (decision 0046).
            if seen < 0 or seen > count or any(event["type"] in BOUNDARIES for event in events[seen:count]):
                self._where = open_turn(self.session)
            self._seen = count
        return self._where

    def _mark(self, type: str, data: Mapping[str, Any], where: OpenTurn | None) -> Event:
        event = self.session.append(type, data)
        self._where, self._seen = where, event["seq"] + 1
        return event

    def _inside(self) -> OpenTurn:
        where = self.position()
        if where is None:
            raise RuntimeError(f'session "{self.session.id}" has no open turn')
        return where

    # Turns and steps -----------------------------------------------------------------------------------------

    def begin(self) -> int:
        """Open the next turn (``turn/start``) and own it; a standing turn this writer holds ends ``completed``.

        That ``turn/end`` is not flushed on its own: nobody is told the standing turn ended, and it becomes durable
        with the new turn's first acknowledged write (a crash before then leaves it for recovery to close)."""
        with self._guard:
            self._quiesce()
            if self.owned is not None:
                if not self.standing:
                    raise RuntimeError(f"turn {self.owned} is still open")
                self._close(completed())
            turn = next_turn_number(self.session)
            self._mark("turn/start", frozen_object(turn=turn), OpenTurn(turn, 0, False))
            self.owned = turn
            return turn

    def end(self, reason: Reason) -> None:
        """Close the turn this writer opened (its open step first) with ``reason``, and flush: one fsync.

        A call still running in the turn (a framework that stopped awaiting its tool task when its run was cancelled)
        is answered ``Error: tool call aborted`` here, so its result stays inside the turn; should its tool finish
        after all, the log keeps that answer and the caller is told it too (SPEC §13.5: a ``todo/write`` its body
        logged stays in the log). A call in flight on another thread is waited for instead (bounded,
        :data:`SETTLE_TIMEOUT_S`), and ends inside the turn with its own answer.
        """
        with self._guard:
            if self._close(reason):
                self.flush()

    def _close(self, reason: Reason) -> bool:
        """:meth:`end` without the flush; whether it wrote anything."""
        if self.owned is not None:
            self._quiesce()
        turn, self.owned, self.standing = self.owned, None, False
        where = self.position()
        if turn is None or where is None or where.turn != turn:
            return False  # nothing of ours is open (or someone else already closed it)
        for call_seq, (call_turn, step, call_id) in list(self._pending.items()):
            if call_turn == turn:  # still running in a task the block's end left behind: answered now, in the turn
                del self._pending[call_seq]
                self._answer(turn, step, call_id, _ABORTED, call_seq)
        if where.step_open:
            self._end_step(where)
        self._mark("turn/end", {"turn": turn, "reason": reason}, None)
        return True

    def begin_step(self) -> int:
        """Open the next step of the open turn."""
        with self._guard:
            return self._begin_step(self._inside()).step

    def end_step(self) -> None:
        """Close the open step."""
        with self._guard:
            where = self._inside()
            if not where.step_open:
                raise RuntimeError(f"turn {where.turn} has no open step")
            self._end_step(where)

    def _begin_step(self, where: OpenTurn) -> OpenTurn:
        """Open the step after ``where``'s (the position, just read); returns the position after it."""
        opened = OpenTurn(where.turn, where.step + 1, True)
        self._mark("step/start", frozen_object(turn=opened.turn, step=opened.step), opened)
        return opened

    def _end_step(self, where: OpenTurn) -> None:
        """Close the step open at ``where`` (the position, just read)."""
        self._mark("step/end", frozen_object(turn=where.turn, step=where.step), OpenTurn(where.turn, where.step, False))

    # Calls ---------------------------------------------------------------------------------------------------

    async def call(self, call: ToolCallRequest, *, arguments: Any = PARSE,
                   signal: AbortSignal | None = None) -> ToolResult:
        """One call in the open step, as the loop runs it (SPEC §4.3); durable before it returns.

        ``arguments`` is the already-parsed value when the front door received it parsed (an MCP client's JSON
        object, a framework's dict); by default the raw text is parsed by the reference's rule.
        """
        with self._guard:
            self._enter_call()
            try:
                where = self._inside()
                seq = self._log_call(where, call)
            except BaseException:
                self._leave_call()
                raise
        try:
            return await self._run(where, seq, call, arguments, signal)
        finally:
            with self._guard:
                try:
                    self.flush()
                finally:
                    self._leave_call()

    def run_turn(self) -> int | None:
        """The open turn a call made now would join when it is a run's (a scope's or a host's), not this writer's
        standing turn; ``None`` otherwise. What :meth:`call_alone`'s ``within`` is given by a front door that may
        wait before its call reaches the writer."""
        with self._guard:
            where = self.position()
            if where is None or (self.standing and where.turn == self.owned):
                return None
            return where.turn

    async def call_alone(self, call: ToolCallRequest, *, arguments: Any = PARSE,
                         signal: AbortSignal | None = None, within: int | None = None) -> ToolResult:
        """One call from a front door that has no turns of its own; durable (step closed) before it returns.

        It joins the turn open at the end of the log, or opens this writer's standing turn, kept open for the calls
        that follow; it runs in a step of its own unless one is open. A rejected or cancelled call therefore never
        writes a ``turn/start``: the standing plan changes only when a call is accepted.

        Opening a turn after a closed one would clear what that turn left standing (SPEC §5.4) even if the call were
        then rejected, so such a call opens it only once its tool logs something (:meth:`_opening`); refused before
        that, it is answered and nothing is appended.

        ``within``: the run's turn the call was made in (:meth:`run_turn`, read when the call was made). When that
        turn has ended before the call got here (the run was cancelled while the call waited for the ones before
        it), the call is answered ``Error: tool call aborted`` and nothing is logged: in DSH a turn's calls that had
        not started when it was aborted never run.
        """
        with self._guard:
            self._enter_call()
            try:
                where = self.position()
                if within is not None and (where is None or where.turn != within):
                    self._leave_call()
                    return _ABORTED
                opening = where is None and next_turn_number(self.session) > 1  # a closed turn may have left a plan
                own = seq = None
                if not opening:
                    if where is None:
                        self.begin()
                        self.standing = True
                        where = self._inside()
                    if not where.step_open:
                        where = own = self._begin_step(where)
                    seq = self._log_call(where, call, advertise=True)
            except BaseException:
                self._leave_call()
                raise
        try:
            if where is None or seq is None:
                return await self._opening(call, arguments, signal)
            return await self._run(where, seq, call, arguments, signal)
        finally:
            with self._guard:
                try:
                    if seq is not None:  # (an opening call closed its step and flushed itself)
                        self._end_own_step(own)
                        self.flush()
                finally:
                    self._leave_call()

    async def _opening(self, call: ToolCallRequest, arguments: Any, signal: AbortSignal | None) -> ToolResult:
        """``call`` when it needs a new standing turn after a closed one: the turn, its step and the ``tool/call``
        are written just before the tool's first append (:meth:`Session.preface`), or after it returns when it was
        accepted without appending, so a call refused before it logged anything leaves the log as it was.

        The tool runs once, on the live session, so a tool with effects outside the log has them once, and every
        observer (an invariant companion) sees the very events any call logs. A call that only an observer refuses
        (a veto of its first append) has opened the turn by then, since the ``turn/start`` must come first. The
        preface fires on the session's next append: while the tool awaits, another writer's append would open the
        turn too (the todo tool appends without awaiting; this writer's own turn boundaries wait for the call).
        """
        opened: list[tuple[OpenTurn, int]] = []

        def open_call() -> None:
            with self._guard:
                self.begin()
                self.standing = True
                where = self._begin_step(self._inside())
                opened.append((where, self._log_call(where, call, advertise=True)))

        parsed = parse_arguments(call.arguments) if arguments is PARSE else arguments
        session = self.session
        session.preface(open_call)
        result: ToolResult | None = None
        try:
            result = await self.tools.execute(call.name, parsed, self.agent, signal=signal, call_id=call.id)
        except Exception as exc:  # the harness failing, not the tool (the registry answers those)
            result = error_result(str(exc))
            raise
        except BaseException:  # cancelled while the tool ran
            result = _ABORTED
            raise
        finally:
            with self._guard:
                session.preface(None)
                if not opened and result is not None and not result.is_error:
                    open_call()  # accepted without logging anything: the call is logged as any accepted call
                if opened:
                    (where, seq), = opened
                    try:
                        if not self._settle(where, seq, call, result if result is not None else _ABORTED):
                            result = _ABORTED
                    finally:
                        self._end_own_step(where)
                        self.flush()
        return result

    def _end_own_step(self, own: OpenTurn | None) -> None:
        """Close the step a call opened for itself (``own``), unless the turn was closed around it meanwhile."""
        if own is not None and self.position() == own:
            self._end_step(own)

    async def _run(self, where: OpenTurn, seq: int, call: ToolCallRequest, arguments: Any,
                   signal: AbortSignal | None) -> ToolResult:
        """The tool of ``call``, logged at ``seq`` in the open step of ``where``; its answer, once it is logged.

        When the turn's end answered the call first (a call its run left behind), the caller is told that answer,
        ``Error: tool call aborted``, so what the model reads is what the log says."""
        parsed = parse_arguments(call.arguments) if arguments is PARSE else arguments
        result = _ABORTED
        try:
            result = await self.tools.execute(call.name, parsed, self.agent, signal=signal, call_id=call.id)
        except Exception as exc:  # the registry answers tool failures itself; this is the harness failing
            result = error_result(str(exc))
            raise
        except BaseException:  # cancelled while the tool ran: the call is still answered
            result = _ABORTED
            raise
        finally:
            answered = self._settle(where, seq, call, result)
        return result if answered else _ABORTED

    def _enter_call(self) -> None:
        """Count a call starting on this thread (guard held). While a turn's end waits for the calls in flight on
        other threads, a new call waits for that end first, unless its thread has calls in flight already (the
        end is waiting for them)."""
        me = threading.get_ident()
        if not self._in_flight.get(me):
            self._guard.wait_for(lambda: not self._quiescing, SETTLE_TIMEOUT_S)
        self._in_flight[me] = self._in_flight.get(me, 0) + 1

    def _leave_call(self) -> None:
        """Count a call of this thread finished (guard held), and wake a turn's end waiting for it."""
        me = threading.get_ident()
        left = self._in_flight[me] - 1
        if left:
            self._in_flight[me] = left
        else:
            del self._in_flight[me]
        self._guard.notify_all()

    def _quiesce(self) -> None:
        """Wait (guard held, released meanwhile) up to :data:`SETTLE_TIMEOUT_S` until no call is in flight on
        another thread. The calls in flight on this thread are tasks the closing block left behind: they cannot
        be waited for here, and the turn's end answers them."""
        me = threading.get_ident()
        if all(thread == me for thread in self._in_flight):
            return
        self._quiescing += 1
        try:
            self._guard.wait_for(lambda: all(thread == me for thread in self._in_flight), SETTLE_TIMEOUT_S)
        finally:
            self._quiescing -= 1
            self._guard.notify_all()

    def _log_call(self, where: OpenTurn, call: ToolCallRequest, *, advertise: bool = False) -> int:
        """Append ``call``'s ``tool/call`` in the open step of ``where``; its seq, pending until :meth:`_settle`.

        ``advertise``: the call comes from a model outside this harness (an MCP client's, a framework's), whose reply
        the log does not hold, so an ``assistant/message`` naming the call is logged first, as the agent loop logs
        its model's reply. DSH 0.2 refuses a log whose ``tool/call`` no assistant message advertised in its step."""
        if advertise:
            self._advertise(where, call)
        # (Fields that are not the strings their type says leave it unchecked: the append checks and copies it.)
        seq: int = self.session.append("tool/call", frozen_object(turn=where.turn, step=where.step, callId=call.id,
                                                                  name=call.name, arguments=call.arguments))["seq"]
        self._pending[seq] = (where.turn, where.step, call.id)
        return seq

    def _advertise(self, where: OpenTurn, call: ToolCallRequest) -> None:
        """The ``assistant/message`` of a model outside the harness that made ``call`` (see :meth:`_log_call`)."""
        block = frozen_object(type="tool-call", id=call.id, name=call.name, arguments=call.arguments)
        message = frozen_object(role="assistant", content=frozen_array((block,)), source=EXTERNAL_MODEL,
                                id=random_uuid())
        data = (frozen_object(turn=where.turn, step=where.step, message=message)
                if self.format_version == 0 else
                frozen_object(turn=where.turn, step=where.step, message=message, stream=frozen_array(())))
        self.session.append("assistant/message", data, surface_op="append")

    def _settle(self, where: OpenTurn, seq: int, call: ToolCallRequest, result: ToolResult) -> bool:
        """Answer the ``tool/call`` at ``seq`` with ``result``, unless the turn's end answered it already; whether
        this did."""
        with self._guard:
            if self._pending.pop(seq, None) is None:
                return False
            self._answer(where.turn, where.step, call.id, result, seq)
            return True

    def _answer(self, turn: int, step: int, call_id: str, result: ToolResult, call_seq: int) -> Event:
        """Append the ``tool/result`` surface event answering the ``tool/call`` at ``call_seq``."""
        if type(call_id) is not str:  # not the string its type says: checked and frozen, as the append would
            call_id = lossless_data("tool/result", call_id, "data.message.source.callId")
        source = frozen_object(kind="tool", callId=call_id)
        if self.format_version == 0:  # DSH 0.1's user message wrapping one tool-result block
            blocks = lossless_data("tool/result", result.content, "data.message.content[0].content")
            content = frozen_object(type="tool-result", toolCallId=call_id, content=blocks, isError=result.is_error)
            message = frozen_object(source=source, content=frozen_array((content,)), role="user", id=random_uuid())
        else:  # format v4: a tool-role message, keys in the order DSH 0.2 writes them
            blocks = lossless_data("tool/result", result.content, "data.message.content")
            message = frozen_object(role="tool", source=source, toolCallId=call_id, content=blocks,
                                    isError=result.is_error, id=random_uuid())
        data = (frozen_object(turn=turn, step=step, message=message) if result.error is None else
                frozen_object(turn=turn, step=step, message=message,
                              error=lossless_data("tool/result", result.error, "data.error")))
        return self.session.append("tool/result", data, surface_op="append", source_event_seqs=(call_seq,))

    def report_error(self, error: BaseException) -> None:
        """Tell the session's store that this agent's turn failed with ``error`` (DSH's ``agent/error``), at the
        turn and step where it stands; written before the failed turn's ``turn/end``, as DSH does."""
        store = self.session.store
        if store is None:
            return
        with self._guard:
            where = self.position()
            turn, step = (where.turn, where.step) if where is not None else (self.owned or 0, 0)
            store.agent_error(self.agent.id, self.session, turn, step, error)

    # Durability and lifetime ---------------------------------------------------------------------------------

    def flush(self) -> None:
        """Make everything logged so far durable (a no-op without persistence)."""
        if self.persistence is not None:
            with self._guard:
                self.persistence.flush(self.session.id)

    def close(self) -> None:
        """The front door is done with the session: its standing turn ends ``completed`` (a run's turn still open
        ends ``aborted``/``disposed``), then the log is flushed and released and the live session closed. Calls
        still running on other threads are waited for first (as at a turn's end)."""
        with self._guard:
            self._quiesce()
            if self.owned is not None:
                self.end(completed() if self.standing else aborted("disposed"))
            if self.persistence is not None:
                self.persistence.release(self.session.id)
            if self.sessions is not None:
                self.sessions.close(self.session.id)


class TurnScope:
    """One turn around a block of work, for both ``with`` and ``async with``; entering gives the turn number.

    Entering opens a turn (ending the writer's standing turn first: new work is a new turn). With ``join`` (the
    default), a turn already open that is not the writer's standing one is joined instead, a nested run's or a
    host's, and left open on exit. Exiting closes the turn this scope opened with :attr:`reason` (``completed``
    unless the block set another) or, when the block raised, with the reason its exception earned
    (:func:`turn_end_reason`). Re-entering a scope that is already open is an error.
    """

    def __init__(self, turns: Turns, *, join: bool = True) -> None:
        self.turns = turns
        self.join = join
        self.turn: int | None = None
        """The turn number this scope opened or joined (``None`` outside the block)."""
        self.opened = False
        """Whether this scope wrote the ``turn/start`` (and so writes the ``turn/end``)."""
        self.reason: Reason | None = None
        """The ``turn/end`` reason the block earned, when it is not ``completed`` and the block did not raise."""

    def open(self) -> int:
        if self.turn is not None:
            raise RuntimeError("this turn scope is already open")
        turns = self.turns
        with turns._guard:
            where = turns.position()
            standing = where is not None and turns.standing and where.turn == turns.owned
            if self.join and where is not None and not standing:
                self.turn = where.turn
            else:
                self.turn = turns.begin()
                self.opened = True
            return self.turn

    def close(self, exc: BaseException | None = None) -> None:
        if self.turn is None:
            return
        if self.opened:
            reason = turn_end_reason(exc) if exc is not None else self.reason or completed()
            if exc is not None and reason["kind"] == "error":
                self.turns.report_error(exc)
            self.turns.end(reason)
        self.turn = None
        self.opened = False

    def __enter__(self) -> int:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(exc)

    async def __aenter__(self) -> int:
        return self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close(exc)
