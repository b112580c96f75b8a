"""The agent loop (DSH's ``dsh-agent-loop``): turns, steps, model requests and tool calls, all on the log.

A prompt opens a turn. Each step derives the model's history from the log alone (so a resumed session continues
exactly where its log stops), sends it with ``tools.schemas()``, logs the assistant message, then runs its tool
calls one at a time in the model's order: every tool here is exclusive, an ordering barrier (SPEC §1.2). The log
order for one call is ``tool/call`` → whatever the tool appends (``todo/write``) → ``tool/result``. The turn closes
with ``turn/end`` and a reason: completed, aborted, error or max-tokens.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_todo.harness.agent import Agent
from dsh_todo.harness.llm.base import Model, ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.session import Event, Session
from dsh_todo.harness.tools.registry import AbortSignal, ToolRegistry, ToolResult
from dsh_todo.harness.tools.wire import function_tool
from dsh_todo.jsonutil import loads

DEFAULT_SYSTEM = (
    "You are a capable software agent. For multi-step work, keep a todo list with the todo_write tool and "
    "update it as you go."
)


def parse_arguments(raw: str) -> Any:
    """The reference's rule (SPEC §1.4): empty → ``{}``; not JSON → the raw string (validation then refuses it)."""
    if raw == "":
        return {}
    try:
        return loads(raw)
    except ValueError:
        return raw


