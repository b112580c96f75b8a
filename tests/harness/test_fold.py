"""The one fold (SPEC §6.1, §6.2, §6.4): detached folds from the registry, and the one post-commit notification."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from dsh_todo.harness.fold import Change
from dsh_todo.harness.projections import ProjectionRegistry
from dsh_todo.harness.session import Session, SessionStore
from dsh_todo.tool_todo.projection import TODOS_UNIT
from dsh_todo.tool_todo.rules import UnfoldableEvent, standing_plan
from tests.conftest import BootFactory

A = [{"content": "a", "status": "in_progress"}]

# SPEC §6.4, row by row: (event type, data, the view it pushes or None when it pushes nothing)
TABLE: list[tuple[str, dict[str, Any], Any]] = [
    ("turn/start", {"turn": 1}, None),                 # already null: no frame
    ("todo/write", {"todos": A}, A),                   # a list: frame
    ("todo/write", {"todos": A}, A),                   # identical list, new reference: frame
    ("step/end", {"turn": 1, "step": 1}, None),        # unrelated: no frame
    ("turn/end", {"turn": 1}, None),                   # the plan stays: no frame
    ("turn/start", {"turn": 2}, "null"),               # cleared: frame null
    ("todo/write", {"todos": []}, []),                 # explicit empty list: frame []
]


def registry() -> ProjectionRegistry:
    projections = ProjectionRegistry()
    projections.register(TODOS_UNIT)
    return projections


def logged(rows: list[tuple[str, dict[str, Any], Any]]) -> list[dict[str, Any]]:
    """The rows as a log holds them: every event's data its own object, as a read or an append makes it."""
    return [{"type": kind, "seq": seq, "time": 0, "data": copy.deepcopy(data)}
            for seq, (kind, data, _) in enumerate(rows)]


def test_apply_reports_exactly_the_push_frames_of_the_table() -> None:
    fold = registry().fold_for()
    reported = []
    for event in logged(TABLE):
        reported.append(fold.apply(event))
    want = [[] if view is None else [Change("todos", None if view == "null" else view)] for _, _, view in TABLE]
    assert reported == want
    assert fold.seq == len(TABLE) - 1
    assert fold.snapshot() == {"asOfSeq": len(TABLE) - 1, "values": {"todos": []}}


def test_a_detached_fold_equals_the_live_snapshot_and_leaves_the_cells_alone(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    for kind, data, _ in TABLE[:5]:
        session.append(kind, data)
    events = session.events[:]
    fold = ctx.session_projections.fold_for(events[:2])
    assert fold.snapshot() == {"asOfSeq": 1, "values": {"todos": A}}
    fold.extend(events[2:])
    assert fold.snapshot() == ctx.session_projections.snapshot(session)
    fold.apply({"type": "turn/start", "seq": 5, "time": 0, "data": {"turn": 2}})
    assert ctx.session_projections.snapshot(session) == {"asOfSeq": 4, "values": {"todos": A}}


def test_a_detached_fold_runs_on_another_thread() -> None:
    events = logged(TABLE)
    fold = registry().fold_for(events[:3])
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append([fold.apply(event) for event in events[3:]]))
    worker.start()
    worker.join()
    assert out == [[[], [], [Change("todos", None)], [Change("todos", [])]]]


def test_extend_and_apply_agree_and_name_the_event_behind_the_state() -> None:
    events = logged(TABLE)
    one, many = registry().fold_for(), registry().fold_for()
    for event in events:
        one.apply(event)
    many.extend(events[:4])
    many.extend(events[4:])
    assert one.states == many.states and one.seq == many.seq == len(events) - 1
    assert one.changed_by("todos") is events[-1] and many.changed_by("todos") is events[-1]
    assert registry().fold_for(events[:5]).changed_by("todos") is events[2]
    assert registry().fold_for().changed_by("todos") is None


def test_a_fold_from_a_checkpoint_folds_the_tail_only() -> None:
    events = logged(TABLE)
    rows = registry().fold_for(events[:3]).checkpoint()
    assert rows == {"todos": {"ver": 2, "seq": 2, "val": A}}
    fold = registry().fold_for(events[3:5], rows, 3)
    assert fold.snapshot() == {"asOfSeq": 4, "values": {"todos": A}}
    with pytest.raises(ValueError, match="cannot restore from seq 3"):
        registry().fold_for(events[3:5], {}, 3)


def test_the_rule_and_standing_plan_are_the_units_apply() -> None:
    events = logged(TABLE)
    for end in range(len(events) + 1):
        assert standing_plan(events[:end]) == registry().fold_for(events[:end]).states["todos"]
    with pytest.raises(UnfoldableEvent, match=r"^the todo/write at seq 3 has no data$"):
        registry().fold_for([*events[:3], {"type": "todo/write", "seq": 3}])
    with pytest.raises(UnfoldableEvent, match=r"^the event at seq 0 has no type$"):
        standing_plan([{"seq": 0, "data": {}}])


def test_commit_listeners_hear_each_event_once_with_its_changes_in_log_order() -> None:
    store = SessionStore()
    projections = registry()
    store.listen(projections.on_event)
    heard: list[tuple[str, int, list[Change]]] = []

    def on_commit(session: Session, event: Any, changes: Any) -> None:
        heard.append((session.id, event["seq"], list(changes)))

    dispose = projections.on_commit(on_commit)
    session = store.create("s")
    for kind, data, _ in TABLE:
        session.append(kind, data)
    assert heard == [("s", seq, [] if view is None else [Change("todos", None if view == "null" else view)])
                     for seq, (_, _, view) in enumerate(TABLE)]
    dispose()
    session.append("turn/end", {"turn": 2})
    assert len(heard) == len(TABLE)


def test_commit_listeners_hear_events_even_without_units() -> None:
    store = SessionStore()
    projections = ProjectionRegistry()
    store.listen(projections.on_event)
    heard: list[tuple[int, Any]] = []
    projections.on_commit(lambda _session, event, changes: heard.append((event["seq"], list(changes))))
    store.create("s").append("turn/start", {"turn": 1})
    assert heard == [(0, [])]


def test_a_unit_registered_later_is_folded_over_the_whole_log(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False)
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": A})
    ctx.session_projections.register(TODOS_UNIT)
    assert ctx.session_projections.snapshot(session) == {"asOfSeq": 1, "values": {"todos": A}}
    changes: list[Any] = []
    ctx.session_projections.on_change(lambda _s, key, value, seq: changes.append((key, value, seq)))
    session.append("turn/start", {"turn": 2})
    assert changes == [("todos", None, 2)]
