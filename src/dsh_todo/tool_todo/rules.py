"""The pure rules of ``todo_write``: trimming, validation, counts and the result text (SPEC §2.2, §4.1, §13).

Standard library only, so any carrier or adapter can reuse them without the harness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, NoReturn, TypedDict

from dsh_todo.jscompat import JS_WHITESPACE, js_string

Status = Literal["pending", "in_progress", "completed"]
STATUSES: Final = ("pending", "in_progress", "completed")

class TodoItem(TypedDict):
    content: str
    status: Status


class Counts(TypedDict):
    pending: int
    inProgress: int
    completed: int


class TodoError(Exception):
    """A list that passed the schema but breaks a value rule; the message is model-visible."""


EMPTY_CONTENT: Final = "invalid todo: `content` must be a non-empty string"


def duplicate_content(content: str) -> str:
    return f"invalid todos: duplicate content {js_string(content)}"


def too_many_active(count: int) -> str:
    return f"invalid todos: at most one task may be in_progress (got {count})"


def canonicalize(items: Sequence[Mapping[str, Any]], allow_parallel: bool,
                 make_item: Callable[..., Any] = dict) -> tuple[list[TodoItem], Counts]:
    """Trimmed items with exactly ``content`` and ``status``, and their counts; raises :class:`TodoError`.

    Checks run per item in list order (empty, then duplicate) and the first failure wins; the ``in_progress`` cap
    is checked only after every item passed, so a duplicate is reported before the cap (SPEC §2.2).
    ``make_item(content=…, status=…)`` builds each canonical item (the plugin passes an immutable mapping, so the
    list can go into the log without another copy). A valid list is checked with whole-list operations; only a
    list that breaks a rule takes the item-by-item walk that names the first failure.
    """
    whitespace = JS_WHITESPACE
    contents = [item["content"].strip(whitespace) for item in items]
    if not all(contents) or len(set(contents)) != len(contents):
        _first_failure(contents)
    statuses = [item["status"] for item in items]
    active = statuses.count("in_progress")
    if not allow_parallel and active > 1:
        raise TodoError(too_many_active(active))
    done = statuses.count("completed")
    todos = [make_item(content=content, status=status) for content, status in zip(contents, statuses, strict=True)]
    return todos, {"pending": len(todos) - active - done, "inProgress": active, "completed": done}


def _first_failure(contents: Sequence[str]) -> NoReturn:
    seen: set[str] = set()
    for content in contents:
        if not content:
            raise TodoError(EMPTY_CONTENT)
        if content in seen:
            raise TodoError(duplicate_content(content))
        seen.add(content)
    raise AssertionError("called for a valid list")


def render(counts: Mapping[str, int]) -> str:
    """The one-line success text; always the same nouns, whatever the numbers (SPEC §13.16)."""
    return (f"Updated todo list: {counts['pending']} pending, {counts['inProgress']} in progress, "
            f"{counts['completed']} completed.")


def standing_plan(events: Iterable[Mapping[str, Any]]) -> list[Any] | None:
    """The standing plan of a log: the last ``todo/write`` with no later ``turn/start`` (SPEC §5.4)."""
    plan: list[Any] | None = None
    for event in events:
        kind = event["type"]
        if kind == "todo/write":
            plan = event["data"].get("todos")
        elif kind == "turn/start":
            plan = None
    return plan
