"""The standing plan of a log, from the facts a single pass collects, and the refusal when it cannot be shown.

The ``todos`` fold (SPEC §6.1) is decided by the last ``todo/write`` or ``turn/start``: each sets the state
whatever it was. So a reader need not keep the events to know the plan; it keeps that last event, and notes the
two hand-written shapes that would make the fold itself throw (an event without ``type``, a ``todo/write`` without
``data``), because the page's projection registry folds every event and would fail on them (SPEC §13.10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import contains, eq, is_
from typing import Any, Final

from dsh_todo.logview.health import Refusal
from dsh_todo.tool_todo.projection import TODOS_UNIT, InvalidTodosView, parse_todos

PLAN_EVENT_TYPES: Final = frozenset({"todo/write", "turn/start"})
"""The only event types the ``todos`` fold reacts to; each replaces the state, so the last one decides it."""

_CANNOT: Final = "the standing plan cannot be shown: "


@dataclass
class PlanFacts:
    """What a pass over the events learns about the plan: the deciding event and the first fold breaker."""

    last: Mapping[str, Any] | None = None
    breaker: str | None = None
    _types: list[Any] = field(default_factory=list, repr=False)

    def see(self, events: Sequence[Mapping[str, Any]], types: Sequence[Any] | None = None) -> None:
        """Take the next run of events (in seq order); ``types`` are their ``type`` values, when already known."""
        if types is None:
            types = list(map(dict.get, events, repeat("type")))  # type: ignore[arg-type]
        reverse = types[::-1]
        for kind in PLAN_EVENT_TYPES:
            if kind in types:
                index = len(types) - 1 - reverse.index(kind)
                if self.last is None or events[index]["seq"] > self.last["seq"]:
                    self.last = events[index]
        if self.breaker is None:
            self._find_breaker(events, types)

    def _find_breaker(self, events: Sequence[Mapping[str, Any]], types: Sequence[Any]) -> None:
        # Only the (rare) events that could break the fold are looked at one by one; the filters run in C.
        if None in types:
            for event in compress(events, map(is_, types, repeat(None))):
                if "type" not in event:
                    self.breaker = f"the event at seq {event.get('seq')} has no type"
                    return
        if "todo/write" in types:
            writes = list(compress(events, map(eq, types, repeat("todo/write"))))
            if not all(map(contains, writes, repeat("data"))):
                event = next(event for event in writes if "data" not in event)
                self.breaker = f"the todo/write at seq {event.get('seq')} has no data"

    def plan(self) -> list[Any] | None:
        """The standing plan, or :class:`Refusal` (code ``internal``, as the page's tail read answers it)."""
        if self.breaker is not None:
            raise Refusal("internal", _CANNOT + self.breaker)
        last = self.last
        if last is None:
            return None
        try:
            return parse_todos(TODOS_UNIT.apply(TODOS_UNIT.init(), last))
        except InvalidTodosView as exc:
            why = f"the todo/write at seq {last.get('seq')} is malformed ({exc})"
            raise Refusal("internal", _CANNOT + why) from None


def plan_of(events: Sequence[Mapping[str, Any]]) -> list[Any] | None:
    """The standing plan of a whole event list (raises :class:`Refusal` when it cannot be shown)."""
    facts = PlanFacts()
    facts.see(events)
    return facts.plan()
