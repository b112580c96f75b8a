"""The projection registry (SPEC §6.2): unit validation, shared keys, checkpoints and cold restore."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness import Context
from dsh_todo.harness.projections import ProjectionRegistry, ProjectionUnit
from dsh_todo.harness.session import Session, SessionStore
from dsh_todo.tool_todo.projection import TODOS_UNIT
from tests.conftest import BootFactory


def item(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


def counter_unit(version: int = 1) -> ProjectionUnit:
    """A host-only unit (no wire): the number of events seen."""
    return ProjectionUnit(key="count", state_schema=lambda v: v, init=lambda: 0,
                          apply=lambda state, event: state + 1, state_version=version)


def filled_session(ctx: Context) -> Session:
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": [item("a", "in_progress")]})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2})
    session.append("todo/write", {"todos": [item("a", "completed"), item("b", "in_progress")]})
    return session


@pytest.mark.parametrize(("version", "shown"), [(-1, "-1"), (1.5, "1.5"), (2**53, "9007199254740992"),
                                                ("2", "2"), (None, "None")])
def test_state_version_must_be_a_non_negative_safe_integer(version: Any, shown: str) -> None:
    registry = ProjectionRegistry()
    with pytest.raises(ValueError) as caught:
        registry.register(TODOS_UNIT._replace(state_version=version))
    assert str(caught.value) == f'session projection "todos" stateVersion must be a non-negative integer, got {shown}'
    assert registry.keys() == []


@pytest.mark.parametrize("version", [0, 2**53 - 1])
def test_state_version_bounds_are_accepted(version: int) -> None:
    registry = ProjectionRegistry()
    registry.register(TODOS_UNIT._replace(state_version=version))
    assert registry.keys() == ["todos"]


def test_a_shared_key_is_reference_counted() -> None:
    registry = ProjectionRegistry()
    first = registry.register(TODOS_UNIT)
    second = registry.register(TODOS_UNIT._replace())
    assert registry.keys() == ["todos"]
    first()
    assert registry.keys() == ["todos"]
    first()  # disposing twice must not release someone else's reference
    assert registry.keys() == ["todos"]
    second()
    assert registry.keys() == []


def test_sharing_a_key_at_another_version_is_refused() -> None:
    registry = ProjectionRegistry()
    registry.register(TODOS_UNIT)
    with pytest.raises(ValueError) as caught:
        registry.register(TODOS_UNIT._replace(state_version=3))
    assert str(caught.value) == ('session projection key "todos" is already registered at stateVersion 2; '
                                 "refusing to share it with stateVersion 3")


def test_state_of_an_unknown_key(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False)
    with pytest.raises(KeyError) as caught:
        ctx.session_projections.state_of(ctx.sessions.create("s"), "todos")
    assert caught.value.args[0] == 'no session projection "todos" is registered'


def test_host_only_units_are_not_in_snapshots(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    ctx.session_projections.register(counter_unit())
    session = filled_session(ctx)
    assert ctx.session_projections.state_of(session, "count") == 5
    assert set(ctx.session_projections.snapshot(session)["values"]) == {"todos"}


def test_checkpoint_rows(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = filled_session(ctx)
    checkpoint = ctx.session_projections.checkpoint(session)
    assert checkpoint == {"todos": {"ver": 2, "seq": 4, "val": [item("a", "completed"), item("b", "in_progress")]}}
    # The row is a copy: editing it changes nothing live.
    checkpoint["todos"]["val"].append(item("c"))
    assert ctx.session_projections.state_of(session, "todos") == [item("a", "completed"), item("b", "in_progress")]


def test_restore_from_scratch_matches_the_live_snapshot(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = filled_session(ctx)
    restored = ctx.session_projections.restore({}, session.events, 0)
    assert restored.snapshot == ctx.session_projections.snapshot(session)
    assert restored.as_of_seq == 4
    assert restored.states == {"todos": [item("a", "completed"), item("b", "in_progress")]}


def test_restore_from_a_checkpoint_folds_only_the_tail(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = filled_session(ctx)
    checkpoint = {"todos": {"ver": 2, "seq": 2, "val": [item("from checkpoint")]}}
    restored = ctx.session_projections.restore(checkpoint, session.events[3:], 3)
    assert restored.snapshot == {"asOfSeq": 4, "values": {"todos": [item("a", "completed"), item("b", "in_progress")]}}
    tail_without_write = ctx.session_projections.restore(
        {"todos": {"ver": 2, "seq": 2, "val": [item("from checkpoint")]}}, session.events[3:4], 3)
    assert tail_without_write.snapshot == {"asOfSeq": 3, "values": {"todos": None}}
    kept = ctx.session_projections.restore({"todos": {"ver": 2, "seq": 3, "val": [item("kept")]}},
                                           [], 4)
    assert kept.snapshot == {"asOfSeq": 3, "values": {"todos": [item("kept")]}}


@pytest.mark.parametrize("row", [
    pytest.param(None, id="missing"),
    pytest.param({"ver": 1, "seq": 2, "val": None}, id="version-mismatched"),
    pytest.param({"ver": 2, "seq": 9, "val": None}, id="beyond-the-log-end"),
    pytest.param({"ver": 2, "seq": 0, "val": None}, id="before-the-supplied-events"),
    pytest.param({"ver": 2, "seq": 2, "val": "not a list"}, id="fails-the-state-schema"),
])
def test_restore_refuses_an_unusable_row_past_seq_zero(make_ctx: BootFactory, row: Any) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = filled_session(ctx)
    checkpoint = {} if row is None else {"todos": row}
    with pytest.raises(ValueError) as caught:
        ctx.session_projections.restore(checkpoint, session.events[3:], 3)
    assert str(caught.value) == (
        'session projection "todos" cannot restore from seq 3: its checkpoint row is missing, version-mismatched, '
        "or beyond the supplied log end; re-read from seq 0")


def test_an_unusable_row_is_refolded_from_init_at_seq_zero(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = filled_session(ctx)
    stale = {"todos": {"ver": 1, "seq": 4, "val": [item("stale fold")]}}
    restored = ctx.session_projections.restore(stale, session.events, 0)
    assert restored.snapshot["values"]["todos"] == [item("a", "completed"), item("b", "in_progress")]
    assert ctx.session_projections.view_checkpoint(stale) == {}
    assert ctx.session_projections.restore_floor(stale) == 0


def test_restore_floor_and_view_checkpoint(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = filled_session(ctx)
    checkpoint = ctx.session_projections.checkpoint(session)
    assert ctx.session_projections.restore_floor(checkpoint) == 5
    assert ctx.session_projections.restore_floor({}) == 0
    assert ctx.session_projections.view_checkpoint(checkpoint) == {
        "todos": [item("a", "completed"), item("b", "in_progress")]}


def test_cells_are_per_session(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    one, two = ctx.sessions.create("one"), ctx.sessions.create("two")
    one.append("todo/write", {"todos": [item("a")]})
    assert ctx.session_projections.snapshot(two) == {"asOfSeq": -1, "values": {"todos": None}}
    assert ctx.session_projections.snapshot(one) == {"asOfSeq": 0, "values": {"todos": [item("a")]}}


def test_restored_sessions_are_folded_on_read(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    source = filled_session(ctx)
    copy = Session("copy")
    copy.restore(source.events)
    ctx.sessions.adopt(copy)
    assert ctx.session_projections.snapshot(copy) == ctx.session_projections.snapshot(source)
    copy.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    assert ctx.session_projections.snapshot(copy)["asOfSeq"] == 5
    assert ctx.session_projections.snapshot(copy)["values"] == ctx.session_projections.snapshot(source)["values"]


def test_a_read_while_an_event_is_published_does_not_swallow_its_change() -> None:
    """A listener that reads the projections before the registry's own drive runs must not hide the change.

    Repro (before the fix): ``store.listen(lambda s, e: registry.snapshot(s))`` installed ahead of
    ``registry.on_event``; appending a ``todo/write`` folded it into the cell during the read, the drive then found
    the cell already at that seq and skipped it, and no change listener ever heard of the new plan.
    """
    store = SessionStore()
    registry = ProjectionRegistry()
    registry.register(TODOS_UNIT)
    seen: list[Any] = []
    store.listen(lambda session, _event: seen.append(registry.snapshot(session)))
    store.listen(registry.on_event)
    changes: list[tuple[str, Any, int]] = []
    registry.on_change(lambda _session, key, value, seq: changes.append((key, value, seq)))
    session = store.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": [item("a", "in_progress")]})
    session.append("turn/start", {"turn": 2})
    assert changes == [("todos", [item("a", "in_progress")], 1), ("todos", None, 2)]
    assert seen == [{"asOfSeq": 0, "values": {"todos": None}},
                    {"asOfSeq": 1, "values": {"todos": [item("a", "in_progress")]}},
                    {"asOfSeq": 2, "values": {"todos": None}}]
