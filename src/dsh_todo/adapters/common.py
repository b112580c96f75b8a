"""What every framework adapter shares: ``todo_write`` bound to one agent session of ours.

An adapter is only a translation. The framework hands over the model's argument text, :meth:`TodoBinding.call`
runs it through the same registry as the native loop (``parse_arguments`` then ``ctx.tools.execute``), and the
adapter gives ``result.text`` back to the framework unchanged. So the description, the parameters schema, every
success and error text and the ``todo/write`` event are the native ones: no rule is implemented twice.

How a framework's calls land in the log
---------------------------------------
A framework run has no DSH turns of its own, but ``todo/write`` must sit inside an open turn (SPEC §2.4, §5.3), and
the standing plan is "the last ``todo/write`` with no later ``turn/start``" (SPEC §5.4). Each call is written as
the agent loop writes one, ``step/start`` → ``tool/call`` (the raw argument text) → ``todo/write`` →
``tool/result`` → ``step/end``, by :mod:`dsh_todo.harness.turns`, and the turn around it is chosen like this:

* **One turn per framework run** is the intended shape: one user request is one DSH turn, so the plan stands
  through every call of the run and the next run's ``turn/start`` clears it, as in DSH. :meth:`TodoBinding.turn`
  opens that turn around a run (``with todos.turn(): ...``; closed with ``completed``, ``error`` or ``aborted`` by
  how the block ends). The pydantic-ai capability does it by itself, from pydantic-ai's own ``wrap_run`` hook.
* **Calls outside any turn share the binding's standing turn**: the first one opens it and it stays open for the
  ones that follow, until the next ``turn()`` begins (it then ends ``completed``) or the binding is closed. So a
  rejected or cancelled call never writes a ``turn/start``, and the plan changes only when a call is accepted.
  The one call that must open a turn is the first after a closed one (a resumed session, a finished ``turn()``):
  accepted, its ``turn/start`` clears the old plan as every new turn does in DSH; refused, it is answered without
  opening the turn, so nothing is appended and the old plan stands (``Turns.call_alone``).
* A call that finds a turn already open (``turn()``, or a host that opened one itself) joins it as the next step.

Calls on one binding are serialised: the tool is ``exclusive`` in DSH (an ordering barrier), and frameworks run
tool calls concurrently, so their events would otherwise interleave. Frameworks also run them in more than one
place: on the run's event loop, on a thread of their own with an event loop of its own (Google ADK's tool thread
pool, one ``asyncio.run`` per call), or synchronously on a worker thread (LangChain's ``invoke`` on its executor;
the call then runs on a private loop). So the calls share a :class:`~dsh_todo.adapters.lock.CallLock`, which any
coroutine on any loop in any thread can wait on without blocking its loop, first come first served.

A run's turn may end while its calls are still on their threads (the run's task was cancelled; a thread cannot be).
A call already running then ends inside the turn with its real answer (the turn's end waits for it, see
:class:`~dsh_todo.harness.turns.Turns`); a call made during the run that was still waiting for its predecessors is
answered ``Error: tool call aborted`` and logged nowhere, as DSH never starts a call of an aborted turn. A call made
after the turn ended takes a turn as any call outside a run does. With persistence mounted, every call is flushed
before its text is returned, so what the model was told is durable.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from dsh_todo.adapters.lock import CallLock
from dsh_todo.harness.agent import Agent
from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import SessionNotFoundError
from dsh_todo.harness.frozen import thaw
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.persistence.contract import SESSION_PERSISTENCE
from dsh_todo.harness.session import SESSIONS, Session
from dsh_todo.harness.tools.registry import TOOLS, ToolDefinition, ToolResult
from dsh_todo.harness.turns import Turns, TurnScope, open_turn, parse_arguments, turn_end_reason
from dsh_todo.ids import random_call_id, random_uuid
from dsh_todo.jsonutil import dumps
from dsh_todo.standard import open_runtime
from dsh_todo.tool_todo.description import TOOL_NAME
from dsh_todo.tool_todo.rules import standing_plan as _fold_plan

T = TypeVar("T")

__all__ = ["TOOL_NAME", "TodoBinding", "TurnScope", "bind_todo", "open_turn", "standing_plan", "turn_end_reason"]


def standing_plan(session: Session) -> list[dict[str, Any]] | None:
    """The session's standing plan (SPEC §5.4) as plain, editable data; ``None`` when no plan stands."""
    plan = _fold_plan(session.events)
    return None if plan is None else list(thaw(plan))


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, even when this thread is already running an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix="dsh-todo-call") as pool:
        return pool.submit(asyncio.run, coro).result()


