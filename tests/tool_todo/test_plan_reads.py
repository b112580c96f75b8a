"""What the todo tool's rules tell a reader of a log (decision 0043), checked against the fold itself.

Storage hands a reader's plan fold only the plan events (:data:`~dsh_todo.tool_todo.rules.PLAN_EVENT_TYPES`), and of
a run it proves in bulk only those from the last one that :func:`~dsh_todo.tool_todo.rules.replaces_plan`. Both are
claims about :func:`~dsh_todo.tool_todo.rules.plan_after`: folding what is handed over must end with the very state,
and name the very event as its cause, that folding every event does.
"""

from __future__ import annotations

import random
from typing import Any

from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.harness.fold import Fold
from dsh_todo.tool_todo.projection import KEY, TODOS_UNIT
from dsh_todo.tool_todo.rules import PLAN_EVENT_TYPES, plan_after, replaces_plan

_CACHED = 5
"""A small number the interpreter caches: two ``todo/write`` holding it yield the very same object."""

_DATA: list[tuple[str, Any]] = [
    ("todo/write", {"todos": [{"content": "a", "status": "pending"}]}),
    ("todo/write", {"todos": []}),
    ("todo/write", {"todos": None}),
    ("todo/write", {"todos": _CACHED}),
    ("todo/write", {"todos": "x"}),
    ("todo/write", {}),
    ("todo/write", ["not", "a", "mapping"]),
    ("turn/start", {"turn": 1}),
    ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ("user/message", {"todos": [{"content": "b", "status": "pending"}]}),
    ("step/start", {"turn": 1, "step": 1}),
]


def _events(rng: random.Random) -> list[dict[str, Any]]:
    picked = [rng.choice(_DATA) for _ in range(rng.randrange(0, 14))]
    # each event parsed anew, as a reader's pass builds it: equal lists are distinct objects, cached numbers are not
    return [{"type": kind, "seq": seq, "time": 0, "data": _copy(data)} for seq, (kind, data) in enumerate(picked)]


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def _folded(events: list[dict[str, Any]]) -> tuple[Any, Any]:
    fold = Fold([TODOS_UNIT])
    fold.extend(events)
    return fold.states[KEY], fold.changed_by(KEY)


def test_only_plan_events_change_the_plan() -> None:
    state = [{"content": "a", "status": "pending"}]
    for kind in sorted(KNOWN_SESSION_EVENT_TYPES - PLAN_EVENT_TYPES):
        assert plan_after(state, {"type": kind, "seq": 0, "time": 0, "data": {"todos": []}}) is state, kind


def test_the_plan_events_from_the_last_that_replaces_the_plan_fold_like_every_event() -> None:
    """Repro of why not "from the last plan event": after a ``todo/write`` of the cached number 5, another one of 5
    changes nothing, so the fold names the first as the cause; a reader left with the second alone named it."""
    rng = random.Random(43)
    restarted = 0
    for _ in range(3000):
        events = _events(rng)
        last = max((index for index, event in enumerate(events) if replaces_plan(event)), default=0)
        restarted += last > 0
        handed = [event for index, event in enumerate(events) if index >= last and event["type"] in PLAN_EVENT_TYPES]
        full_state, full_cause = _folded(events)
        state, cause = _folded(handed)
        assert state is full_state and cause is full_cause, events
    assert restarted > 1000
    five = [{"type": "todo/write", "seq": seq, "time": 0, "data": {"todos": _CACHED}} for seq in (0, 1)]
    assert _folded(five)[1] is five[0] and not replaces_plan(five[0])
