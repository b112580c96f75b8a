"""The ``todos`` projection unit: the standing plan (SPEC §6.1).

Its ``apply`` is the standing-plan rule of :mod:`.rules` (:func:`~dsh_todo.tool_todo.rules.plan_after`): a
``todo/write`` replaces the state with its list, a ``turn/start`` clears it to ``None``, every other event returns
the very same state object, which is how a fold knows not to push a frame. The projection registry folds it for
everyone (live sessions, the web page, the log reader, checkpoints); its wire schema is :func:`parse_todos`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.errors import InvalidTodosView as InvalidTodosView
from dsh_todo.harness.fold import ProjectionUnit, Wire
from dsh_todo.tool_todo.rules import STATUSES, TodoItem, plan_after

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


TODOS_UNIT: Final = ProjectionUnit(
    key=KEY,
    state_schema=parse_todos,
    init=lambda: None,
    apply=plan_after,
    state_version=STATE_VERSION,
    wire=Wire(view_schema=parse_todos),
)