class TodoBinding:
    """``todo_write`` bound to one agent session: what every adapter calls.

    ``name``, ``description`` and ``parameters`` are exactly what the native tool sends to a model;
    :meth:`call` runs one call and returns the registry's :class:`ToolResult` (``.text`` is the model-visible
    text, ``.is_error`` its flag, ``.value`` the canonical ``{todos, counts}``).
    """

    def __init__(self, ctx: Context, session: Session, *, agent_id: str | None = None,
                 owns_context: bool = False) -> None:
        self.ctx = ctx
        self.session = session
        self.agent = Agent(agent_id or session.id, session)
        self.turns = Turns.of(ctx, self.agent)
        """The writer of this binding's turns, steps and calls (shared by every scope and call on the binding)."""
        self._owns_context = owns_context
        self._lock = CallLock()
        self._closed = False

    # What the model sees ------------------------------------------------------------------------------------

    def definition(self) -> ToolDefinition:
        definition = self.ctx[TOOLS].get(TOOL_NAME)
        if definition is None:
            raise RuntimeError(f"{TOOL_NAME} is not mounted in this context (boot @deepseek-ai/dsh-tool-todo)")
        return definition

    @property
    def name(self) -> str:
        return TOOL_NAME

    @property
    def description(self) -> str:
        return self.definition().description

    @property
    def parameters(self) -> dict[str, Any]:
        """The compiled parameters schema as a fresh plain dict (frameworks may edit what they are given)."""
        return dict(thaw(self.definition().parameters))

    # What the log says --------------------------------------------------------------------------------------

    @property
    def plan(self) -> list[dict[str, Any]] | None:
        """The standing plan of this binding's session (:func:`standing_plan`)."""
        return standing_plan(self.session)

    def turn(self) -> TurnScope:
        """A scope that makes one framework run one DSH turn: ``with todos.turn(): run the agent``."""
        return TurnScope(self.turns)

    # Calls ---------------------------------------------------------------------------------------------------

    async def call(self, raw_arguments: str, *, call_id: str | None = None) -> ToolResult:
        """One call from the model's raw argument text, parsed by the reference's rule (SPEC §1.4)."""
        return await self._call(raw_arguments, parse_arguments(raw_arguments), call_id)

    async def call_value(self, arguments: Any, *, call_id: str | None = None) -> ToolResult:
        """One call whose arguments a framework already parsed from JSON (logged as compact JSON)."""
        return await self._call(dumps(arguments), arguments, call_id)

    def call_sync(self, raw_arguments: str, *, call_id: str | None = None) -> ToolResult:
        """:meth:`call` for sync code."""
        return _run_coroutine(self.call(raw_arguments, call_id=call_id))

    def call_value_sync(self, arguments: Any, *, call_id: str | None = None) -> ToolResult:
        """:meth:`call_value` for sync code."""
        return _run_coroutine(self.call_value(arguments, call_id=call_id))

    async def _call(self, raw: str, arguments: Any, call_id: str | None) -> ToolResult:
        if self._closed:
            raise RuntimeError(f'the todo binding of session "{self.session.id}" is closed')
        call = ToolCallRequest(call_id or random_call_id(), TOOL_NAME, raw)
        within = self.turns.run_turn()  # the run this call belongs to, before it waits for the calls before it
        async with self._lock:
            return await self.turns.call_alone(call, arguments=arguments, within=within)

    # Lifetime ------------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Make everything logged so far durable (a no-op without persistence)."""
        self.turns.flush()

    def close(self) -> None:
        """End the standing turn, flush, release the session (and the runtime, when :func:`bind_todo` booted it).
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.turns.close()
        if self._owns_context:
            self.ctx.dispose()

    def __enter__(self) -> TodoBinding:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<TodoBinding session={self.session.id!r} seq={self.session.seq}>"


def bind_todo(ctx: Context | None = None, *, session: Session | str | None = None,
              root: str | Path | None = None, allow_parallel: bool = True, agent_id: str | None = None,
              cwd: str | None = None) -> TodoBinding:
    """``todo_write`` bound to a session, ready for an adapter.

    Without ``ctx``, boots the standard runtime (:func:`dsh_todo.standard.open_runtime`: in memory, or persisted in
    DSH's format under ``root``) with ``allowParallelInProgress = allow_parallel``; closing the binding disposes
    it. ``session`` is a live :class:`Session`, or an id: a live or persisted session with that id is resumed,
    otherwise a new one is created (a fresh uuid when omitted) with ``cwd`` (default: the current directory) in
    its header, which is also where DSH's layout files it under ``root``.
    """
    owns = ctx is None
    if ctx is None:
        ctx = open_runtime(root, allow_parallel=allow_parallel)
    elif root is not None:
        raise ValueError("pass root only when bind_todo boots the runtime (without ctx)")
    try:
        live = session if isinstance(session, Session) else _open_session(ctx, session, cwd)
    except BaseException:
        if owns:
            ctx.dispose()
        raise
    return TodoBinding(ctx, live, agent_id=agent_id, owns_context=owns)


def _open_session(ctx: Context, session_id: str | None, cwd: str | None) -> Session:
    session_id = session_id or random_uuid()
    live = ctx[SESSIONS].get(session_id)
    if live is not None:
        return live
    persistence = ctx.get(SESSION_PERSISTENCE)
    if persistence is not None:
        try:
            loaded: Session = persistence.load(session_id)
            return loaded
        except SessionNotFoundError:
            pass
    return ctx[SESSIONS].create(session_id, cwd=cwd if cwd is not None else os.getcwd())
