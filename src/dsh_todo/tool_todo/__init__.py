"""``@deepseek-ai/dsh-tool-todo``: the model-facing ``todo_write`` tool, as a namespace plugin.

The model sends its whole task list on every call; the list is validated, canonicalised and appended as one
``todo/write`` event to the calling agent's own session log, and the ``todos`` projection shows the standing plan.
This module is the plugin face (``name``, ``inject``, ``Config``, ``apply``) and deliberately has no ``default``
export: a loader that unwraps ``default`` would drop ``inject`` (DSH postmortem 0001). Beside the plugin face it
exports ``build_tool`` (the definition for one policy, for a registry of your own) and ``TodoItem``.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from dsh_todo.harness.errors import ConfigError
from dsh_todo.tool_todo.rules import TodoItem

if TYPE_CHECKING:
    from dsh_todo.harness.context import Context
    from dsh_todo.harness.frozen import FrozenDict, LeafTable
    from dsh_todo.harness.tools import ToolDefinition

# The tool itself (the frozen containers, the tool registry, the description) is imported where it is built: a
# reader of logs imports this package for the ``todos`` projection (:mod:`.projection`) and never builds the tool.

name: Final = "tool-todo"
inject: Final = ["tools"]

NO_OWNER: Final = "todo_write requires an owning agent session"
CALL_TITLE: Final = "Update todo list"

ITEMS_KEPT: Final = 4096
"""How many distinct items the tool remembers (then it starts afresh)."""
ITEM_TEXT_KEPT: Final = 1024
"""Longer contents are built afresh each time, never remembered: the table stays a few MB whatever models send."""

_items: LeafTable | None = None
"""The items remembered, by ``(content, status)`` as sent (made when the first tool is built: a reader of logs never
imports the frozen containers)."""


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
    from dsh_todo.harness.frozen import LeafTable, frozen_object
    from dsh_todo.harness.tools import ToolExecution, define_tool
    from dsh_todo.jscompat import js_trim
    from dsh_todo.tool_todo.description import OUTPUT, PARAMETERS, TOOL_NAME, describe
    from dsh_todo.tool_todo.rules import TodoError, check_list, render

    sent_as = operator.itemgetter("content", "status")  # an item's key as sent, made in C (every item, every call)

    global _items
    if _items is None:
        _items = LeafTable()

    def logged_item(sent: tuple[str, str]) -> FrozenDict:
        """The frozen, untracked, trimmed ``{content, status}`` for an item as sent that ``_items`` does not hold
        yet (the caller looked first); remembered, so every later event logging it shares it.

        A model resends its whole list on every call and most items come back unchanged, so most calls trim and
        build no item at all: one dict lookup each, and the list of them is proven JSON without a look at its items
        (a :class:`~dsh_todo.harness.frozen.LeafTable` takes only checked items). Only the trimming and building are
        remembered, never a verdict: the list rules run on every call. Sharing is safe because nobody can change a
        frozen item (docs/decisions/0008-untracked-log.md). The registry has refused anything but exact ``str``
        values (not lossless), so a key cannot be a subclass with its own idea of equality.
        """
        content, status = sent
        item = frozen_object(content=js_trim(content), status=status)
        if len(content) <= ITEM_TEXT_KEPT and _items is not None:
            if len(_items) >= ITEMS_KEPT:
                _items.clear()
            _items[sent] = item
        return item

    def execute(args: Any, call: ToolExecution) -> dict[str, Any]:
        # Checked, so the append shares the list as it is (docs/decisions/0001).
        todos = _items.array(args["todos"], sent_as, logged_item)
        try:
            counts = check_list([item["content"] for item in todos], [item["status"] for item in todos],
                                allow_parallel)
        except TodoError as exc:
            raise TodoRejectedError(str(exc)) from None
        agent = call.agent
        if agent is None:
            raise TodoRejectedError(NO_OWNER)
        agent.session.append("todo/write", frozen_object(todos=todos))
        return {"todos": todos, "counts": counts}

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
