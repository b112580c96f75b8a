"""``todo_write`` as a LangChain tool (``pip install 'dsh-todo[langchain]'``), for LangChain and LangGraph.

:func:`todo_write_tool` gives a :class:`TodoWriteTool`, a ``BaseTool`` whose ``args_schema`` is the native JSON
Schema dict (so ``bind_tools`` sends our exact parameters) and which skips LangChain's own input parsing: whatever
the model's call carries reaches :class:`TodoBinding` as it is, and the contract's validator answers.

What it accepts, as ``invoke`` / ``ainvoke`` input:

* a ``ToolCall`` (``AIMessage.tool_calls[i]``, what a LangGraph ``ToolNode`` passes): LangChain has already parsed
  the model's JSON into ``args``, which are used as they are (and logged as compact JSON);
* an ``InvalidToolCall`` (``AIMessage.invalid_tool_calls[i]``: the model's text was not JSON): its raw ``args``
  text is parsed by the reference's rule, so the model reads the contract's
  ``Error: invalid arguments: "arguments" must be an object``;
* a raw JSON string, or an already-parsed arguments dict.

Given a call id it answers with a ``ToolMessage``: ``content`` is the registry's text, ``status`` is ``"error"`` for
a rejected call, ``artifact`` the canonical ``{todos, counts}`` of an accepted one. Without a call id it answers the
text alone. The standing plan is ``tool.binding.plan``.

``invoke`` runs the call on the calling thread, often not the event loop's: a synchronous agent awaited from async
code (``await RunnableLambda(agent).ainvoke(...)``) runs on LangChain's executor thread, where a cancellation does
not reach it. When the run's turn ends meanwhile, the end waits for the call running on that thread, so it lands
inside the turn with the answer the model reads; the thread's later calls take the binding's standing turn.

Known limit: LangChain parses the model's arguments before any tool sees them and turns ``null``, ``[]``, ``0`` and
``""`` into ``{}``, so for those few inputs the model reads ``missing required property "todos"`` instead of the
reference's ``"arguments" must be an object``. Text that is not JSON stays raw (an ``InvalidToolCall``) and gets
the contract's error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan
from dsh_todo.extras import missing
from dsh_todo.harness.frozen import thaw
from dsh_todo.harness.tools.registry import ToolResult

try:
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig, ensure_config
    from langchain_core.tools import BaseTool
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("langchain") from exc

__all__ = ["TodoBinding", "TodoWriteTool", "TurnScope", "bind_todo", "standing_plan", "todo_write_tool"]


def _is_invalid_tool_call(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "invalid_tool_call"


class TodoWriteTool(BaseTool):
    """``todo_write`` bound to one session. Build it with :func:`todo_write_tool`."""

    binding: TodoBinding = Field(exclude=True)
    """Where the calls land; ``binding.plan`` is the standing plan."""

    def _to_args_and_kwargs(self, tool_input: str | dict[str, Any],
                            tool_call_id: str | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # No pydantic parsing and no ``**kwargs`` splat: the input reaches the contract's validator untouched.
        return (tool_input, tool_call_id), {}

    def _run(self, tool_input: Any, tool_call_id: str | None) -> Any:
        if isinstance(tool_input, str):
            result = self.binding.call_sync(tool_input, call_id=tool_call_id)
        else:
            result = self.binding.call_value_sync(tool_input, call_id=tool_call_id)
        return self._answer(result, tool_call_id)

    async def _arun(self, tool_input: Any, tool_call_id: str | None) -> Any:
        if isinstance(tool_input, str):
            result = await self.binding.call(tool_input, call_id=tool_call_id)
        else:
            result = await self.binding.call_value(tool_input, call_id=tool_call_id)
        return self._answer(result, tool_call_id)

    def _answer(self, result: ToolResult, tool_call_id: str | None) -> Any:
        if tool_call_id is None:
            return result.text
        return ToolMessage(content=result.text, tool_call_id=tool_call_id, name=self.name,
                           status="error" if result.is_error else "success",
                           artifact=None if result.value is None else thaw(result.value))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if _is_invalid_tool_call(input):
            return self.run(input.get("args") or "", **self._invalid_call_kwargs(input, config), **kwargs)
        return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if _is_invalid_tool_call(input):
            return await self.arun(input.get("args") or "", **self._invalid_call_kwargs(input, config), **kwargs)
        return await super().ainvoke(input, config, **kwargs)

    @staticmethod
    def _invalid_call_kwargs(call: Mapping[str, Any], config: RunnableConfig | None) -> dict[str, Any]:
        """What ``invoke`` passes to ``run`` for a ``ToolCall``, for an ``InvalidToolCall`` (raw ``args`` text)."""
        config = ensure_config(config)
        return {"callbacks": config.get("callbacks"), "tags": config.get("tags"), "metadata": config.get("metadata"),
                "run_name": config.get("run_name"), "run_id": config.pop("run_id", None), "config": config,
                "tool_call_id": call.get("id")}


def todo_write_tool(binding: TodoBinding) -> TodoWriteTool:
    """A LangChain tool named ``todo_write`` whose calls land on ``binding``'s session."""
    return TodoWriteTool(binding=binding, name=binding.name, description=binding.description,
                         args_schema=binding.parameters)
