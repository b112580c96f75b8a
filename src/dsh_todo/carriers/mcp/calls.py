"""One MCP connection's agent session: each tool call becomes one turn on its log.

An MCP client is somebody else's agent loop, so this side has no model turns of its own. To keep the log in DSH's
shape (and readable by ``dsh-todo plan``), every call is written as the agent loop would write it, inside a turn
and a step of its own: ``turn/start`` → ``step/start`` → ``tool/call`` (the raw argument JSON) → ``todo/write`` →
``tool/result`` → ``step/end`` → ``turn/end``. The standing plan therefore follows DSH's rule too: the next call's
``turn/start`` clears it until that call writes again.

No MCP import here: the SDK-facing half lives in :mod:`dsh_todo.carriers.mcp.server`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

from dsh_todo.harness import Agent, Context, Session
from dsh_todo.harness.agent_loop import log_tool_result, next_turn_number, run_tool_call
from dsh_todo.harness.errors import AbortError
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.tools.registry import ToolResult, error_result
from dsh_todo.jsonutil import dumps

ABSENT: Any = object()
"""``arguments`` that the client left out (or sent as ``null``): logged as ``""`` and executed as ``{}``."""


def raw_argument_text(arguments: Any) -> str:
    """The argument string ``tool/call`` records: the client's JSON value, compact, or ``""`` when absent."""
    return "" if arguments is ABSENT else dumps(arguments)


class CallSession:
    """The agent session behind one MCP connection, created on its first call.

    Calls are serialised (one turn at a time, in arrival order) so two concurrent requests can never interleave
    their events. With persistence mounted, every call is flushed before its result is returned, so what a client
    was told is already durable; :meth:`close` releases the writer lock.
    """

    def __init__(self, ctx: Context, *, cwd: str | None = None, session_id: str | None = None) -> None:
        self.ctx = ctx
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.session_id = session_id or str(uuid.uuid4())
        self._agent: Agent | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def session(self) -> Session | None:
        """The live session, or ``None`` before the first call."""
        return self._agent.session if self._agent is not None else None

    def _open(self) -> Agent:
        if self._agent is None:
            session = self.ctx.sessions.create(self.session_id, cwd=self.cwd)
            self._agent = Agent(self.session_id, session)
        return self._agent

    async def call(self, name: str, arguments: Any = ABSENT) -> ToolResult:
        """Run one call as one turn; the result is exactly what the native ``ctx.tools.execute`` answers."""
        if self._closed:
            raise RuntimeError(f'MCP session "{self.session_id}" is closed')
        async with self._lock:
            agent = self._open()
            session = agent.session
            turn = next_turn_number(session)
            session.append("turn/start", {"turn": turn})
            session.append("step/start", {"turn": turn, "step": 1})
            reason: dict[str, Any] = {"kind": "completed"}
            call = ToolCallRequest(f"call_mcp_{uuid.uuid4().hex[:24]}", name, raw_argument_text(arguments))
            call_seq = session.seq
            try:
                result = await run_tool_call(self.ctx.tools, agent, turn, 1, call,
                                             arguments={} if arguments is ABSENT else arguments)
            except Exception as exc:
                reason = {"kind": "error", "error": {"name": type(exc).__name__, "message": str(exc)}}
                raise
            except BaseException:  # the client cancelled the request while the tool ran
                reason = {"kind": "aborted", "reason": {"kind": "user"}}
                if session.seq > call_seq and session.events[-1]["type"] != "tool/result":
                    aborted = error_result("tool call aborted", AbortError("tool call aborted").info())
                    log_tool_result(session, turn, 1, call.id, aborted, call_seq)
                raise
            finally:
                # Even a cancelled request leaves a closed turn behind: the log never ends mid-turn.
                session.append("step/end", {"turn": turn, "step": 1})
                session.append("turn/end", {"turn": turn, "reason": reason})
                self._flush()
            return result

    def _flush(self) -> None:
        persistence = self.ctx.get("session_persistence")
        if persistence is not None:
            persistence.flush(self.session_id)

    def close(self) -> None:
        """Flush and let go of the session (the client went away). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._agent is None:
            return
        persistence = self.ctx.get("session_persistence")
        if persistence is not None:
            persistence.release(self.session_id)
        self.ctx.sessions.close(self.session_id)
