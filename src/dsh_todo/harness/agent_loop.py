"""The agent loop (DSH's ``dsh-agent-loop``): turns, steps, model requests and tool calls, all on the log.

A prompt is one turn. Each step derives the model's history from the log alone (so a resumed session continues
exactly where its log stops), sends it with ``tools.schemas()``, logs the assistant message, then runs its tool
calls one at a time in the model's order: every tool here is exclusive, an ordering barrier (SPEC §1.2). The turn,
step and call events themselves (``tool/call`` → whatever the tool appends → ``tool/result``), aborts and flushing
are written by :mod:`dsh_todo.harness.turns`, as for every other front door. The turn closes with ``turn/end`` and a
reason: completed, aborted (the signal, or the task running it cancelled), error or max-tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_todo.harness.agent import Agent
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.llm.base import Model, ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.llm.chat import chat_messages
from dsh_todo.harness.llm.history import AssistantTurn, HistoryEntry, ToolOutcome, UserText
from dsh_todo.harness.session import Session
from dsh_todo.harness.tool_results import answers
from dsh_todo.harness.tools.registry import AbortSignal, ToolRegistry
from dsh_todo.harness.turns import Durable, Turns, TurnScope, aborted, completed, parse_arguments
from dsh_todo.ids import random_uuid

__all__ = ["DEFAULT_SYSTEM", "AgentLoop", "EventHook", "TurnOutcome", "derive_history", "derive_messages",
           "parse_arguments"]

DEFAULT_SYSTEM = (
    "You are a capable software agent. For multi-step work, keep a todo list with the todo_write tool and "
    "update it as you go."
)


def _text_of(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "".join(b.get("text", "") for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")


def derive_history(events: Iterable[Event]) -> list[HistoryEntry]:
    """The conversation a model sees, from surface events only (``todo/write`` never becomes a message), in no
    wire's spelling: each adapter renders it (:mod:`dsh_todo.harness.llm.history`).

    A ``tool/result`` message is read in either shape a log holds (:func:`~dsh_todo.harness.tool_results.answers`)."""
    history: list[HistoryEntry] = []
    offered: set[str] = set()  # tool results answer only calls a model made (MCP logs hold calls of no model)
    for event in events:
        kind = event["type"]
        data = event["data"]
        if kind == "user/message":
            history.append(UserText(_text_of(data.get("content"))))
        elif kind == "assistant/message":
            blocks = data.get("message", {}).get("content", [])
            calls = tuple(ToolCallRequest(b["id"], b["name"], b["arguments"])
                          for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool-call")
            offered.update(call.id for call in calls)
            history.append(AssistantTurn(_text_of(blocks), calls))
        elif kind == "tool/result":
            history.extend(ToolOutcome(answer.call_id, _text_of(answer.content), answer.is_error)
                           for answer in answers(data.get("message")) if answer.call_id in offered)
    return history


def derive_messages(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The history as OpenAI chat messages (:func:`derive_history` rendered by
    :func:`~dsh_todo.harness.llm.chat.chat_messages`)."""
    return chat_messages(derive_history(events))


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
                 max_steps: int = 50, persistence: Durable | None = None) -> None:
        self.tools = tools
        self.model = model
        self.system = system
        self.max_steps = max_steps
        self.persistence = persistence
        """Where each call and the closed turn are flushed (``ctx.get("session_persistence")``); ``None``: nowhere."""

    async def run_turn(self, agent: Agent, prompt: str, *, signal: AbortSignal | None = None) -> TurnOutcome:
        session = agent.session
        turns = Turns(self.tools, agent, persistence=self.persistence)
        scope = TurnScope(turns, join=False)
        final_text = ""
        step = 0
        with scope as turn:  # a block that raises (a cancelled task) still closes the turn, ``aborted`` or ``error``
            while True:
                if signal is not None and signal.aborted:
                    scope.reason = aborted()
                    break
                if step >= self.max_steps:
                    scope.reason = {"kind": "error", "error": {"name": "MaxStepsError",
                                                               "message": f"the turn exceeded {self.max_steps} steps"}}
                    break
                step = turns.begin_step()
                if step == 1:
                    self._log_system(session, turn, step)
                    session.append("user/message", {"content": [{"type": "text", "text": prompt}],
                                                     "source": {"kind": "user"}, "role": "user",
                                                     "id": random_uuid()}, surface_op="append")
                request = ModelRequest(derive_history(session.events), self.tools.schemas(), system=self.system)
                try:
                    reply = await self.model.complete(request)
                except ModelError as exc:
                    turns.report_error(exc)
                    turns.end_step()
                    scope.reason = {"kind": "error", "error": {"name": "ModelError", "message": str(exc)}}
                    break
                self._log_assistant(session, turn, step, reply)
                if reply.text:
                    final_text = reply.text
                for call in reply.tool_calls:
                    await turns.call(call, signal=signal)
                turns.end_step()
                if reply.finish_reason == "length":
                    scope.reason = {"kind": "max-tokens"}
                    break
                if not reply.tool_calls:
                    break
        return TurnOutcome(turn, scope.reason or completed(), final_text, step)

    def _log_system(self, session: Session, turn: int, step: int) -> None:
        """Log the system prompt as a ``system/message`` (format v4 keeps it in the history, as DSH 0.2 does) when
        the session has none yet or its last one says something else; v0 logs never held it."""
        if not self.system or session.format_version == 0:
            return
        last = next((event for event in reversed(session.events) if event["type"] == "system/message"), None)
        if last is not None and _text_of(last["data"].get("message", {}).get("content")) == self.system:
            return
        session.append("system/message", {
            "turn": turn, "step": step,
            "message": {"role": "system", "content": [{"type": "text", "text": self.system}],
                        "source": {"kind": "system-prompt"}, "id": random_uuid()},
        }, surface_op="append")

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
                        "id": random_uuid()},
        }
        if reply.usage is not None:
            data["usage"] = reply.usage
        if session.format_version != 0:
            data["stream"] = []  # v4 keeps a reply's stream in the message; this loop records none
        session.append("assistant/message", data, surface_op="append")
