"""Port of ``projection.spec.ts`` (SPEC §11.5) and the ``todos`` unit's rules (SPEC §6.1, §6.4, §13.6, §13.9)."""

from __future__ import annotations

from typing import Any

import pytest

import dsh_todo.harness.projections as projections_plugin
import dsh_todo.tool_todo as tool_todo_module
from dsh_todo.harness import Agent, Session
from dsh_todo.tool_todo.projection import TODOS_UNIT, InvalidTodosView, parse_todos
from tests.conftest import BootFactory

pytestmark = pytest.mark.anyio


def item(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


def user_message(session: Session, text: str = "hi") -> None:
    session.append("user/message", {"message": {"role": "user", "content": [{"type": "text", "text": text}]}},
                   surface_op="append")


async def test_no_write_projects_null(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    user_message(session)
    snapshot = ctx.session_projections.snapshot(session)
    assert snapshot == {"asOfSeq": session.seq - 1, "values": {"todos": None}}
    assert snapshot["asOfSeq"] == 0


async def test_empty_log_is_as_of_minus_one(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    assert ctx.session_projections.snapshot(ctx.sessions.create("s")) == {"asOfSeq": -1, "values": {"todos": None}}


async def test_last_write_is_the_value(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = Agent("a", ctx.sessions.create("a"))
    user_message(agent.session)
    await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=agent)
    second = [item("a", "completed"), item("b", "in_progress")]
    await ctx.tools.execute("todo_write", {"todos": second}, agent=agent)
    snapshot = ctx.session_projections.snapshot(agent.session)
    assert snapshot["values"]["todos"] == second
    assert snapshot["asOfSeq"] == agent.session.seq - 1 == 2


async def test_turn_end_keeps_the_plan_and_the_next_turn_start_clears_it(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = Agent("a", ctx.sessions.create("a"))
    registry = ctx.session_projections
    agent.session.append("turn/start", {"turn": 1})
    await ctx.tools.execute("todo_write", {"todos": [item("done", "completed")]}, agent=agent)
    agent.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert registry.snapshot(agent.session)["values"]["todos"] == [item("done", "completed")]
    agent.session.append("turn/start", {"turn": 2})
    snapshot = registry.snapshot(agent.session)
    assert snapshot == {"asOfSeq": agent.session.seq - 1, "values": {"todos": None}}


async def test_tool_not_composed_means_no_todos_key(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False)
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": [item("a")]})
    snapshot = ctx.session_projections.snapshot(session)
    assert snapshot == {"asOfSeq": 0, "values": {}}
    assert "todos" not in snapshot["values"]


async def test_mounting_the_tool_late_then_disposing_it(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False)
    session = ctx.sessions.create("s")
    user_message(session)
    fiber = ctx.plugin(tool_todo_module, {"allowParallelInProgress": True})
    assert ctx.session_projections.snapshot(session)["values"] == {"todos": None}
    fiber.dispose()
    assert "todos" not in ctx.session_projections.snapshot(session)["values"]


async def test_a_late_unit_folds_the_whole_in_memory_log(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False)
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": [item("early")]})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    ctx.plugin(tool_todo_module, {"allowParallelInProgress": True})
    assert ctx.session_projections.state_of(session, "todos") == [item("early")]
    session.append("todo/write", {"todos": []})
    assert ctx.session_projections.snapshot(session) == {"asOfSeq": 3, "values": {"todos": []}}


async def test_explicit_empty_write_is_not_null(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = Agent("a", ctx.sessions.create("a"))
    await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=agent)
    await ctx.tools.execute("todo_write", {"todos": []}, agent=agent)
    assert ctx.session_projections.snapshot(agent.session)["values"]["todos"] == []


# -- §6.4: which events push a frame --------------------------------------------------------------------------

async def test_push_frames_follow_state_identity(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    frames: list[tuple[str, str, Any, int]] = []
    ctx.session_projections.on_change(lambda s, key, value, seq: frames.append((s.id, key, value, seq)))
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})                                   # 0: null -> null, no frame
    session.append("step/start", {"turn": 1, "step": 1})                        # 1: unrelated, no frame
    session.append("todo/write", {"todos": [item("a")]})                       # 2: frame
    session.append("todo/write", {"todos": [item("a")]})                       # 3: identical list, still a frame
    session.append("step/end", {"turn": 1, "step": 1})                          # 4: no frame
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})    # 5: keeps, no frame
    session.append("todo/write", {"todos": []})                                 # 6: frame with []
    session.append("turn/start", {"turn": 2})                                   # 7: [] -> null, frame
    session.append("turn/start", {"turn": 3})                                   # 8: null -> null, no frame
    assert frames == [("s", "todos", [item("a")], 2), ("s", "todos", [item("a")], 3), ("s", "todos", [], 6),
                      ("s", "todos", None, 7)]


async def test_disposed_change_listener_hears_nothing(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    frames: list[int] = []
    stop = ctx.session_projections.on_change(lambda s, key, value, seq: frames.append(seq))
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": []})
    stop()
    session.append("todo/write", {"todos": []})
    assert frames == [0]


# -- the unit itself ------------------------------------------------------------------------------------------

def test_unit_shape() -> None:
    assert TODOS_UNIT.key == "todos"
    assert TODOS_UNIT.state_version == 2
    assert TODOS_UNIT.init() is None
    assert TODOS_UNIT.wire is not None


def test_unit_apply_identity_rules() -> None:
    state = [item("a")]
    written = TODOS_UNIT.apply(state, {"type": "todo/write", "seq": 1, "time": 0, "data": {"todos": [item("a")]}})
    assert written == state and written is not state
    for kind, data in (("turn/end", {"turn": 1, "reason": {"kind": "completed"}}), ("step/start", {}),
                       ("user/message", {}), ("custom/x", {"todos": []})):
        assert TODOS_UNIT.apply(state, {"type": kind, "seq": 2, "time": 0, "data": data}) is state
    assert TODOS_UNIT.apply(state, {"type": "turn/start", "seq": 3, "time": 0, "data": {"turn": 2}}) is None


def test_view_strips_unknown_item_keys_but_state_keeps_them(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": [{"content": "a", "status": "pending", "extra": 1}]})
    assert ctx.session_projections.state_of(session, "todos") == [{"content": "a", "status": "pending", "extra": 1}]
    assert ctx.session_projections.snapshot(session)["values"]["todos"] == [item("a")]


@pytest.mark.parametrize("bad", [
    pytest.param([item("a", "paused")], id="status"),
    pytest.param([{"content": 1, "status": "pending"}], id="content"),
    pytest.param(["a"], id="item"),
    pytest.param("nope", id="not-a-list"),
])
def test_a_malformed_hand_written_event_breaks_snapshots_not_appends(make_ctx: BootFactory, bad: Any) -> None:
    ctx = make_ctx(allow_parallel=True)
    frames: list[int] = []
    ctx.session_projections.on_change(lambda s, key, value, seq: frames.append(seq))
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": bad})
    assert session.seq == 1
    assert frames == []
    with pytest.raises(InvalidTodosView):
        ctx.session_projections.snapshot(session)
    with pytest.raises(InvalidTodosView):
        parse_todos(bad)


def test_parse_todos_accepts_null_and_lists() -> None:
    assert parse_todos(None) is None
    assert parse_todos([]) == []
    assert parse_todos([item("a", "in_progress")]) == [item("a", "in_progress")]


def test_registry_mounted_after_the_tool_registers_the_unit(make_ctx: BootFactory) -> None:
    ctx = make_ctx(projections=False, allow_parallel=True)
    assert not ctx.has("session_projections")
    registry_fiber = ctx.plugin(projections_plugin)
    assert ctx.session_projections.keys() == ["todos"]
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": [item("a")]})
    assert ctx.session_projections.snapshot(session)["values"]["todos"] == [item("a")]
    registry_fiber.dispose()
    assert not ctx.has("session_projections")
