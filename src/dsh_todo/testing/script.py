"""Scripting the model: replies built in code, and one real agent-loop turn played with them.

A scripted reply carries the raw ``arguments`` string a model would send, so a test can script a malformed call as
easily as a good one; the loop, the registry and the log are the real ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_todo.harness.agent import Agent
from dsh_todo.harness.agent_loop import AgentLoop, TurnOutcome
from dsh_todo.harness.context import Context
from dsh_todo.harness.llm import ModelReply, ScriptedModel, ToolCallRequest
from dsh_todo.harness.persistence.contract import SESSION_PERSISTENCE
from dsh_todo.harness.session import Session
from dsh_todo.harness.tools.registry import TOOLS
from dsh_todo.jsonutil import dumps

__all__ = ["reply", "scripted_turn", "todo_call"]


def todo_call(call_id: str, *items: tuple[str, str]) -> ToolCallRequest:
    """A ``todo_write`` call whose list is ``items``, each ``(content, status)``, as compact JSON."""
    return ToolCallRequest(call_id, "todo_write", dumps({"todos": [{"content": c, "status": s} for c, s in items]}))


def reply(text: str = "", *calls: ToolCallRequest) -> ModelReply:
    """One model reply: ``text`` and, if any, tool ``calls`` (then the loop runs them and asks again)."""
    return ModelReply(text, list(calls), "tool_calls" if calls else "stop")


async def scripted_turn(ctx: Context, session: Session, prompt: str, replies: Sequence[ModelReply], *,
                        agent_id: str = "test") -> TurnOutcome:
    """Play one turn of the agent loop on ``session`` with a model that answers ``replies`` in order.

    Raises :class:`AssertionError` if the loop left replies unused: the script and the loop disagree, which is
    what a test wants to hear about. Calls are flushed to the context's persistence, if it has one.
    """
    model = ScriptedModel(list(replies))
    loop = AgentLoop(ctx[TOOLS], model, persistence=ctx.get(SESSION_PERSISTENCE))
    outcome = await loop.run_turn(Agent(agent_id, session), prompt)
    if model.remaining:
        raise AssertionError(f"the turn ended with {model.remaining} scripted replies unused")
    return outcome
