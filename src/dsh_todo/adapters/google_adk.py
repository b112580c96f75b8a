"""``todo_write`` for Google's Agent Development Kit (``pip install 'dsh-todo[google-adk]'``).

:func:`todo_write_tool` gives a :class:`TodoWriteTool`, an ADK ``BaseTool`` for ``LlmAgent(tools=[...])``. Its
declaration is built by hand rather than from a Python signature (what ``FunctionTool`` would do), so the model is
sent our exact name, description and parameters schema: the schema travels as ``parameters_json_schema``, a plain
JSON Schema dict ADK passes on untouched, instead of ``parameters``, which would be converted to Gemini's own
``Schema`` type and lose the key order and the keywords that type lacks.

ADK hands a tool the model's arguments already parsed into a dict (its model layers parse the text), so they go to
:meth:`TodoBinding.call_value` and are logged as compact JSON; a model whose text is not JSON never reaches a tool.
The answer is the registry's text, returned as it is for an accepted call and for a refused one alike: ADK wraps a
non-dict result as ``{"result": text}``, its documented shape, which its Anthropic and LiteLLM layers turn back
into the bare text. (An ``{"error": ...}`` dict would be sent to those models as JSON, changing what they read.)

One ``Runner`` invocation is one DSH turn when wrapped in ``todos.turn()``::

    async with todos.turn():
        async for event in runner.run_async(user_id=..., session_id=..., new_message=...):
            ...

ADK's plugins see a run start and end, but not a cancelled one (``after_run_callback`` and
``on_run_error_callback`` are both skipped when the task is cancelled), so a turn opened by a plugin could be left
open; the scope closes it ``completed``, ``error`` or ``aborted`` by how the block ends. Calls outside any turn take
turns as described in :mod:`dsh_todo.adapters.common`.
"""

from __future__ import annotations

from typing import Any

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan
from dsh_todo.extras import missing

try:
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("google-adk") from exc

__all__ = ["TodoBinding", "TodoWriteTool", "TurnScope", "bind_todo", "standing_plan", "todo_write_tool"]


class TodoWriteTool(BaseTool):
    """``todo_write`` bound to one session, as an ADK tool. Build it with :func:`todo_write_tool`."""

    def __init__(self, binding: TodoBinding) -> None:
        super().__init__(name=binding.name, description=binding.description)
        self.binding = binding
        """Where the calls land; ``binding.plan`` is the standing plan."""

    def _get_declaration(self) -> types.FunctionDeclaration:
        # A fresh schema for every request: ADK and its model layers may edit what they are given.
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=self.binding.parameters)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> str:
        # The model's call id becomes the ``tool/call`` callId in our log.
        result = await self.binding.call_value(args, call_id=tool_context.function_call_id)
        return result.text


def todo_write_tool(binding: TodoBinding) -> TodoWriteTool:
    """An ADK tool named ``todo_write`` whose calls land on ``binding``'s session."""
    return TodoWriteTool(binding)
