"""``@deepseek-ai/dsh-tool-todo/invariant``: the companion that checks every ``todo/write`` before it is logged.

It guards the log against hand-written events that no reader could trust (SPEC §7). It is deliberately silent on
the ``in_progress`` count (logs written under a parallel policy must still replay after a switch to single) and on
extra item keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.context import Context
from dsh_todo.harness.invariants import InvariantViolation
from dsh_todo.harness.session import Session
from dsh_todo.jscompat import JS_WHITESPACE
from dsh_todo.jsonutil import dumps
from dsh_todo.tool_todo.rules import STATUSES

__all__ = ["apply", "check_todos", "inject", "name"]

name: Final = "tool-todo-invariant"
inject: Final = ["invariants"]
PACKAGE: Final = "@deepseek-ai/dsh-tool-todo"

_MISSING: Final = object()


def check_todos(data: Any) -> None:
    """Raise :class:`InvariantViolation` for the first problem of a ``todo/write`` payload."""
    todos = data.get("todos") if isinstance(data, Mapping) else None
    if not isinstance(todos, list):
        raise InvariantViolation("todo/write todos must be an array")
    seen: set[str] = set()
    for item in todos:
        if not isinstance(item, (Mapping, list)):
            raise InvariantViolation("todo/write entries must be objects")
        content = item.get("content") if isinstance(item, Mapping) else None
        if not isinstance(content, str) or not content or content.strip(JS_WHITESPACE) != content:
            raise InvariantViolation("todo/write content must be non-empty and already trimmed")
        if content in seen:
            raise InvariantViolation(f"todo/write repeats content {dumps(content)}")
        seen.add(content)
        status = item.get("status", _MISSING) if isinstance(item, Mapping) else _MISSING
        if status not in STATUSES or type(status) is not str:
            shown = "undefined" if status is _MISSING else dumps(status)
            raise InvariantViolation(f"todo/write carries unknown status {shown}")


def check_event(_session: Session, event: Mapping[str, Any]) -> None:
    if event["type"] == "todo/write":
        check_todos(event["data"])


def apply(ctx: Context) -> None:
    ctx.invariants.register(PACKAGE, check_event)
