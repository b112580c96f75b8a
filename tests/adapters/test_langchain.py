"""The LangChain adapter, driven by a minimal tool-calling loop over langchain-core's own fake chat model.

langchain-core has no agent loop of its own (LangGraph's ``ToolNode`` does what the loop below does: invoke the
tool with each ``ToolCall``). The fake model's replies carry the raw OpenAI-style tool calls, so LangChain's own
parser decides what reaches the tool, as with a real provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests import needs

needs.module("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from dsh_todo.adapters.langchain import TodoBinding, TodoWriteTool, bind_todo, todo_write_tool
from tests.adapters.scenario import CANONICAL, FINAL_TEXT, RAW, STEPS, TEXT, assert_log, assert_native_tool

pytestmark = pytest.mark.anyio


class ToolCallingFake(GenericFakeChatModel):
    """langchain-core's ``GenericFakeChatModel`` plus ``bind_tools`` as real chat models do it (OpenAI format),
    recording every request: the messages and the tools bound to it."""

    requests: list[tuple[list[BaseMessage], Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.requests.append((list(messages), kwargs.get("tools")))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def raw_call(call_id: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "todo_write", "arguments": arguments}}


def scripted_model(steps: list[list[str]] = STEPS, raw: dict[str, str] = RAW) -> ToolCallingFake:
    replies: list[AIMessage | str] = [
        AIMessage("", additional_kwargs={"tool_calls": [raw_call(cid, raw[cid]) for cid in step]}) for step in steps]
    return ToolCallingFake(messages=iter([*replies, FINAL_TEXT]))


def run_loop(model: ToolCallingFake, tool: TodoWriteTool) -> list[BaseMessage]:
    bound = model.bind_tools([tool])
    messages: list[BaseMessage] = [HumanMessage("Fix the bug")]
    while True:
        reply = bound.invoke(messages)
        messages.append(reply)
        calls = [*reply.tool_calls, *reply.invalid_tool_calls]
        if not calls:
            return messages
        messages += [tool.invoke(call) for call in calls]


async def run_loop_async(model: ToolCallingFake, tool: TodoWriteTool) -> list[BaseMessage]:
    bound = model.bind_tools([tool])
    messages: list[BaseMessage] = [HumanMessage("Fix the bug")]
    while True:
        reply = await bound.ainvoke(messages)
        messages.append(reply)
        calls = [*reply.tool_calls, *reply.invalid_tool_calls]
        if not calls:
            return messages
        messages += [await tool.ainvoke(call) for call in calls]


@pytest.fixture
def todos() -> Any:
    with bind_todo() as binding:
        yield binding


def check_run(todos: TodoBinding, model: ToolCallingFake, messages: list[BaseMessage]) -> None:
    assert isinstance(messages[-1], AIMessage) and messages[-1].content == FINAL_TEXT
    answers = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert {cid: m.content for cid, m in answers.items()} == TEXT
    assert {cid: m.status for cid, m in answers.items()} == {"c1": "success", "c2": "error", "c3": "error",
                                                             "c4": "error"}
    assert answers["c1"].artifact == {"todos": CANONICAL,
                                      "counts": {"pending": 1, "inProgress": 1, "completed": 1}}
    assert answers["c2"].artifact is None
    # What the model read back in its last request is exactly the contract's text.
    last_messages, _ = model.requests[-1]
    assert {m.tool_call_id: m.content for m in last_messages if isinstance(m, ToolMessage)} == TEXT
    # Every request carried our exact tool.
    assert len(model.requests) == len(STEPS) + 1
    for _, tools in model.requests:
        (tool,) = tools
        assert tool["type"] == "function"
        function = tool["function"]
        assert list(function) == ["name", "description", "parameters"]
        assert_native_tool(todos, function["name"], function["description"], function["parameters"])
    assert_log(todos)


def test_sync_loop_reads_the_contract_texts_and_the_log_holds_the_run(todos: TodoBinding) -> None:
    model = scripted_model()
    tool = todo_write_tool(todos)
    with todos.turn():
        messages = run_loop(model, tool)
    check_run(todos, model, messages)


async def test_async_loop_reads_the_contract_texts_and_the_log_holds_the_run(todos: TodoBinding) -> None:
    model = scripted_model()
    tool = todo_write_tool(todos)
    async with todos.turn():
        messages = await run_loop_async(model, tool)
    check_run(todos, model, messages)


async def test_sync_invoke_works_inside_a_running_event_loop(todos: TodoBinding) -> None:
    tool = todo_write_tool(todos)
    assert tool.invoke(RAW["c1"]) == TEXT["c1"]
    assert todos.plan == CANONICAL


def test_raw_text_and_parsed_arguments_without_a_call_id_answer_the_text(todos: TodoBinding) -> None:
    tool = todo_write_tool(todos)
    assert tool.invoke(RAW["c3"]) == TEXT["c3"]
    assert tool.invoke({"todos": []}) == "Updated todo list: 0 pending, 0 in progress, 0 completed."
    assert tool.invoke({"todos": [{"content": "a", "status": "pending", "due": 1}]}) == (
        'Error: invalid arguments: "todos[0].due" is not a declared property (additionalProperties: false)')
    calls = [e["data"]["arguments"] for e in todos.session.events if e["type"] == "tool/call"]
    assert calls[0] == RAW["c3"]  # raw text is logged verbatim
    assert calls[1] == '{"todos":[]}'  # parsed arguments are logged as compact JSON


def test_langchain_turns_null_arguments_into_an_empty_object_before_the_tool(todos: TodoBinding) -> None:
    """The documented limit: LangChain's parser, not ours, decides that ``null`` means ``{}``."""
    model = scripted_model([["n1"]], {"n1": "null"})
    messages = run_loop(model, todo_write_tool(todos))
    (answer,) = [m for m in messages if isinstance(m, ToolMessage)]
    assert answer.content == 'Error: invalid arguments: missing required property "todos"'


def test_without_a_turn_a_rejected_call_leaves_the_plan_alone(todos: TodoBinding) -> None:
    """Repro (issue 12): ``tool.invoke`` outside any turn gave each call a turn of its own, so a rejected call after
    a valid one left no standing plan. Played twice: single calls, then the whole scripted loop."""
    tool = todo_write_tool(todos)
    assert tool.invoke(RAW["c1"]) == TEXT["c1"]
    assert tool.invoke(RAW["c4"]) == TEXT["c4"]
    assert todos.plan == CANONICAL
    messages = run_loop(scripted_model(), tool)
    assert {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)} == TEXT
    assert todos.plan == CANONICAL
