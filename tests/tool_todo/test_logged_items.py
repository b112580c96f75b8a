"""The plugin's logged items: one frozen object per ``(content, status)``, kept in a bounded table."""

from __future__ import annotations

import pytest

import dsh_todo.tool_todo.tool as tool_todo_module
from dsh_todo.harness import Agent
from dsh_todo.harness.tools.speed import LeafTable
from tests.conftest import BootFactory

pytestmark = pytest.mark.anyio


async def test_an_unchanged_item_is_logged_as_the_same_frozen_object(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = Agent("a", ctx.sessions.create("a"))
    first = [{"content": " plan ", "status": "completed"}, {"content": "build", "status": "in_progress"}]
    second = [{"content": " plan ", "status": "completed"}, {"content": "build", "status": "completed"}]
    await ctx.tools.execute("todo_write", {"todos": first}, agent=agent)
    await ctx.tools.execute("todo_write", {"todos": second}, agent=agent)
    one, two = (event["data"]["todos"] for event in agent.session.events)
    assert one[0] is two[0]
    assert one[1] is not two[1] and one[1] == {"content": "build", "status": "in_progress"}
    assert one is not two
    with pytest.raises(TypeError):
        two[0]["status"] = "pending"


async def test_a_remembered_item_still_goes_through_every_list_rule(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=False)
    agent = Agent("a", ctx.sessions.create("a"))
    ok = [{"content": " plan ", "status": "in_progress"}, {"content": "build", "status": "in_progress"}]
    first = await ctx.tools.execute("todo_write", {"todos": ok[:1]}, agent=agent)
    assert not first.is_error
    twice = await ctx.tools.execute("todo_write", {"todos": [ok[0], {"content": "plan", "status": "pending"}]},
                                    agent=agent)
    assert twice.text == 'Error: invalid todos: duplicate content "plan"'
    active = await ctx.tools.execute("todo_write", {"todos": ok}, agent=agent)
    assert active.text == "Error: invalid todos: at most one task may be in_progress (got 2)"
    blank = [{"content": "   ", "status": "pending"}]
    for _ in range(2):
        refused = await ctx.tools.execute("todo_write", {"todos": blank}, agent=agent)
        assert refused.text == "Error: invalid todo: `content` must be a non-empty string"
    assert agent.session.seq == 1


async def test_the_table_of_items_stays_bounded(make_ctx: BootFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_todo_module, "_items", LeafTable(kept=8))
    ctx = make_ctx(allow_parallel=True)
    agent = Agent("a", ctx.sessions.create("a"))
    for n in range(10):
        todos = [{"content": f"task {n}-{k}", "status": "pending"} for k in range(3)]
        result = await ctx.tools.execute("todo_write", {"todos": todos}, agent=agent)
        assert not result.is_error
        assert agent.session.events[-1]["data"]["todos"] == todos
    assert 0 < len(tool_todo_module._items) <= 8


async def test_a_long_item_is_logged_but_not_remembered(make_ctx: BootFactory,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_todo_module, "_items", LeafTable(longest=tool_todo_module.ITEM_TEXT_KEPT))
    ctx = make_ctx(allow_parallel=True)
    agent = Agent("a", ctx.sessions.create("a"))
    long = "x" * (tool_todo_module.ITEM_TEXT_KEPT + 1)
    todos = [{"content": long, "status": "pending"}, {"content": "short", "status": "pending"}]
    for _ in range(2):
        assert not (await ctx.tools.execute("todo_write", {"todos": todos}, agent=agent)).is_error
    one, two = (event["data"]["todos"] for event in agent.session.events)
    assert one == two == todos
    assert one[1] is two[1] and one[0] is not two[0]
    assert list(tool_todo_module._items) == [("short", "pending")]
