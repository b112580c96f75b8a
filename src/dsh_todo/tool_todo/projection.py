"""The ``todos`` projection unit: the standing plan (SPEC §6.1).

A ``todo/write`` replaces the state with its list; a ``turn/start`` clears it to ``None`` ("what this turn is
doing" — a finished plan stays readable through ``turn/end`` and does not leak into the next turn); every other
event returns the very same state object, which is how the registry knows not to push a frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.errors import InvalidTodosView as InvalidTodosView
from dsh_todo.harness.projections import ProjectionUnit, Wire
from dsh_todo.tool_todo.rules import STATUSES, TodoItem

KEY: Final = "todos"
STATE_VERSION: Final = 2




def parse_todos(value: Any) -> list[TodoItem] | None:
    """The wire schema: ``None`` or a list of ``{content, status}``; unknown item keys are dropped, as zod does."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidTodosView("todos must be a list or null")
    out: list[TodoItem] = []
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InvalidTodosView(f"todos[{index}] must be an object")
        content, status = item.get("content"), item.get("status")
        if not isinstance(content, str):
            raise InvalidTodosView(f"todos[{index}].content must be a string")
        if status not in STATUSES:
            raise InvalidTodosView(f"todos[{index}].status must be one of pending, in_progress, completed")
        out.append({"content": content, "status": status})
    return out


def apply_event(state: Any, event: Mapping[str, Any]) -> Any:
    kind = event["type"]
    if kind == "todo/write":
        data = event["data"]
        return data.get("todos") if type(data) is dict or isinstance(data, Mapping) else None
    if kind == "turn/start":
        return None
    return state


TODOS_UNIT: Final = ProjectionUnit(
    key=KEY,
    state_schema=parse_todos,
    init=lambda: None,
    apply=apply_event,
    state_version=STATE_VERSION,
    wire=Wire(view_schema=parse_todos),
)