def _text_of(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "".join(b.get("text", "") for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")


def derive_messages(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The chat history a model sees, from surface events only: ``todo/write`` never becomes a message."""
    messages: list[dict[str, Any]] = []
    offered: set[str] = set()  # tool results answer only calls a model made (MCP logs hold calls of no model)
    for event in events:
        kind = event["type"]
        data = event["data"]
        if kind == "user/message":
            messages.append({"role": "user", "content": _text_of(data.get("content"))})
        elif kind == "assistant/message":
            message = data.get("message", {})
            blocks = message.get("content", [])
            calls = [{"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": b["arguments"]}}
                     for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool-call"]
            entry: dict[str, Any] = {"role": "assistant", "content": _text_of(blocks) or None}
            if calls:
                entry["tool_calls"] = calls
                offered.update(call["id"] for call in calls)
            messages.append(entry)
        elif kind == "tool/result":
            message = data.get("message", {})
            for block in message.get("content", []):
                if (isinstance(block, Mapping) and block.get("type") == "tool-result"
                        and block.get("toolCallId") in offered):
                    messages.append({"role": "tool", "tool_call_id": block.get("toolCallId"),
                                     "content": _text_of(block.get("content"))})
    return messages


def next_turn_number(session: Session) -> int:
    turns = 0
    for event in session.events:
        if event["type"] == "turn/start":
            turns = max(turns, int(event["data"].get("turn", 0)))
    return turns + 1


_PARSE: Any = object()


async def run_tool_call(tools: ToolRegistry, agent: Agent, turn: int, step: int, call: ToolCallRequest, *,
                        signal: AbortSignal | None = None, arguments: Any = _PARSE) -> ToolResult:
    """Run one tool call on the agent's log, as the loop does (SPEC §4.3): ``tool/call`` with the raw argument
    string, then whatever the tool appends, then ``tool/result`` pointing back at the call.

    The caller owns the enclosing turn and step. ``arguments`` is the already-parsed value when the caller received
    it parsed (an MCP client's JSON object); by default the raw string is parsed by the reference's rules.
    """
    session = agent.session
    call_event = session.append("tool/call", {"turn": turn, "step": step, "callId": call.id, "name": call.name,
                                              "arguments": call.arguments})
    parsed = parse_arguments(call.arguments) if arguments is _PARSE else arguments
    result = await tools.execute(call.name, parsed, agent, signal=signal, call_id=call.id)
    log_tool_result(session, turn, step, call.id, result, call_event["seq"])
    return result


def log_tool_result(session: Session, turn: int, step: int, call_id: str, result: ToolResult, call_seq: int) -> Event:
    """Append the ``tool/result`` surface event answering the ``tool/call`` at ``call_seq``."""
    data: dict[str, Any] = {
        "turn": turn, "step": step,
        "message": {"source": {"kind": "tool", "callId": call_id},
                    "content": [{"type": "tool-result", "toolCallId": call_id, "content": result.content,
                                 "isError": result.is_error}],
                    "role": "user", "id": str(uuid.uuid4())},
    }
    if result.error is not None:
        data["error"] = result.error
    return session.append("tool/result", data, surface_op="append", source_event_seqs=[call_seq])


@dataclass(frozen=True)
class TurnOutcome:
    turn: int
    reason: dict[str, Any]
    text: str
    steps: int


EventHook = Callable[[Event], object]


class AgentLoop:
    """Drives one model over one agent's session. Stateless between turns: the log is the state."""

    def __init__(self, tools: ToolRegistry, model: Model, *, system: str | None = DEFAULT_SYSTEM,
                 max_steps: int = 50) -> None:
        self.tools = tools
        self.model = model
        self.system = system
        self.max_steps = max_steps

    async def run_turn(self, agent: Agent, prompt: str, *, signal: AbortSignal | None = None) -> TurnOutcome:
        session = agent.session
        turn = next_turn_number(session)
        session.append("turn/start", {"turn": turn})
        final_text = ""
        step = 0
        reason: dict[str, Any] = {"kind": "completed"}
        while True:
            if signal is not None and signal.aborted:
                reason = {"kind": "aborted", "reason": {"kind": "user"}}
                break
            if step >= self.max_steps:
                reason = {"kind": "error", "error": {"name": "MaxStepsError",
                                                     "message": f"the turn exceeded {self.max_steps} steps"}}
                break
            step += 1
            session.append("step/start", {"turn": turn, "step": step})
            if step == 1:
                session.append("user/message", {"content": [{"type": "text", "text": prompt}],
                                                 "source": {"kind": "user"}, "role": "user",
                                                 "id": str(uuid.uuid4())}, surface_op="append")
            request = ModelRequest(messages=derive_messages(session.events),
                                   tools=[function_tool(s) for s in self.tools.schemas()], system=self.system)
            try:
                reply = await self.model.complete(request)
            except ModelError as exc:
                session.append("step/end", {"turn": turn, "step": step})
                reason = {"kind": "error", "error": {"name": "ModelError", "message": str(exc)}}
                break
            self._log_assistant(session, turn, step, reply)
            if reply.text:
                final_text = reply.text
            for call in reply.tool_calls:
                await self._run_call(agent, turn, step, call, signal)
            session.append("step/end", {"turn": turn, "step": step})
            if reply.finish_reason == "length":
                reason = {"kind": "max-tokens"}
                break
            if not reply.tool_calls:
                break
        session.append("turn/end", {"turn": turn, "reason": reason})
        return TurnOutcome(turn, reason, final_text, step)

    def _log_assistant(self, session: Session, turn: int, step: int, reply: ModelReply) -> None:
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        blocks.extend({"type": "tool-call", "id": c.id, "name": c.name, "arguments": c.arguments}
                      for c in reply.tool_calls)
        data: dict[str, Any] = {
            "turn": turn, "step": step,
            "message": {"role": "assistant", "content": blocks,
                        "source": {"kind": "model", "provider": self.model.provider, "model": self.model.model},
                        "id": str(uuid.uuid4())},
        }
        if reply.usage is not None:
            data["usage"] = reply.usage
        session.append("assistant/message", data, surface_op="append")

    async def _run_call(self, agent: Agent, turn: int, step: int, call: ToolCallRequest,
                        signal: AbortSignal | None) -> ToolResult:
        return await run_tool_call(self.tools, agent, turn, step, call, signal=signal)
