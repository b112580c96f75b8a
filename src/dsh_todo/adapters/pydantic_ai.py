"""``todo_write`` for pydantic-ai (``pip install 'dsh-todo[pydantic-ai]'``).

:func:`todo_write_capability` gives a capability for ``Agent(capabilities=[...])``: it contributes the toolset and
makes each agent run one DSH turn (``wrap_run`` opens the turn and closes it with the reason the run earned:
``completed``, ``error``, or ``aborted`` when cancelled). :func:`todo_write_toolset` gives the bare toolset for
``Agent(toolsets=[...])`` or your own toolset composition; its calls then take turns as described in
:mod:`dsh_todo.adapters.common` (``with todos.turn():`` around a run, or a turn per call).

The tool is declared with the native description and parameters schema, ``strict=False`` (otherwise pydantic-ai
closes the root object with ``additionalProperties: false`` for OpenAI models, which the contract leaves open) and
``sequential=True`` (DSH runs ``todo_write`` exclusively, an ordering barrier). Its argument validator is a
pass-through: pydantic-ai would otherwise parse the JSON itself and answer a bad call with its own retry prompt,
so instead the raw text reaches :meth:`TodoBinding.call` and the model reads the contract's error. Every answer,
error or not, is an ordinary tool return holding the registry's text: pydantic-ai's failure outcome would be
wrapped as ``{"error": ...}`` on some providers, changing the text the model reads.
"""

from __future__ import annotations

from typing import Any

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan
from dsh_todo.extras import missing

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.capabilities.abstract import WrapRunHandler
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("pydantic-ai") from exc

__all__ = ["TodoBinding", "TodoCapability", "TodoToolset", "TurnScope", "bind_todo", "standing_plan",
           "todo_write_capability", "todo_write_toolset"]

_RAW = "raw_arguments"
_VALUE = "arguments"


class _PassThrough:
    """An ``args_validator`` that validates nothing: it carries the model's arguments, as given, to ``call_tool``.

    pydantic-ai calls ``validate_json`` with the model's argument text (``""`` already replaced by ``"{}"``) and
    ``validate_python`` when a model produced the arguments as an object.
    """

    def validate_json(self, input: str | bytes | bytearray, *, allow_partial: Any = False, **_: Any) -> Any:
        text = input if isinstance(input, str) else bytes(input).decode("utf-8", errors="surrogateescape")
        return {_RAW: text}

    def validate_python(self, input: Any, *, allow_partial: Any = False, **_: Any) -> Any:
        return {_VALUE: input}


class TodoToolset(AbstractToolset[Any]):
    """A toolset holding ``todo_write`` bound to one session."""

    def __init__(self, binding: TodoBinding, *, id: str | None = None, max_retries: int = 1) -> None:
        self.binding = binding
        self._id = id
        self.max_retries = max_retries

    @property
    def id(self) -> str | None:
        return self._id

    def tool_definition(self) -> ToolDefinition:
        return ToolDefinition(name=self.binding.name, description=self.binding.description,
                              parameters_json_schema=self.binding.parameters, strict=False, sequential=True)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tool = ToolsetTool(toolset=self, tool_def=self.tool_definition(), max_retries=self.max_retries,
                           args_validator=_PassThrough())
        return {self.binding.name: tool}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> str:
        call_id = ctx.tool_call_id
        if _RAW in tool_args:
            result = await self.binding.call(tool_args[_RAW], call_id=call_id)
        else:
            result = await self.binding.call_value(tool_args.get(_VALUE), call_id=call_id)
        return result.text


class TodoCapability(AbstractCapability[Any]):
    """``todo_write`` for an agent, each run of which is one DSH turn of the bound session."""

    def __init__(self, binding: TodoBinding, *, id: str | None = None) -> None:
        self.binding = binding
        self.toolset = TodoToolset(binding, id=id)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # bound to a live session: not an agent-spec capability

    def get_toolset(self) -> TodoToolset:
        return self.toolset

    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        # Joins a turn that is already open (``with todos.turn():`` around the run, or a nested run).
        async with self.binding.turn():
            return await handler()


def todo_write_capability(binding: TodoBinding, *, id: str | None = None) -> TodoCapability:
    """A pydantic-ai capability: the ``todo_write`` toolset, and one DSH turn per agent run."""
    return TodoCapability(binding, id=id)


def todo_write_toolset(binding: TodoBinding, *, id: str | None = None) -> TodoToolset:
    """The bare pydantic-ai toolset with ``todo_write`` whose calls land on ``binding``'s session."""
    return TodoToolset(binding, id=id)
