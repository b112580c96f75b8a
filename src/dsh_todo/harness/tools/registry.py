"""The tool registry (``tools`` service): definitions, the schemas sent to a model, and the execute pipeline.

Execute runs, in order (SPEC §1.4, §2): abort-before-dispatch → lossless check of the arguments → schema
validation (every violation, ``ToolArgsError``) → the tool body → render. The lossless check and the validation
are one walk, the tool's judge (:func:`dsh_todo.harness.tools.speed.compile_judge`: generated code for valid arguments,
the validator's own refusal from the item it refused on; decisions 0031 and 0045). Arguments are not deep-copied:
tool bodies treat them as read-only (docs/decisions/0002-tool-fast-path.md).
Every failure becomes an ``isError`` result whose one text block is ``Error: <message>``; only
:class:`HarnessError` failures carry ``{name, code}``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from dsh_todo.harness.context import Context, Disposer, ServiceKey
from dsh_todo.harness.errors import AbortError, HarnessError, ToolArgsError
from dsh_todo.harness.frozen import is_lossless
from dsh_todo.harness.tools.schema import JsonSchema, compile_parameters, compile_value
from dsh_todo.harness.tools.speed import Judge, compile_judge
from dsh_todo.harness.tools.validate import compile_validator

log = logging.getLogger("dsh_todo.tools")

name = "@deepseek-ai/dsh-tools"
inject: list[str] = []

LOSSLESS_ERROR = "tool execution arguments must be losslessly JSON-serializable"


class AbortSignal:
    """A cancellation flag the caller flips; the registry reads it before dispatch and after the body."""

    __slots__ = ("aborted", "reason")

    def __init__(self) -> None:
        self.aborted = False
        self.reason: object = None

    def abort(self, reason: object = None) -> None:
        self.aborted = True
        self.reason = reason


class ToolExecution(NamedTuple):
    """What a tool body learns about its call: the owning agent (or None), the abort signal, the call id."""

    agent: Any = None
    signal: AbortSignal | None = None
    call_id: str | None = None


class ToolResult(NamedTuple):
    """The outcome of one call: model-visible content blocks, the canonical value, structured error info."""

    is_error: bool
    content: list[dict[str, str]]
    value: Any = None
    error: dict[str, str] | None = None

    @property
    def text(self) -> str:
        return "".join(block["text"] for block in self.content if block.get("type") == "text")


Execute = Callable[[Any, ToolExecution], Any]


@dataclass(frozen=True)
class ToolDefinition:
    """A compiled tool: what the model sees (name, description, parameters) and how it runs."""

    name: str
    description: str
    parameters: JsonSchema
    execute: Execute
    render: Callable[[Any, Any], str]
    output_schema: JsonSchema | None = None
    present_call: Callable[[Any], Any] | None = None
    concurrency_safe: bool = False
    validate: Callable[[Any], list[str]] = field(repr=False, default=lambda _: [])
    judge: Judge | None = field(repr=False, default=None)
    """The lossless check and ``validate`` in one walk: ``()`` or ``[]`` for valid arguments, ``None`` for arguments
    that are not lossless JSON, else every violation (:func:`~dsh_todo.harness.tools.speed.compile_judge`). Without it,
    the registry asks those two in turn."""

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def present(self, arguments: Any) -> Any:
        """The call's display intent, or None (the generic card) when the arguments do not validate."""
        if self.present_call is None or not isinstance(arguments, dict) or self.validate(arguments):
            return None
        return self.present_call(arguments)


def define_tool(*, name: str, description: str, parameters: Mapping[str, Mapping[str, Any]], execute: Execute,
                render: Callable[[Any, Any], str], output: Mapping[str, Any] | None = None,
                present_call: Callable[[Any], Any] | None = None, concurrency_safe: bool = False) -> ToolDefinition:
    """Compile an author's spec into a :class:`ToolDefinition` (schemas compiled once, validator prebuilt)."""
    compiled = compile_parameters(parameters)
    return ToolDefinition(
        name=name, description=description, parameters=compiled, execute=execute, render=render,
        output_schema=compile_value(output) if output is not None else None, present_call=present_call,
        concurrency_safe=concurrency_safe, validate=compile_validator(compiled), judge=compile_judge(compiled))


def error_result(message: str, info: dict[str, str] | None = None) -> ToolResult:
    return ToolResult(True, [{"type": "text", "text": f"Error: {message}"}], None, info)


class ToolRegistry:
    """The ``tools`` service."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolDefinition] = {}
        self._change: list[Callable[[], object]] = []

    def register(self, definition: ToolDefinition) -> Disposer:
        if definition.name in self._tools:
            raise ValueError(f'tool "{definition.name}" is already registered')
        self._tools[definition.name] = definition
        self._changed()

        def unregister() -> None:
            if self._tools.get(definition.name) is definition:
                del self._tools[definition.name]
                self._changed()

        return Disposer(unregister)

    def on_change(self, listener: Callable[[], object]) -> Disposer:
        """``tools/change``: called after every register and unregister."""
        self._change.append(listener)
        return Disposer(lambda: self._change.remove(listener) if listener in self._change else None)

    def _changed(self) -> None:
        for listener in list(self._change):
            try:
                listener()
            except Exception:
                log.warning("tools/change listener failed", exc_info=True)

    def get(self, tool_name: str) -> ToolDefinition | None:
        return self._tools.get(tool_name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self._tools.values()]

    def scheduling(self, tool_name: str) -> str:
        """``exclusive`` (runs alone, an ordering barrier) unless the tool declares itself concurrency-safe."""
        tool = self._tools.get(tool_name)
        return "shared" if tool is not None and tool.concurrency_safe else "exclusive"

    async def execute(self, tool_name: str, arguments: Any, agent: Any = None, *,
                      signal: AbortSignal | None = None, call_id: str | None = None) -> ToolResult:
        """Run one call through the whole pipeline; never raises for a tool-level failure."""
        if signal is not None and signal.aborted:
            return error_result("tool call aborted before dispatch",
                                {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"})
        tool = self._tools.get(tool_name)
        if tool is None:
            return error_result(f'unknown tool "{tool_name}"', {"name": "ToolNotFoundError", "code": "NOT_FOUND"})
        args = arguments
        problems = tool.judge(args) if tool.judge is not None else tool.validate(args) if is_lossless(args) else None
        if problems is None:
            return error_result(LOSSLESS_ERROR)
        if problems:
            return error_result("invalid arguments: " + "; ".join(problems),
                                {"name": ToolArgsError.name, "code": ToolArgsError.code})
        try:
            value = tool.execute(args, ToolExecution(agent, signal, call_id))
            if inspect.isawaitable(value):
                value = await value
            text = tool.render(args, value)
        except HarnessError as exc:
            return error_result(exc.message, exc.info())
        except Exception as exc:
            return error_result(str(exc))
        if signal is not None and signal.aborted:
            return error_result("tool call aborted", AbortError("tool call aborted").info())
        return ToolResult(False, [{"type": "text", "text": text}], value, None)


TOOLS: Final[ServiceKey[ToolRegistry]] = ServiceKey("tools")
"""The tool registry's key: ``ctx[TOOLS]``."""


def apply(ctx: Context) -> None:
    ctx.provide(TOOLS, ToolRegistry())


__all__ = ["AbortSignal", "ToolDefinition", "ToolExecution", "ToolRegistry", "ToolResult", "define_tool",
           "error_result"]
