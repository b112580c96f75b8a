"""One MCP connection's agent session: the connection is one turn, each tool call one step of it.

An MCP client is somebody else's agent loop, so this side sees no prompts and no model turns, only tool calls. To
keep the log in DSH's shape (and readable by ``dsh-todo plan``), each call is written as the agent loop writes one,
in a step of its own: ``step/start`` → ``tool/call`` (the raw argument JSON) → ``todo/write`` → ``tool/result`` →
``step/end``. The turn around them is the connection's: its first call writes ``turn/start``, and ``turn/end``
(``completed``) is written when the client goes away; a server that dies instead leaves the turn open, and the next
load closes it as ``interrupted`` (DSH's crash recovery).

Why one turn and not one per call: DSH's standing plan is the last ``todo/write`` with no later ``turn/start``, so a
call that opened a turn of its own cleared the plan before it ran, and a rejected call (which writes none) left the
client's plan blank in ``dsh-todo plan``, ``watch`` and the web page. Within one turn the plan changes only when a
call is accepted; a cancelled call gets its ``Error: tool call aborted`` result and ends its step, not the turn
(docs/decisions/0005). The turn and call rules themselves are :mod:`dsh_todo.harness.turns`'.

No MCP import here: the SDK-facing half lives in :mod:`dsh_todo.carriers.mcp.server`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Final

from dsh_todo.harness import Agent, Context, Session
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.tools.registry import ToolResult, error_result
from dsh_todo.harness.turns import Turns
from dsh_todo.ids import random_call_id, random_uuid

log = logging.getLogger("dsh_todo.mcp")

ABSENT: Any = object()
"""``arguments`` that the client left out (or sent as ``null``): logged as ``""`` and executed as ``{}``."""

SESSION_META_KEY: Final = "dsh-todo/sessionId"
"""``_meta`` key on every call result: the DSH session id its events were written to (``dsh-todo plan`` reads it)."""


def call_result(result: ToolResult, session_id: str) -> dict[str, Any]:
    """The MCP ``CallToolResult`` for one answered call, as wire JSON data: the registry's text blocks, ``isError``,
    the canonical value as ``structuredContent`` (accepted calls only) and the session id under ``_meta``.

    Keys in the order the SDK's result surface writes them (``_meta``, ``content``, ``isError``,
    ``structuredContent``; ``text`` before ``type``), so the stdio server's direct answers are byte-identical to the
    SDK's (:mod:`.direct`); the structured value may be the frozen canonical one (dict and list subclasses, which
    the canonical encoder writes as plain JSON)."""
    answer: dict[str, Any] = {"_meta": {SESSION_META_KEY: session_id},
                              "content": [{"text": block["text"], "type": "text"} for block in result.content],
                              "isError": result.is_error}
    if not result.is_error and result.value is not None:
        answer["structuredContent"] = result.value
    return answer


def raw_argument_text(arguments: Any) -> str:
    """The argument string ``tool/call`` records: the client's JSON value, compact, or ``""`` when absent. Numbers
    JSON cannot carry losslessly are written as the client sent them (``1e400``), never as ``null``."""
    if arguments is ABSENT:
        return ""
    from dsh_todo.carriers.mcp.wire import raw_json

    return raw_json(arguments)


class CallSession:
    """The agent session behind one MCP connection, created on its first call.

    Calls are serialised (one step at a time, in arrival order) so two concurrent requests can never interleave
    their events. With persistence mounted, every call is flushed before its result is returned, so what a client
    was told is already durable; :meth:`close` ends the turn and releases the writer lock.
    """

    def __init__(self, ctx: Context, *, cwd: str | None = None, session_id: str | None = None) -> None:
        self.ctx = ctx
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.session_id = session_id or random_uuid()
        self._turns: Turns | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def session(self) -> Session | None:
        """The live session, or ``None`` before the first call."""
        return self._turns.session if self._turns is not None else None

    def _open(self) -> Turns:
        if self._turns is None:
            session = self.ctx.sessions.create(self.session_id, cwd=self.cwd)
            self._turns = Turns.of(self.ctx, Agent(self.session_id, session))
        return self._turns

    async def call(self, name: str, arguments: Any = ABSENT) -> ToolResult:
        """Run one call as the next step of the connection's turn; the result is exactly what the native
        ``ctx.tools.execute`` answers."""
        if self._closed:
            raise RuntimeError(f'MCP session "{self.session_id}" is closed')
        async with self._lock:
            call = ToolCallRequest(random_call_id("call_mcp_"), name, raw_argument_text(arguments))
            try:
                return await self._open().call_alone(call, arguments={} if arguments is ABSENT else arguments)
            except Exception as exc:  # the harness failed (not the tool: the registry answers those itself)
                # The client still gets one answer, the one the log holds (``Turns`` logged ``Error: <exc>`` and
                # closed the step), rather than a JSON-RPC error with code 0 and the exception's text.
                log.warning("MCP call %s failed: %s: %s", call.id, type(exc).__name__, exc)
                return error_result(str(exc) or type(exc).__name__)

    def close(self) -> None:
        """The client went away: end the turn, flush and let go of the session. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._turns is not None:
            self._turns.close()
