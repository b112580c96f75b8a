"""``todo_write`` for the OpenAI Agents SDK (``pip install 'dsh-todo[openai-agents]'``).

:func:`todo_write_tool` gives a ``FunctionTool`` for an ``agents.Agent``: the SDK hands its ``on_invoke_tool`` the
model's raw argument text, which goes to :meth:`TodoBinding.call` untouched, and the tool's answer is the
registry's text. ``strict_json_schema=False`` keeps the parameters schema byte for byte the native one (strict
mode would rewrite it) and leaves argument checking to the contract's validator.

The SDK has no hook a tool can use to see a run start and end, so wrap a run in ``todos.turn()`` to make it one
DSH turn; a call outside any turn gets a turn of its own (see :mod:`dsh_todo.adapters.common`).
"""

from __future__ import annotations

from typing import Any

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan
from dsh_todo.extras import missing

try:
    from agents import FunctionTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("openai-agents") from exc

__all__ = ["TodoBinding", "TurnScope", "bind_todo", "standing_plan", "todo_write_tool"]


def todo_write_tool(binding: TodoBinding) -> FunctionTool:
    """A ``FunctionTool`` named ``todo_write`` whose calls land on ``binding``'s session."""

    async def on_invoke_tool(context: Any, raw_arguments: str) -> str:
        # ``context`` is the SDK's ToolContext; its call id becomes the ``tool/call`` callId in our log.
        call_id = getattr(context, "tool_call_id", None)
        result = await binding.call(raw_arguments, call_id=call_id if isinstance(call_id, str) else None)
        return result.text

    return FunctionTool(
        name=binding.name,
        description=binding.description,
        params_json_schema=binding.parameters,
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=False,
    )
