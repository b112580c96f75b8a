"""Session projections (``@deepseek-ai/dsh-session-projection``): folded views of a log, kept live (SPEC §6.2).

A unit folds events into a small state (``todos``: the standing plan). The registry keeps one cell per session and
unit, built lazily by folding the in-memory log the first time it is touched, then advanced on every committed
event. Clients are told about a change only when the unit returned a *new* state object: that is the whole
push-frame rule of SPEC §6.4 (an identical list written twice is a new object and is pushed; an unrelated event
returns the same object and is not). Checkpoints (``{key: {ver, seq, val}}``) let a cold reader restore a cell and
fold only the tail of a log; ``stateVersion`` invalidates rows computed under an older fold.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsh_todo.harness.context import Context, Disposer
from dsh_todo.harness.session import Event, Session

log = logging.getLogger("dsh_todo.projections")

name = "@deepseek-ai/dsh-session-projection"
inject = ["sessions"]

ChangeListener = Callable[[Session, str, Any, int], object]


@dataclass(frozen=True)
class Wire:
    """How a unit reaches clients: ``view(state)`` then ``view_schema`` (parses, may strip, raises if invalid)."""

    view_schema: Callable[[Any], Any]
    view: Callable[[Any], Any] = lambda state: state


@dataclass(frozen=True)
class ProjectionUnit:
    key: str
    state_schema: Callable[[Any], Any]
    init: Callable[[], Any]
    apply: Callable[[Any, Event], Any]
    state_version: int
    wire: Wire | None = None

    def fold(self, events: Iterable[Event], state: Any = None, *, fresh: bool = True) -> Any:
        current = self.init() if fresh else state
        apply = self.apply
        for event in events:
            current = apply(current, event)
        return current

    def client_view(self, state: Any) -> Any:
        assert self.wire is not None
        return self.wire.view_schema(self.wire.view(state))


class _Cell:
    __slots__ = ("observed_seq", "state")

    def __init__(self, state: Any, observed_seq: int) -> None:
        self.state = state
        self.observed_seq = observed_seq


@dataclass(frozen=True)
class Restored:
    """A cold session's projections: per-key states, the seq they are as of, and the client snapshot."""

    states: dict[str, Any]
    as_of_seq: int
    snapshot: dict[str, Any]
    checkpoint: dict[str, dict[str, Any]]


def _valid_version(version: object) -> bool:
    return type(version) is int and 0 <= version <= 2**53 - 1


