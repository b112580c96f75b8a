"""The OpenAI Agents SDK adapter, driven by the SDK's own ``Runner`` loop and its ``ScriptedModel`` (no network)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import needs

needs.module("agents")

from agents import Agent, FunctionTool, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call

from dsh_todo.adapters.openai_agents import TodoBinding, bind_todo, todo_write_tool
from tests.adapters.scenario import CANONICAL, FINAL_TEXT, RAW, STEPS, TEXT, assert_log, assert_native_tool
from tests.conftest import todo_writes

pytestmark = pytest.mark.anyio

NO_TRACING = RunConfig(tracing_disabled=True)


def scripted_model() -> ScriptedModel:
    steps: list[Any] = [[function_call("todo_write", RAW[cid], call_id=cid) for cid in step] for step in STEPS]
    return ScriptedModel([*steps, [assistant_message(FINAL_TEXT)]])


def outputs_read_by_the_model(model: ScriptedModel) -> dict[str, str]:
    """The ``function_call_output`` items the SDK sent back to the model in its last request."""
    last = model.last_call
    assert last is not None and isinstance(last.input, list)
    return {item["call_id"]: item["output"] for item in last.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


@pytest.fixture
def todos() -> Any:
    with bind_todo() as binding:
        yield binding


async def test_the_agent_loop_reads_the_contract_texts_and_the_log_holds_the_run(todos: TodoBinding) -> None:
    model = scripted_model()
    agent = Agent(name="planner", instructions="Plan.", model=model, tools=[todo_write_tool(todos)])
    with todos.turn():
        result = await Runner.run(agent, "Fix the bug", run_config=NO_TRACING)
    model.assert_complete()
    assert result.final_output == FINAL_TEXT
    assert outputs_read_by_the_model(model) == TEXT
    assert_log(todos)


async def test_the_model_is_offered_the_native_tool_unchanged(todos: TodoBinding) -> None:
    tool = todo_write_tool(todos)
    assert isinstance(tool, FunctionTool) and tool.strict_json_schema is False
    model = scripted_model()
    agent = Agent(name="planner", model=model, tools=[tool])
    await Runner.run(agent, "Fix the bug", run_config=NO_TRACING)
    offered = [call.tools for call in model.calls]
    assert len(offered) == len(STEPS) + 1
    for tools in offered:  # the same bytes on every request (prefix caching)
        (seen,) = tools
        assert isinstance(seen, FunctionTool)
        assert_native_tool(todos, seen.name, seen.description, seen.params_json_schema)


async def test_without_a_turn_a_rejected_call_leaves_the_plan_alone(todos: TodoBinding) -> None:
    """Repro (issue 12): a run not wrapped in ``todos.turn()``, whose valid call is followed by rejected ones: each
    call was a turn of its own, so the last (rejected) call's ``turn/start`` left no standing plan."""
    model = scripted_model()
    agent = Agent(name="planner", model=model, tools=[todo_write_tool(todos)])
    await Runner.run(agent, "Fix the bug", run_config=NO_TRACING)
    assert outputs_read_by_the_model(model) == TEXT
    assert todo_writes(todos.session) == [CANONICAL]
    assert todos.plan == CANONICAL
    # A second run without a turn (its only call rejected) changes nothing either.
    again = ScriptedModel([[function_call("todo_write", RAW["c4"], call_id="c5")], [assistant_message(FINAL_TEXT)]])
    await Runner.run(Agent(name="planner", model=again, tools=[todo_write_tool(todos)]), "Again", run_config=NO_TRACING)
    assert todos.plan == CANONICAL
