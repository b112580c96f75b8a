"""The standing plan of a log, folded while the log is read, and the refusal when it cannot be shown.

The reader does not compute the plan itself: it composes a projection registry with the ``todos`` unit
(:data:`READER_PROJECTIONS`, as a booted context does) and feeds each run of events the pass hands over to a
detached fold of it. So its plan is by construction the one the live registry and the web page compute, and
nothing is kept but the fold's state: a million-event log costs a check of every line and no more memory than one
piece of the file.

Two things make a plan impossible to show, and the page's tail read fails on both with ``internal`` (SPEC §13.10),
so the reader refuses the log with that code: an event the fold cannot take at all (a hand-written event without
``type``, a ``todo/write`` without ``data``; the first one is reported), and a standing plan the view schema refuses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from itertools import compress
from operator import not_
from typing import TYPE_CHECKING, Any, Final

from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.harness.persistence.interest import Interest
from dsh_todo.harness.projections import ProjectionRegistry
from dsh_todo.logview.health import Refusal
from dsh_todo.tool_todo.projection import KEY, TODOS_UNIT
from dsh_todo.tool_todo.rules import PLAN_EVENT_TYPES, UnfoldableEvent, replaces_plan

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.contract import Rows

__all__ = ["PLAN_EVENT_TYPES", "PLAN_INTEREST", "READER_PROJECTIONS", "PlanFold"]

READER_PROJECTIONS: Final = ProjectionRegistry()
"""The projections a reader computes: the ``todos`` unit, registered as the todo tool registers it."""
READER_PROJECTIONS.register(TODOS_UNIT)

_CANNOT: Final = "the standing plan cannot be shown: "

_PASSIVE: Final = KNOWN_SESSION_EVENT_TYPES - PLAN_EVENT_TYPES
"""Known event types the standing plan never reacts to."""

PLAN_INTEREST: Final = Interest(PLAN_EVENT_TYPES, replaces_plan)
"""What :meth:`PlanFold.see` reads, told to the pass that reads a log for it (decision 0043): the plan events, from
the last that replaces the plan whatever it was (the todo tool's rules say which). It takes every whole envelope of
those types (only a ``todo/write`` without ``data`` breaks it), so one the pass leaves out could not have broken it;
events of types this harness does not know, which it must also see, are never left out (the pass proves none)."""


class PlanFold:
    """The plan of the events a pass has read so far, and the first event that broke the fold."""

    def __init__(self) -> None:
        self._restart()

    def _restart(self) -> None:
        self._fold = READER_PROJECTIONS.fold_for()
        self._next = 0
        self._from = 0
        self.breaker: str | None = None

    def resume(self, rows: Rows) -> bool:
        """Start from a checkpoint's rows instead of the first event (``False``: its ``todos`` row is unusable);
        the events the rows already cover are then passed over. A pass from a checkpoint is never restarted."""
        row = rows.get(KEY)
        seq = row.get("seq") if isinstance(row, dict) else None
        if type(seq) is not int:
            return False
        try:
            self._fold = READER_PROJECTIONS.fold_for((), rows, seq + 1)
        except ValueError:
            return False
        self._from = seq + 1
        return True

    def see(self, events: Sequence[Any], types: Sequence[Any] | None = None) -> None:
        """Take the next run of events, in seq order (a pass the reader restarts begins again at seq 0).

        With their ``types``, only the events the plan can react to are folded: a plan event, or one of a type
        this harness does not know (``ignorable``, or without a type), which the fold must see to refuse it. The
        ``todos`` unit is the only one :data:`READER_PROJECTIONS` holds, and every other known type leaves it as
        it was, so the result is the same as folding every event.
        """
        if self._from and events and events[0].get("seq") < self._from:
            kept = [index for index, event in enumerate(events) if event.get("seq") >= self._from]
            events = events[kept[0]:] if kept else []
            types = None if types is None else types[len(types) - len(events):]
        if not events:
            return
        first = events[0].get("seq")
        if type(first) is int and first < self._next:  # the file changed under the pass, which read it again
            self._restart()
        last = events[-1].get("seq")
        self._next = last + 1 if type(last) is int else self._next + len(events)
        if self.breaker is not None:
            return
        if types is not None:
            with contextlib.suppress(TypeError):  # an unhashable type value: fold them all
                events = list(compress(events, map(not_, map(_PASSIVE.__contains__, types))))
        try:
            self._fold.extend(events)
        except UnfoldableEvent as exc:
            self.breaker = str(exc)
        except Exception as exc:
            self.breaker = f"the {KEY} fold failed near seq {first} ({type(exc).__name__}: {exc})"

    def plan(self) -> list[Any] | None:
        """The standing plan, or :class:`Refusal` (code ``internal``, as the page's tail read answers it)."""
        if self.breaker is not None:
            raise Refusal("internal", _CANNOT + self.breaker)
        try:
            plan: list[Any] | None = self._fold.values()[KEY]
        except Exception as exc:
            cause = self._fold.changed_by(KEY)
            where = f"the {cause.get('type')} at seq {cause.get('seq')}" if cause is not None else f"the {KEY} state"
            raise Refusal("internal", f"{_CANNOT}{where} is malformed ({exc})") from None
        return plan
