"""The pydantic-ai adapter, driven by pydantic-ai's own agent run with its ``FunctionModel`` / ``TestModel``.

The capability (``capabilities=[...]``) makes each run one turn; the bare toolset (``toolsets=[...]``) joins a turn
the caller opened, or the binding's own standing turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests import needs

needs.module("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from dsh_todo.adapters.pydantic_ai import (
    TodoBinding,
    TodoCapability,
    TodoToolset,
    bind_todo,
    todo_write_capability,
    todo_write_toolset,
)
from tests.adapters.scenario import (
    CANONICAL,
    FINAL_TEXT,
    RAW,
    STEPS,
    TEXT,
    assert_log,
    assert_native_tool,
    hang_on_an_empty_list,
)
from tests.advertised import assert_advertised
from tests.conftest import todo_writes

pytestmark = pytest.mark.anyio


class Script:
    """A ``FunctionModel`` function playing the scenario and recording what each request showed the model."""

    def __init__(self, steps: list[list[str]] = STEPS, raw: dict[str, str] = RAW, *,
                 fail_with: Exception | None = None) -> None:
        self.steps = [list(step) for step in steps]
        self.raw = raw
        self.fail_with = fail_with
        self.infos: list[AgentInfo] = []
        self.returns: dict[str, Any] = {}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        for message in messages:
            for part in getattr(message, "parts", []):
                if isinstance(part, ToolReturnPart):
                    self.returns[part.tool_call_id] = part
        if self.steps:
            step = self.steps.pop(0)
            return ModelResponse(parts=[ToolCallPart("todo_write", self.raw[cid], tool_call_id=cid) for cid in step])
        if self.fail_with is not None:
            raise self.fail_with
        return ModelResponse(parts=[TextPart(FINAL_TEXT)])


@pytest.fixture
def todos() -> Any:
    with bind_todo() as binding:
        yield binding


async def test_an_agent_run_reads_the_contract_texts_and_is_one_turn(todos: TodoBinding) -> None:
    script = Script()
    agent = Agent(FunctionModel(script), capabilities=[todo_write_capability(todos)])
    result = await agent.run("Fix the bug")
    assert result.output == FINAL_TEXT
    # What the model read back: ordinary (successful) tool returns holding exactly the contract's text.
    assert {cid: part.content for cid, part in script.returns.items()} == TEXT
    assert {part.outcome for part in script.returns.values()} == {"success"}
    assert {cid: part.model_response_str() for cid, part in script.returns.items()} == TEXT
    assert_log(todos)


async def test_the_model_is_offered_the_native_tool_as_a_barrier(todos: TodoBinding) -> None:
    script = Script()
    await Agent(FunctionModel(script), capabilities=[todo_write_capability(todos)]).run("Fix the bug")
    assert len(script.infos) == len(STEPS) + 1
    for info in script.infos:
        (tool,) = info.function_tools
        assert tool.sequential is True
        assert_native_tool(todos, tool.name, tool.description or "", tool.parameters_json_schema)


async def test_each_run_is_a_turn_even_when_the_agent_is_entered_once(todos: TodoBinding) -> None:
    agent = Agent(TestModel(), capabilities=[todo_write_capability(todos)])
    async with agent:
        first = await agent.run("one")
        second = await agent.run("two")
    assert first.output == second.output == (
        '{"todo_write":"Updated todo list: 1 pending, 0 in progress, 0 completed."}')
    types = [event["type"] for event in todos.session.events]
    assert types.count("turn/start") == types.count("turn/end") == 2
    assert [e["data"]["turn"] for e in todos.session.events if e["type"] == "turn/start"] == [1, 2]
    # TestModel sends its arguments as an object; they are logged as compact JSON.
    calls = [e["data"]["arguments"] for e in todos.session.events if e["type"] == "tool/call"]
    assert calls == ['{"todos":[{"content":"a","status":"pending"}]}'] * 2
    assert todos.plan == [{"content": "a", "status": "pending"}]


@pytest.mark.parametrize("kind", ["capability", "toolset"])
async def test_a_run_inside_an_open_turn_joins_it(todos: TodoBinding, kind: str) -> None:
    if kind == "capability":
        agent = Agent(FunctionModel(Script()), capabilities=[todo_write_capability(todos)])
    else:
        agent = Agent(FunctionModel(Script()), toolsets=[todo_write_toolset(todos)])
    async with todos.turn():
        await agent.run("Fix the bug")
        assert todos.session.events[-1]["type"] == "step/end"  # the run did not close the turn
    assert_log(todos)


async def test_the_bare_toolset_outside_a_turn_leaves_the_plan_to_accepted_calls(todos: TodoBinding) -> None:
    """Repro (issue 12): the bare toolset with no turn around the run gave each call a turn of its own, so the
    rejected calls after the valid one cleared the standing plan."""
    script = Script()
    await Agent(FunctionModel(script), toolsets=[todo_write_toolset(todos)]).run("Fix the bug")
    assert {cid: part.content for cid, part in script.returns.items()} == TEXT
    assert todo_writes(todos.session) == [CANONICAL]
    assert todos.plan == CANONICAL


async def test_a_cancelled_run_closes_its_turn_aborted_and_keeps_the_plan(todos: TodoBinding) -> None:
    """A run cancelled while its tool call runs: the call still gets its error result, the turn ends ``aborted``, and
    the plan the run wrote before stands."""
    started = hang_on_an_empty_list(todos)
    script = Script([["c1"], ["c5"]], {**RAW, "c5": '{"todos":[]}'})
    run = asyncio.ensure_future(Agent(FunctionModel(script), capabilities=[todo_write_capability(todos)])
                                .run("Fix the bug"))
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    kinds = [event["type"] for event in todos.session.events]
    assert kinds[-6:] == ["step/start", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"]
    assert_advertised(todos.session.events[-5], todos.session.events[-4])
    assert todos.session.events[-3]["data"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert todos.session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert todos.plan == CANONICAL


async def test_a_failed_run_still_closes_its_turn_with_the_error(todos: TodoBinding) -> None:
    agent = Agent(FunctionModel(Script(fail_with=RuntimeError("model went away"))),
                  capabilities=[todo_write_capability(todos)])
    with pytest.raises(RuntimeError, match="model went away"):
        await agent.run("Fix the bug")
    last = todos.session.events[-1]
    assert last["type"] == "turn/end"
    assert last["data"]["reason"] == {"kind": "error", "error": {"name": "RuntimeError",
                                                                 "message": "model went away"}}
    assert todo_writes(todos.session) == [CANONICAL]
    assert todos.plan == CANONICAL  # turn/end keeps the plan


def test_run_sync_and_the_public_types(todos: TodoBinding) -> None:
    capability = todo_write_capability(todos, id="todo")
    assert isinstance(capability, TodoCapability)
    assert isinstance(capability.get_toolset(), TodoToolset) and capability.get_toolset().id == "todo"
    result = Agent(FunctionModel(Script([["c1"]])), capabilities=[capability]).run_sync("Fix the bug")
    assert result.output == FINAL_TEXT
    assert todos.plan == CANONICAL
    assert [e["type"] for e in todos.session.events][::len(todos.session.events) - 1] == ["turn/start", "turn/end"]


def test_openai_profiles_send_the_schema_unchanged(todos: TodoBinding) -> None:
    """pydantic-ai rewrites a tool schema for OpenAI models unless the tool says ``strict=False`` (it would close
    the root object with ``additionalProperties: false``, which the contract leaves open)."""
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    tool = todo_write_toolset(todos).tool_definition()
    assert tool.strict is False
    transformer = OpenAIJsonSchemaTransformer(dict(tool.parameters_json_schema), strict=tool.strict)
    sent = transformer.walk()
    assert_native_tool(todos, tool.name, tool.description or "", sent)
