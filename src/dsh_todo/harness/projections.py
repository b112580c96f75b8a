"""Session projections (``@deepseek-ai/dsh-session-projection``): folded views of a log, kept live (SPEC §6.2).

The registry is the one place projections are folded. It holds the units (:mod:`.fold`), keeps one
:class:`~dsh_todo.harness.fold.Fold` per live session (built lazily from the in-memory log the first time it is
touched, then advanced on every committed event), and hands out detached folds (:meth:`ProjectionRegistry.fold_for`)
to everyone who folds a copy of a log, so no reader re-implements a unit's rule. Checkpoints (``{key: {ver, seq,
val}}``) let a cold reader restore a fold and fold only the tail of a log; ``stateVersion`` invalidates rows computed
under an older fold.

**One post-commit notification.** The registry is itself a ``session/event`` listener; after folding an event it
tells its commit listeners ``(session, event, changes)``: the event and the client views it changed, together, in
log order. A carrier that listened to the session and to the changes separately would hear of a change before the
event that caused it (the registry's listener runs first); one callback makes that impossible.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from dsh_todo.harness.disposer import Disposer
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.fold import Change, Fold, ProjectionUnit, Wire, warn
from dsh_todo.harness.service_key import ServiceKey

if TYPE_CHECKING:
    # Types only: the log reader composes a registry of its own and must not load the plugin tree or live sessions.
    from dsh_todo.harness.context import Context
    from dsh_todo.harness.session import Session

__all__ = ["Change", "ChangeListener", "CommitListener", "Fold", "ProjectionRegistry", "ProjectionUnit", "Restored",
           "Wire", "apply"]


name = "@deepseek-ai/dsh-session-projection"
inject = ["sessions"]

ChangeListener = Callable[["Session", str, Any, int], object]
"""``(session, key, view, seq)``: one wired unit's new view."""

CommitListener = Callable[["Session", Event, Sequence[Change]], object]
"""``(session, event, changes)``: a committed event and the views it changed, once per event, in log order."""


