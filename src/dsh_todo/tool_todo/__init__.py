"""``@deepseek-ai/dsh-tool-todo``: the model-facing ``todo_write`` tool, as a namespace plugin.

The model sends its whole task list on every call; the list is validated, canonicalised and appended as one
``todo/write`` event to the calling agent's own session log, and the ``todos`` projection shows the standing plan.
This module is the plugin face (``name``, ``inject``, ``Config``, ``apply``) and deliberately has no ``default``
export: a loader that unwraps ``default`` would drop ``inject`` (DSH postmortem 0001). Beside the plugin face it
exports ``build_tool`` (the definition for one policy, for a registry of your own) and ``TodoItem``.

The package is also where a reader of logs finds the ``todos`` projection (:mod:`.projection`) and the list rules
(:mod:`.rules`), so this face imports those plainly and the tool's writing half (:mod:`.tool`) only where a tool is
built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

from dsh_todo.harness.errors import ConfigError
from dsh_todo.jscompat import js_text
from dsh_todo.tool_todo.projection import TODOS_UNIT
from dsh_todo.tool_todo.rules import TodoItem

if TYPE_CHECKING:
    from dsh_todo.harness.context import Context
    from dsh_todo.harness.tools import ToolDefinition

name: Final = "tool-todo"
inject: Final = ["tools"]


class Config(NamedTuple):
    """The one, required deployment choice: may several todos be ``in_progress`` at once?"""

    allow_parallel_in_progress: bool

    @classmethod
    def parse(cls, raw: Any) -> Config:
        if isinstance(raw, Config):
            return raw
        if raw is not None and not isinstance(raw, dict):
            raise ConfigError(f"invalid config:\n  - $ expected object but got {js_text(raw)}")
        raw = raw or {}
        value = raw.get("allowParallelInProgress", raw.get("allow_parallel_in_progress"))
        if value is None:
            raise ConfigError("invalid config:\n  - $.allowParallelInProgress missing required value "
                              "(at allowParallelInProgress)")
        if type(value) is not bool:
            raise ConfigError("invalid config:\n  - $.allowParallelInProgress expected boolean but got "
                              f"{js_text(value)} (at allowParallelInProgress)")
        return cls(value)


def build_tool(allow_parallel: bool) -> ToolDefinition:
    """The ``todo_write`` definition for one policy (:func:`dsh_todo.tool_todo.tool.build_tool`).

    The tool's writing half (the frozen containers, the tool registry, the description) is its own module, opened
    here, where a tool is built: a reader of logs imports this package for the ``todos`` projection and never builds
    the tool (``tests/cli/test_startup.py``)."""
    from dsh_todo.tool_todo.tool import build_tool as build

    return build(allow_parallel)


def apply(ctx: Context, config: Config) -> None:
    """Register ``todo_write``; register the ``todos`` unit whenever a projection registry exists."""
    ctx.inject(["session_projections"], lambda scoped: scoped.session_projections.register(TODOS_UNIT))
    ctx.tools.register(build_tool(config.allow_parallel_in_progress))


__all__ = ["Config", "TodoItem", "apply", "build_tool", "inject", "name"]
