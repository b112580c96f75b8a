"""Projection units and the fold that drives them over one session's events (SPEC §6.1, §6.2).

A unit says how one projection folds (``init``, ``apply``) and how it reaches clients (``wire``). A :class:`Fold`
holds every unit's state for one session and advances them event by event; it is the only code that applies units
to events. The registry keeps one per live session as its cell, and hands out detached ones
(:meth:`~dsh_todo.harness.projections.ProjectionRegistry.fold_for`) to whoever folds a copy of a log: the web
page's replays, followers and history, the log reader, cold restores. A detached fold shares nothing with the
registry's cells, so it may be used on any thread.

The push-frame rule of SPEC §6.4 lives here too: :meth:`Fold.apply` reports a change only when a unit returned a
*new* state object (an identical list written twice is a new object and is reported; an unrelated event, a
``turn/end``, or a ``turn/start`` with no standing plan returns the same object and is not).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from dsh_todo.harness.event_types import Event

Rows = dict[str, dict[str, Any]]


def warn(message: str, *args: object) -> None:
    """Log the failure being handled on the ``dsh_todo.projections`` logger, with its traceback. ``logging`` is
    imported on the first failure: a log reader folds through here and must not pay for it up front."""
    import logging

    logging.getLogger("dsh_todo.projections").warning(message, *args, exc_info=True)


class Wire(NamedTuple):
    """How a unit reaches clients: ``view(state)`` then ``view_schema`` (parses, may strip, raises if invalid)."""

    view_schema: Callable[[Any], Any]
    view: Callable[[Any], Any] = lambda state: state


class ProjectionUnit(NamedTuple):
    """One projection: ``apply(state, event)`` must return the very same object when the event changes nothing."""

    key: str
    state_schema: Callable[[Any], Any]
    init: Callable[[], Any]
    apply: Callable[[Any, Event], Any]
    state_version: int
    wire: Wire | None = None

    def fold(self, events: Iterable[Event], state: Any = None, *, fresh: bool = True) -> Any:
        """``state`` (or ``init()`` when ``fresh``) folded over ``events``: this unit alone, as a check or a
        benchmark folds it; sessions are folded by :class:`Fold`."""
        return _run(self.apply, self.init() if fresh else state, None, events)[0]

    def client_view(self, state: Any) -> Any:
        assert self.wire is not None
        return self.wire.view_schema(self.wire.view(state))


def _run(apply: Callable[[Any, Event], Any], state: Any, cause: Event | None,
         events: Iterable[Event]) -> tuple[Any, Event | None]:
    """``state`` folded over ``events`` by ``apply``, and the event that last replaced it (else ``cause``)."""
    for event in events:
        nxt = apply(state, event)
        if nxt is not state:
            state = nxt
            cause = event
    return state, cause


class Change(NamedTuple):
    """A wired unit's new client view, caused by the event just folded (the push frame's ``key`` and ``value``)."""

    key: str
    value: Any


class Fold:
    """Every unit's state for one session, as of :attr:`seq` (the last event folded; ``-1``: none).

    Events must come in log order, each the next seq. A unit that raises while folding leaves the fold unusable; the
    exception propagates (readers turn it into a verdict, the registry logs it).
    """

    __slots__ = ("_causes", "_units", "seq", "states")

    def __init__(self, units: Sequence[ProjectionUnit], states: Mapping[str, Any] | None = None,
                 seq: int = -1) -> None:
        self._units = tuple(units)
        self.states: dict[str, Any] = ({unit.key: unit.init() for unit in self._units} if states is None
                                       else dict(states))
        self.seq = seq
        self._causes: dict[str, Event] = {}

    @property
    def units(self) -> tuple[ProjectionUnit, ...]:
        return self._units

    def apply(self, event: Event, *, report: bool = True) -> list[Change]:
        """Fold one event; the client views of the wired units whose state object it replaced (none computed
        without ``report``: nobody is listening).

        A view its schema refuses is logged and left out (SPEC §13.10: the live change feed skips it).
        """
        changes: list[Change] = []
        states = self.states
        for unit in self._units:
            key = unit.key
            state = states[key]
            nxt = unit.apply(state, event)
            if nxt is state:
                continue
            states[key] = nxt
            self._causes[key] = event
            if report and unit.wire is not None:
                try:
                    changes.append(Change(key, unit.client_view(nxt)))
                except Exception:
                    warn("projection %r has no valid view at seq %s", key, event.get("seq"))
        self.seq += 1
        return changes

    def extend(self, events: Sequence[Event]) -> None:
        """Fold a run of events without reporting changes: one tight loop per unit (a cold read of a long log)."""
        if not events:
            return
        states = self.states
        causes = self._causes
        for unit in self._units:
            key = unit.key
            states[key], cause = _run(unit.apply, states[key], causes.get(key), events)
            if cause is not None:
                causes[key] = cause
        self.seq += len(events)

    @classmethod
    def resumed(cls, starts: Sequence[tuple[ProjectionUnit, Any, int]], events: Sequence[Event],
                base_seq: int) -> Fold:
        """A fold at the end of ``events`` (which start at ``base_seq``), each unit resumed from its own
        ``(unit, state, index)``: ``state`` as of just before ``events[index]`` (a checkpoint row's, or ``init()``
        at index 0)."""
        fold = cls([unit for unit, _, _ in starts], {unit.key: state for unit, state, _ in starts},
                   base_seq + len(events) - 1)
        for unit, state, index in starts:
            fold.states[unit.key], cause = _run(unit.apply, state, None, events[index:])
            if cause is not None:
                fold._causes[unit.key] = cause
        return fold

    def changed_by(self, key: str) -> Event | None:
        """The event that last replaced ``key``'s state in this fold (``None``: it is still the initial or restored
        state), so a reader can name the event behind a state its schema refuses."""
        return self._causes.get(key)

    def values(self) -> dict[str, Any]:
        """Every wired unit's client view (raises if a view fails its schema: SPEC §13.10)."""
        return {unit.key: unit.client_view(self.states[unit.key]) for unit in self._units if unit.wire is not None}

    def snapshot(self) -> dict[str, Any]:
        """``{asOfSeq, values}``, as a history tail page carries it."""
        return {"asOfSeq": self.seq, "values": self.values()}

    def checkpoint(self) -> Rows:
        """``{key: {ver, seq, val}}`` with a deep copy of each state (SPEC §6.2)."""
        return {unit.key: {"ver": unit.state_version, "seq": self.seq, "val": copy.deepcopy(self.states[unit.key])}
                for unit in self._units}

    def copy(self) -> Fold:
        """An independent fold at the same point (states are immutable values or replaced, never edited)."""
        twin = Fold(self._units, self.states, self.seq)
        twin._causes = dict(self._causes)
        return twin