class Restored(NamedTuple):
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
        self._commit_listeners: list[CommitListener] = []
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
            self._generation += 1  # every session's fold is rebuilt with the new unit the next time it is touched
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
        return _add(self._listeners, listener)

    def on_commit(self, listener: CommitListener) -> Disposer:
        """``listener(session, event, changes)`` after every committed event of a live session, once the event is
        folded: the one notification a carrier needs (the event's frame, then its changes' frames)."""
        return _add(self._commit_listeners, listener)

    # -- detached folds -------------------------------------------------------------------------------------
    def fold_for(self, events: Sequence[Event] = (), checkpoint: Mapping[str, Any] | None = None,
                 base_seq: int = 0) -> Fold:
        """A fold of every registered unit over ``events`` (which start at ``base_seq``), detached from this
        registry's cells: the caller owns it, may use it on any thread, and advances it with ``apply``/``extend``.

        With a ``checkpoint``, each unit resumes from its row when the row is usable (right ``ver``, valid state,
        ``seq`` within the events supplied); otherwise it is folded from ``init`` over ``events``, which then must
        start at seq 0 (else :class:`ValueError`, SPEC §6.2).
        """
        end_seq = base_seq + len(events) - 1
        starts: list[tuple[ProjectionUnit, Any, int]] = []
        for key, unit in self._units.items():
            row = checkpoint.get(key) if checkpoint else None
            if self._usable(unit, row, end_seq, base_seq):
                assert isinstance(row, Mapping)
                starts.append((unit, copy.deepcopy(row["val"]), row["seq"] + 1 - base_seq))
            elif base_seq == 0:
                starts.append((unit, unit.init(), 0))
            else:
                raise ValueError(f'session projection "{key}" cannot restore from seq {base_seq}: its checkpoint '
                                 "row is missing, version-mismatched, or beyond the supplied log end; re-read from "
                                 "seq 0")
        return Fold.resumed(starts, events, base_seq)

    # -- live drive -----------------------------------------------------------------------------------------
    def on_event(self, session: Session, event: Event) -> None:
        """Advance the session's fold by one committed event and tell the listeners (a ``sessions`` listener)."""
        if not self._units and not self._commit_listeners:
            return
        seq: int = event["seq"]
        fold = self._cell(session)
        changes: Sequence[Change] = ()
        try:
            if fold.seq < seq - 1:  # events this drive never saw: a restored log, or a unit registered since
                fold.extend(session.events[fold.seq + 1:seq])
            if fold.seq == seq - 1:
                changes = fold.apply(event, report=bool(self._listeners or self._commit_listeners))
        except Exception:
            warn("projections could not fold %s at seq %s", event.get("type"), seq)
        if changes or self._commit_listeners:  # (nobody to tell: most events of a session without a page open)
            self._notify(session, event, changes)

    def _notify(self, session: Session, event: Event, changes: Sequence[Change]) -> None:
        for commit_listener in list(self._commit_listeners):
            try:
                commit_listener(session, event, changes)
            except Exception:
                warn("projection commit listener failed")
        if not changes:
            return
        seq: int = event["seq"]
        for key, value in changes:
            for listener in list(self._listeners):
                try:
                    listener(session, key, value, seq)
                except Exception:
                    warn("projection change listener failed")

    def _cell(self, session: Session) -> Fold:
        """This registry's fold of one session, kept on the session; rebuilt when the set of units changed."""
        entry = session.extensions.get(self)
        if entry is None or entry[0] != self._generation:
            entry = session.extensions[self] = (self._generation, Fold(tuple(self._units.values())))
        fold: Fold = entry[1]
        return fold

    def _current(self, session: Session) -> Fold:
        """The session's fold as of its last event, for a read.

        A read never folds the event being published into the cell: that event belongs to the drive
        (:meth:`on_event`), which must see it to report its changes. A read during publication (another listener,
        another thread) folds that one event into a scratch copy instead.
        """
        fold = self._cell(session)
        last = session.seq - 1
        driven = last - 1 if session.publishing else last
        if fold.seq < driven:
            fold.extend(session.events[fold.seq + 1:driven + 1])
        if fold.seq < last:
            fold = fold.copy()
            fold.extend(session.events[fold.seq + 1:last + 1])
        return fold

    # -- reads ----------------------------------------------------------------------------------------------
    def snapshot(self, session: Session) -> dict[str, Any]:
        """``{asOfSeq, values}``: every client-visible unit's view, as of the log's last event."""
        return self._current(session).snapshot()

    def state_of(self, session: Session, key: str) -> Any:
        if key not in self._units:
            raise KeyError(f'no session projection "{key}" is registered')
        return self._current(session).states[key]

    def checkpoint(self, session: Session) -> dict[str, dict[str, Any]]:
        return self._current(session).checkpoint()

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
        for unit in self._units.values():
            row = checkpoint.get(unit.key)
            end = log_end_seq if log_end_seq is not None else 2**62
            start = row["seq"] + 1 if isinstance(row, Mapping) and self._usable(unit, row, end, 0) else 0
            floor = start if floor is None else min(floor, start)
        return 0 if floor is None else floor

    def restore(self, checkpoint: Mapping[str, Any], events: Sequence[Event], base_seq: int = 0) -> Restored:
        """Projections of a cold session from a checkpoint and the events from ``base_seq`` on."""
        fold = self.fold_for(events, checkpoint, base_seq)
        rows = {unit.key: {"ver": unit.state_version, "seq": fold.seq, "val": fold.states[unit.key]}
                for unit in fold.units}
        return Restored(dict(fold.states), fold.seq, fold.snapshot(), rows)

    def view_checkpoint(self, checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        """Client values straight from usable checkpoint rows (no log read at all)."""
        values: dict[str, Any] = {}
        for key, unit in self._units.items():
            row = checkpoint.get(key)
            if unit.wire is not None and isinstance(row, Mapping) and self._usable(unit, row, 2**62, 0):
                values[key] = unit.client_view(row["val"])
        return values


SESSION_PROJECTIONS: Final[ServiceKey[ProjectionRegistry]] = ServiceKey("session_projections")
"""The projection registry's key: ``ctx[SESSION_PROJECTIONS]``."""


def _add(items: list[Any], item: Any) -> Disposer:
    items.append(item)
    return Disposer(lambda: items.remove(item) if item in items else None)


def apply(ctx: Context) -> None:
    registry = ProjectionRegistry()
    ctx.sessions.listen(registry.on_event)  # by name: the key's module (live sessions) is the reader's to skip
    ctx.provide(SESSION_PROJECTIONS, registry)
