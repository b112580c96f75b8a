"""The pure rules of ``todo_write``: trimming, validation, counts and the result text (SPEC §2.2, §4.1, §13).

Standard library only, so any carrier or adapter can reuse them without the harness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from typing import Any, Final, Literal, NoReturn, TypedDict

from dsh_todo.jscompat import js_string

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


def check_list(contents: Sequence[str], statuses: Sequence[str], allow_parallel: bool) -> Counts:
    """The list rules over the trimmed contents and the statuses; the counts, or :class:`TodoError`.

    Checks run per item in list order (empty, then duplicate) and the first failure wins; the ``in_progress`` cap
    is checked only after every item passed, so a duplicate is reported before the cap (SPEC §2.2). A valid list is
    checked with whole-list operations; only a list that breaks a rule takes the item-by-item walk that names the
    first failure.
    """
    if not all(contents) or len(set(contents)) != len(contents):
        _first_failure(contents)
    active = statuses.count("in_progress")
    if not allow_parallel and active > 1:
        raise TodoError(too_many_active(active))
    done = statuses.count("completed")
    return {"pending": len(contents) - active - done, "inProgress": active, "completed": done}


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


PLAN_EVENT_TYPES: Final = frozenset({"todo/write", "turn/start"})
"""The only event types the standing plan reacts to; each replaces it whatever it was. A reader of a log hands its
plan fold these alone (every other event leaves the plan as it was)."""


class UnfoldableEvent(ValueError):
    """A hand-written event the standing-plan rule cannot fold (no ``type``, or a ``todo/write`` without ``data``);
    the message names it, so a reader can say why a log's plan cannot be shown (SPEC §13.10)."""


def plan_after(plan: Any, event: Mapping[str, Any]) -> Any:
    """The standing-plan rule, one event at a time: the ``todos`` unit's ``apply`` (SPEC §5.4, §6.1).

    ``todo/write`` → its ``data.todos`` (a new object each time, so an identical list is still a change);
    ``turn/start`` → ``None`` (a finished plan stays readable through ``turn/end`` and does not leak into the next
    turn); any other event → the very same ``plan`` object, which is how a fold knows nothing changed.
    """
    try:
        kind = event["type"]
    except KeyError:
        raise UnfoldableEvent(f"the event at seq {event.get('seq')} has no type") from None
    if kind == "todo/write":
        try:
            data = event["data"]
        except KeyError:
            raise UnfoldableEvent(f"the todo/write at seq {event.get('seq')} has no data") from None
        mapping = isinstance(data, dict) or isinstance(data, Mapping)  # noqa: SIM101 (logged data is a dict: C-fast)
        return data.get("todos") if mapping else None
    if kind == "turn/start":
        return None
    return plan


def replaces_plan(event: Mapping[str, Any]) -> bool:
    """Whether the plan after ``event`` is a new object whatever it was before: a ``todo/write`` whose ``data.todos``
    is a list. A reader may then leave out the plan events before it (a fold ends with the same plan, and names the
    same event as having last changed it). Not any plan event: one that yields the very object already standing (a
    ``null`` list after ``null``, a small number the interpreter caches) changes nothing, so the fold names an
    earlier event; a reader that left that one out would name another."""
    if event.get("type") != "todo/write":
        return False
    data = event.get("data")
    return type(data) is dict and type(data.get("todos")) is list


def standing_plan(events: Iterable[Mapping[str, Any]]) -> list[Any] | None:
    """The standing plan of a log: :func:`plan_after` folded over it (for callers that have no projection
    registry; everything that has one folds through it)."""
    plan: list[Any] | None = reduce(plan_after, events, None)
    return plan
