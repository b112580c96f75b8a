"""The turn writer itself: what no single front door exercises (two writers on one log, scope reasons)."""

from __future__ import annotations

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.turns import Turns, TurnScope, open_turn
from tests.conftest import BootFactory

pytestmark = pytest.mark.anyio

ONE = '{"todos":[{"content":"a","status":"in_progress"}]}'


async def test_two_writers_on_one_log_share_the_open_turn(make_ctx: BootFactory) -> None:
    """A writer remembers where its turn stands only while nobody else moves it: a second writer's steps are seen,
    and only the writer that opened the turn closes it."""
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    first, second = Turns.of(ctx, Agent("a", session)), Turns.of(ctx, Agent("b", session))
    await first.call_alone(ToolCallRequest("c1", "todo_write", ONE))
    await second.call_alone(ToolCallRequest("c2", "todo_write", "{}"))
    await first.call_alone(ToolCallRequest("c3", "todo_write", ONE))
    steps = [(e["data"]["turn"], e["data"]["step"]) for e in session.events if e["type"] == "tool/call"]
    assert steps == [(1, 1), (1, 2), (1, 3)]
    second.close()  # it opened nothing, so it ends nothing (and closes the session)
    assert open_turn(session) == (1, 3, False)


def test_a_scope_closes_with_the_reason_its_block_set(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    scope = TurnScope(turns, join=False)
    with scope as turn:
        turns.begin_step()  # left open: closing the turn closes it first
        scope.reason = {"kind": "max-tokens"}
    kinds = [(e["type"], e["data"]) for e in turns.session.events]
    assert kinds == [("turn/start", {"turn": turn}), ("step/start", {"turn": 1, "step": 1}),
                     ("step/end", {"turn": 1, "step": 1}), ("turn/end", {"turn": 1, "reason": {"kind": "max-tokens"}})]
    with pytest.raises(RuntimeError, match="no open turn"):
        turns.begin_step()