class ProjectionRegistry:
    """The ``session_projections`` service."""

    def __init__(self) -> None:
        self._units: dict[str, ProjectionUnit] = {}
        self._refs: dict[str, int] = {}
        self._listeners: list[ChangeListener] = []
        self._generation = 0

    # -- units ----------------------------------------------------------------------------------------------
    def register(self, unit: ProjectionUnit) -> Disposer:
        if not _valid_version(unit.state_version):
            raise ValueError(f'session projection "{unit.key}" stateVersion must be a non-negative integer, '
                             f"got {unit.state_version}")
        existing = self._units.get(unit.key)
        if existing is not None and existing.state_version != unit.state_version:
            raise ValueError(f'session projection key "{unit.key}" is already registered at stateVersion '
                             f"{existing.state_version}; refusing to share it with stateVersion {unit.state_version}")
        if existing is None:
            self._units[unit.key] = unit
        self._refs[unit.key] = self._refs.get(unit.key, 0) + 1

        def release() -> None:
            self._refs[unit.key] -= 1
            if self._refs[unit.key] == 0:
                del self._refs[unit.key]
                del self._units[unit.key]
                self._generation += 1

        return Disposer(release)

    def keys(self) -> list[str]:
        return list(self._units)

    def unit(self, key: str) -> ProjectionUnit | None:
        return self._units.get(key)

    def on_change(self, listener: ChangeListener) -> Disposer:
        """``listener(session, key, view, seq)`` whenever a wired unit's state object changes."""
        self._listeners.append(listener)
        return Disposer(lambda: self._listeners.remove(listener) if listener in self._listeners else None)

    # -- live drive -----------------------------------------------------------------------------------------
    def on_event(self, session: Session, event: Event) -> None:
        """Advance every unit's cell by one committed event (installed as a ``sessions`` listener)."""
        if not self._units:
            return
        cells = self._cells_of(session)
        seq: int = event["seq"]
        for key, unit in self._units.items():
            cell = cells.get(key)
            if cell is None:
                cell = cells[key] = _Cell(unit.fold(session.events[:seq]), seq - 1)
            elif cell.observed_seq != seq - 1:
                if cell.observed_seq >= seq:
                    continue
                cell.state = unit.fold(session.events[cell.observed_seq + 1:seq], cell.state, fresh=False)
            state = cell.state
            nxt = unit.apply(state, event)
            cell.state = nxt
            cell.observed_seq = seq
            if nxt is not state and unit.wire is not None and self._listeners:
                self._notify(session, unit, nxt, seq)

    def _notify(self, session: Session, unit: ProjectionUnit, state: Any, seq: int) -> None:
        try:
            view = unit.client_view(state)
        except Exception:
            log.warning("projection %r produced an invalid view at seq %s", unit.key, seq, exc_info=True)
            return
        for listener in list(self._listeners):
            try:
                listener(session, unit.key, view, seq)
            except Exception:
                log.warning("projection change listener failed", exc_info=True)

    def _cells_of(self, session: Session) -> dict[str, _Cell]:
        """This registry's cells for one session, kept on the session; all dropped when a key goes away."""
        entry = session.extensions.get(self)
        if entry is None or entry[0] != self._generation:
            entry = session.extensions[self] = (self._generation, {})
        cells: dict[str, _Cell] = entry[1]
        return cells

    def _cell(self, session: Session, key: str) -> _Cell:
        unit = self._units[key]
        cells = self._cells_of(session)
        cell = cells.get(key)
        last = session.seq - 1
        if cell is None:
            cell = cells[key] = _Cell(unit.fold(session.events), last)
        elif cell.observed_seq < last:  # events committed while no listener drove us (e.g. restored logs)
            cell.state = unit.fold(session.events[cell.observed_seq + 1:], cell.state, fresh=False)
            cell.observed_seq = last
        return cell

    # -- reads ----------------------------------------------------------------------------------------------
    def snapshot(self, session: Session) -> dict[str, Any]:
        """``{asOfSeq, values}``: every client-visible unit's view, as of the log's last event."""
        values = {key: unit.client_view(self._cell(session, key).state)
                  for key, unit in self._units.items() if unit.wire is not None}
        return {"asOfSeq": session.seq - 1, "values": values}

    def state_of(self, session: Session, key: str) -> Any:
        if key not in self._units:
            raise KeyError(f'no session projection "{key}" is registered')
        return self._cell(session, key).state

    def checkpoint(self, session: Session) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for key, unit in self._units.items():
            cell = self._cell(session, key)
            out[key] = {"ver": unit.state_version, "seq": cell.observed_seq, "val": copy.deepcopy(cell.state)}
        return out

    # -- cold sessions --------------------------------------------------------------------------------------
    def _usable(self, unit: ProjectionUnit, row: Any, end_seq: int, base_seq: int) -> bool:
        if not isinstance(row, Mapping) or row.get("ver") != unit.state_version:
            return False
        seq = row.get("seq")
        if type(seq) is not int or seq < base_seq - 1 or seq > end_seq:
            return False
        try:
            unit.state_schema(row.get("val"))
        except Exception:
            return False
        return True

    def restore_floor(self, checkpoint: Mapping[str, Any], log_end_seq: int | None = None) -> int:
        """The first seq a cold reader must read so that :meth:`restore` can finish every unit."""
        floor: int | None = None
        for key, unit in self._units.items():
            row = checkpoint.get(key)
            end = log_end_seq if log_end_seq is not None else 2**62
            start = row["seq"] + 1 if isinstance(row, Mapping) and self._usable(unit, row, end, 0) else 0
            floor = start if floor is None else min(floor, start)
        return 0 if floor is None else floor

    def restore(self, checkpoint: Mapping[str, Any], events: Sequence[Event], base_seq: int = 0) -> Restored:
        """Projections of a cold session from a checkpoint and the events from ``base_seq`` on."""
        end_seq = base_seq + len(events) - 1
        states: dict[str, Any] = {}
        rows: dict[str, dict[str, Any]] = {}
        for key, unit in self._units.items():
            row = checkpoint.get(key)
            if self._usable(unit, row, end_seq, base_seq):
                assert isinstance(row, Mapping)
                start = row["seq"] + 1 - base_seq
                state = unit.fold(events[start:], copy.deepcopy(row["val"]), fresh=False)
            elif base_seq == 0:
                state = unit.fold(events)
            else:
                raise ValueError(f'session projection "{key}" cannot restore from seq {base_seq}: its checkpoint '
                                 "row is missing, version-mismatched, or beyond the supplied log end; re-read from "
                                 "seq 0")
            states[key] = state
            rows[key] = {"ver": unit.state_version, "seq": end_seq, "val": state}
        values = {key: unit.client_view(states[key]) for key, unit in self._units.items() if unit.wire is not None}
        return Restored(states, end_seq, {"asOfSeq": end_seq, "values": values}, rows)

    def view_checkpoint(self, checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        """Client values straight from usable checkpoint rows (no log read at all)."""
        values: dict[str, Any] = {}
        for key, unit in self._units.items():
            row = checkpoint.get(key)
            if unit.wire is not None and isinstance(row, Mapping) and self._usable(unit, row, 2**62, 0):
                values[key] = unit.client_view(row["val"])
        return values


def apply(ctx: Context) -> None:
    registry = ProjectionRegistry()
    ctx.sessions.listen(registry.on_event)
    ctx.provide("session_projections", registry)
