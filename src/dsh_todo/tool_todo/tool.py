"""The ``todo_write`` tool itself, the writing half of :mod:`dsh_todo.tool_todo`: the definition for one policy, and
the table of logged items every call shares.

A module of its own because the package is also the reader's (the ``todos`` projection): the plugin's ``apply`` and
``build_tool`` open this module when a tool is built, and a process that only reads logs never loads the frozen
containers, the tool registry or the description.
"""

from __future__ import annotations

import operator
from typing import Any, Final

from dsh_todo.harness.errors import TodoRejectedError
from dsh_todo.harness.frozen import frozen_object
from dsh_todo.harness.tools import ToolDefinition, ToolExecution, define_tool
from dsh_todo.harness.tools.speed import LeafTable
from dsh_todo.jscompat import js_trim
from dsh_todo.tool_todo.description import OUTPUT, PARAMETERS, TOOL_NAME, describe
from dsh_todo.tool_todo.rules import TodoError, check_list, render

NO_OWNER: Final = "todo_write requires an owning agent session"
CALL_TITLE: Final = "Update todo list"

ITEMS_KEPT: Final = 4096
"""How many distinct items the table remembers (then it starts afresh)."""
ITEM_TEXT_KEPT: Final = 1024
"""An item whose (trimmed) content is longer is built afresh each time, never remembered: the table stays a few MB
whatever models send."""

_items = LeafTable(ITEMS_KEPT, ITEM_TEXT_KEPT)
"""The items remembered, by ``(content, status)`` as sent: one of the hot path's measured tricks
(:class:`~dsh_todo.harness.tools.speed.LeafTable`; without it a resent list misses its goal, decision 0045). It takes
only checked items, so a list built from it is proven JSON without a look at its items (docs/decisions/0001).

A model resends its whole list on every call and most items come back unchanged, so most calls trim and build no
item at all: one dict lookup each. Only the trimming and building are remembered, never a verdict: the list rules run
on every call. Sharing is safe because nobody can change a frozen item. The registry has refused anything but exact
``str`` values (not lossless), so a key cannot be a subclass with its own idea of equality."""

_sent_as = operator.itemgetter("content", "status")
"""An item's key as sent, made in C (every item, every call)."""


def _fields(sent: tuple[str, str]) -> dict[str, str]:
    """The logged fields of an item as sent that ``_items`` does not hold yet: its content trimmed as JavaScript
    trims. The table checks, builds, freezes and remembers the item (decision 0031)."""
    content, status = sent
    return {"content": js_trim(content), "status": status}


def build_tool(allow_parallel: bool) -> ToolDefinition:
    """The ``todo_write`` definition for one policy."""
    def execute(args: Any, call: ToolExecution) -> dict[str, Any]:
        # Checked, so the append shares the list as it is (docs/decisions/0001).
        todos = _items.array(args["todos"], _sent_as, _fields)
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
