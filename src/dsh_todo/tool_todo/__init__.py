"""``@deepseek-ai/dsh-tool-todo``: the model-facing ``todo_write`` tool, as a namespace plugin.

The model sends its whole task list on every call; the list is validated, canonicalised and appended as one
``todo/write`` event to the calling agent's own session log, and the ``todos`` projection shows the standing plan.
This module is the plugin face (``name``, ``inject``, ``Config``, ``apply``) and deliberately has no ``default``
export: a loader that unwraps ``default`` would drop ``inject`` (DSH postmortem 0001). Beside the plugin face it
exports ``build_tool`` (the definition for one policy, for a registry of your own) and ``TodoItem``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

from dsh_todo.harness.errors import ConfigError
from dsh_todo.tool_todo.rules import TodoItem

if TYPE_CHECKING:
    from dsh_todo.harness.context import Context
    from dsh_todo.harness.frozen import FrozenDict
    from dsh_todo.harness.tools import ToolDefinition

# The tool itself (the frozen containers, the tool registry, the description) is imported where it is built: a
# reader of logs imports this package for the ``todos`` projection (:mod:`.projection`) and never builds the tool.

name: Final = "tool-todo"
inject: Final = ["tools"]

NO_OWNER: Final = "todo_write requires an owning agent session"
CALL_TITLE: Final = "Update todo list"

ITEMS_KEPT: Final = 4096
"""How many distinct items :func:`_logged_item` remembers (then it starts afresh)."""
ITEM_TEXT_KEPT: Final = 1024
"""Longer contents are built afresh each time, never remembered: the table stays a few MB whatever models send."""

_items: dict[tuple[str, str], FrozenDict] = {}


def _logged_item(sent: tuple[str, str]) -> FrozenDict:
    """The frozen, untracked, trimmed ``{content, status}`` for an item as sent that ``_items`` does not hold yet
    (the caller looked first); remembered, so every later event logging it shares it.

    A model resends its whole list on every call and most items come back unchanged, so most calls trim and build
    no item at all: one dict lookup each. Only the trimming and building are remembered, never a verdict: the list
    rules run on every call. Sharing is safe because nobody can change a frozen item
    (docs/decisions/0008-untracked-log.md). The registry has refused anything but exact ``str`` values (not
    lossless), so a key cannot be a subclass with its own idea of equality.
    """
    from dsh_todo.harness.frozen import frozen_object
    from dsh_todo.jscompat import js_trim

    content, status = sent
    item = frozen_object(content=js_trim(content), status=status)
    if len(content) <= ITEM_TEXT_KEPT:
        if len(_items) >= ITEMS_KEPT:
            _items.clear()
        _items[sent] = item
    return item


class Config(NamedTuple):
    """The one, required deployment choice: may several todos be ``in_progress`` at once?"""

    allow_parallel_in_progress: bool

    @classmethod
    def parse(cls, raw: Any) -> Config:
        if isinstance(raw, Config):
            return raw
        from dsh_todo.jscompat import js_text

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
    """The ``todo_write`` definition for one policy."""
    from dsh_todo.harness.errors import TodoRejectedError
    from dsh_todo.harness.frozen import frozen_array, frozen_object
    from dsh_todo.harness.tools import ToolExecution, define_tool
    from dsh_todo.tool_todo.description import OUTPUT, PARAMETERS, TOOL_NAME, describe
    from dsh_todo.tool_todo.rules import TodoError, check_list, render

    def execute(args: Any, call: ToolExecution) -> dict[str, Any]:
        known = _items.get
        todos = [known(sent := (item["content"], item["status"])) or _logged_item(sent) for item in args["todos"]]
        try:
            counts = check_list([item["content"] for item in todos], [item["status"] for item in todos],
                                allow_parallel)
        except TodoError as exc:
            raise TodoRejectedError(str(exc)) from None
        agent = call.agent
        if agent is None:
            raise TodoRejectedError(NO_OWNER)
        frozen = frozen_array(todos)  # checked, so the append shares it (docs/decisions/0001)
        agent.session.append("todo/write", frozen_object(todos=frozen))
        return {"todos": frozen, "counts": counts}

    def render_result(_args: Any, value: dict[str, Any]) -> str:
        return render(value["counts"])

    def present_call(args: Any) -> dict[str, Any]:
        return {"card": "generic", "title": CALL_TITLE, "kind": "other", "rawInput": args["todos"]}

    return define_tool(name=TOOL_NAME, description=describe(allow_parallel), parameters=PARAMETERS,
                       execute=execute, render=render_result, output=OUTPUT, present_call=present_call)


def apply(ctx: Context, config: Config) -> None:
    """Register ``todo_write``; register the ``todos`` unit whenever a projection registry exists."""
    from dsh_todo.tool_todo.projection import TODOS_UNIT

    ctx.inject(["session_projections"], lambda scoped: scoped.session_projections.register(TODOS_UNIT))
    ctx.tools.register(build_tool(config.allow_parallel_in_progress))


__all__ = ["Config", "TodoItem", "apply", "build_tool", "inject", "name"]
