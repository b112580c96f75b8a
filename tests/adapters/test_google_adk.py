"""The Google ADK adapter, driven by ADK's own ``Runner`` with a scripted ``BaseLlm`` (no network).

ADK's model layers hand a tool its arguments already parsed, so the scenario's call whose text is not JSON (``c3``)
is played as the nearest call ADK can carry: a call with no arguments (``args`` absent), which ADK passes as ``{}``.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from tests import needs

needs.module("google.adk")

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.genai import types
from pydantic import Field

from dsh_todo.adapters.common import open_turn
from dsh_todo.adapters.google_adk import TodoBinding, TodoWriteTool, bind_todo, run_turn, todo_write_tool
from dsh_todo.logview import read_session
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
from tests.conftest import plan_json, todo_writes

pytestmark = pytest.mark.anyio

NO_ARGS = 'Error: invalid arguments: missing required property "todos"'
LOGGED = {**RAW, "c3": "{}"}
"""What the log holds for each call: ADK's parsed arguments as compact JSON (``c3`` carried no arguments)."""
ANSWERED = {**TEXT, "c3": NO_ARGS}
"""What the model reads back for each call."""


def function_call(call_id: str, raw: str) -> types.FunctionCall:
    args = None if call_id == "c3" else json.loads(raw)
    return types.FunctionCall(id=call_id, name="todo_write", args=args)


class ScriptedLlm(BaseLlm):
    """ADK's model interface playing a script: each step's calls in one response, then the final text; keeps a copy
    of every ``LlmRequest`` ADK built, so a test reads what reached the model."""

    model: str = "scripted"
    steps: list[list[str]] = Field(default_factory=lambda: [list(step) for step in STEPS])
    raw: dict[str, str] = Field(default_factory=lambda: dict(RAW))
    fail_with: str | None = None
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        # A copy as it was sent (ADK edits the request in place); the tools themselves are kept, not copied.
        self.requests.append(LlmRequest(model=llm_request.model, contents=copy.deepcopy(llm_request.contents),
                                        config=llm_request.config.model_copy(deep=True),
                                        tools_dict=dict(llm_request.tools_dict)))
        if self.steps:
            parts = [types.Part(function_call=function_call(cid, self.raw[cid])) for cid in self.steps.pop(0)]
            yield LlmResponse(content=types.Content(role="model", parts=parts))
            return
        if self.fail_with is not None:
            raise RuntimeError(self.fail_with)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=FINAL_TEXT)]))


def function_responses(request: LlmRequest) -> dict[str, Any]:
    """The ``function_response`` parts of a request, by call id: what the model read back."""
    return {part.function_response.id: part.function_response.response
            for content in request.contents for part in content.parts or []
            if part.function_response is not None}


def runner_for(llm: ScriptedLlm, tool: BaseTool) -> InMemoryRunner:
    return InMemoryRunner(agent=LlmAgent(name="planner", model=llm, instruction="Plan.", tools=[tool]),
                          app_name="adapters")


async def invoke(llm: ScriptedLlm, tool: BaseTool, turn: TodoBinding | None = None, **run: Any) -> list[Any]:
    """One ``Runner`` invocation of an agent holding ``tool``, as a turn of ``turn`` (:func:`run_turn`) or bare;
    its events."""
    runner = runner_for(llm, tool)
    try:
        session = await runner.session_service.create_session(app_name="adapters", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="Fix the bug")])
        run = {"user_id": "u", "session_id": session.id, "new_message": message, **run}
        events = run_turn(turn, runner, **run) if turn is not None else runner.run_async(**run)
        return [event async for event in events]
    finally:
        await runner.close()


def final_text(events: list[Any]) -> str | None:
    content = events[-1].content
    return None if content is None or not content.parts else content.parts[0].text


HANGS = {**RAW, "c5": '{"todos":[]}'}


def assert_aborted_after_the_plan(todos: TodoBinding) -> None:
    """The run's call in flight is answered ``aborted`` in the log, the turn ends ``aborted``, no turn is left open,
    and the plan the run wrote before stands."""
    kinds = [event["type"] for event in todos.session.events]
    assert kinds.count("turn/start") == kinds.count("turn/end") == 1
    assert kinds[-6:] == ["step/start", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"]
    assert todos.session.events[-4]["data"]["callId"] == "c5"
    assert_advertised(todos.session.events[-5], todos.session.events[-4])
    assert todos.session.events[-3]["data"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    block = todos.session.events[-3]["data"]["message"]
    assert block["content"] == [{"type": "text", "text": "Error: tool call aborted"}]
    assert todos.session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert open_turn(todos.session) is None
    assert todos.plan == CANONICAL


@pytest.fixture
def todos() -> Any:
    with bind_todo() as binding:
        yield binding


async def test_an_invocation_reads_the_contract_texts_and_is_one_turn(todos: TodoBinding) -> None:
    llm = ScriptedLlm()
    events = await invoke(llm, todo_write_tool(todos), todos)
    assert final_text(events) == FINAL_TEXT
    assert len(llm.requests) == len(STEPS) + 1
    # What the model read back: ADK's wrapper for a non-dict result around exactly the contract's text, refusals
    # included (never an ``error`` key of ours, which ADK's Anthropic layer would send as JSON, not as the text).
    assert function_responses(llm.requests[-1]) == {cid: {"result": text} for cid, text in ANSWERED.items()}
    assert_log(todos, arguments=LOGGED, texts=ANSWERED)
    assert open_turn(todos.session) is None


async def test_every_model_request_declares_the_native_tool(todos: TodoBinding) -> None:
    tool = todo_write_tool(todos)
    assert isinstance(tool, TodoWriteTool) and isinstance(tool, BaseTool)
    llm = ScriptedLlm()
    await invoke(llm, tool)
    assert len(llm.requests) == len(STEPS) + 1
    for request in llm.requests:  # the same declaration on every request (prefix caching)
        assert request.config is not None and request.config.tools is not None
        [declared_tool] = request.config.tools
        assert isinstance(declared_tool, types.Tool) and declared_tool.function_declarations is not None
        [declared] = declared_tool.function_declarations
        assert declared.parameters is None  # Gemini's Schema type would reorder and drop keywords
        assert declared.response_json_schema is None
        assert_native_tool(todos, declared.name or "", declared.description or "", declared.parameters_json_schema)
        assert request.tools_dict == {"todo_write": tool}
        # ADK adds its identity line to the instruction, nothing about our tool.
        assert isinstance(request.config.system_instruction, str)
        assert request.config.system_instruction.startswith("Plan.")
        assert "todo" not in request.config.system_instruction


async def test_without_a_turn_the_calls_share_the_standing_turn(todos: TodoBinding) -> None:
    llm = ScriptedLlm()
    await invoke(llm, todo_write_tool(todos))
    assert function_responses(llm.requests[-1]) == {cid: {"result": text} for cid, text in ANSWERED.items()}
    assert todo_writes(todos.session) == [CANONICAL]
    assert todos.plan == CANONICAL
    # The binding's standing turn, still open for later calls; it ends when the binding closes.
    assert open_turn(todos.session) == (1, len(RAW), False)
    todos.close()
    assert_log(todos, arguments=LOGGED, texts=ANSWERED)


async def test_a_cancelled_invocation_closes_its_turn_aborted_and_keeps_the_plan(todos: TodoBinding) -> None:
    """The task running an invocation is cancelled while its tool call runs."""
    started = hang_on_an_empty_list(todos)
    llm = ScriptedLlm(steps=[["c1"], ["c5"]], raw=HANGS)
    task = asyncio.ensure_future(invoke(llm, todo_write_tool(todos), todos))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_aborted_after_the_plan(todos)


async def test_an_invocation_stopped_by_adks_abort_signal_ends_its_turn_aborted(todos: TodoBinding) -> None:
    """ADK's own way to stop a run: it ends the run without an exception, so the turn is ``aborted`` only because
    :func:`run_turn` looks at the signal (a bare ``todos.turn()`` around it would end ``completed``)."""
    started = hang_on_an_empty_list(todos)
    llm, signal = ScriptedLlm(steps=[["c1"], ["c5"]], raw=HANGS), asyncio.Event()
    task = asyncio.ensure_future(invoke(llm, todo_write_tool(todos), todos, abort_signal=signal))
    await asyncio.wait_for(started.wait(), 10)
    signal.set()
    events = await asyncio.wait_for(task, 10)
    # ADK answers the call in flight itself, in the run's events; the model is not asked again.
    last = events[-1].content.parts[0].function_response
    assert (last.id, last.response) == ("c5", {"error": "Invocation was aborted by client."})
    assert len(llm.requests) == 2
    assert_aborted_after_the_plan(todos)


async def test_an_invocation_its_consumer_stops_reading_ends_its_turn_aborted(todos: TodoBinding) -> None:
    llm = ScriptedLlm()
    runner = runner_for(llm, todo_write_tool(todos))
    session = await runner.session_service.create_session(app_name="adapters", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="Fix the bug")])
    events = run_turn(todos, runner, user_id="u", session_id=session.id, new_message=message)
    async for event in events:
        if event.content and event.content.parts and event.content.parts[0].function_response:
            break  # the answer to c1: the run is given up here
    await events.aclose()
    await runner.close()
    kinds = [event["type"] for event in todos.session.events]
    assert kinds == ["turn/start", "step/start", "assistant/message", "tool/call", "todo/write", "tool/result",
                     "step/end", "turn/end"]
    assert_advertised(todos.session.events[2], todos.session.events[3])
    assert todos.session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert todos.plan == CANONICAL


async def test_an_invocation_inside_an_open_turn_joins_it(todos: TodoBinding) -> None:
    async with todos.turn():
        await invoke(ScriptedLlm(), todo_write_tool(todos), todos)
        assert todos.session.events[-1]["type"] == "step/end"  # the invocation did not close the turn
    assert_log(todos, arguments=LOGGED, texts=ANSWERED)


async def test_a_failed_invocation_closes_its_turn_with_the_error(todos: TodoBinding) -> None:
    llm = ScriptedLlm(steps=[["c1"]], fail_with="model went away")
    with pytest.raises(RuntimeError, match="model went away"):
        await invoke(llm, todo_write_tool(todos), todos)
    last = todos.session.events[-1]
    assert last["type"] == "turn/end"
    assert last["data"]["reason"] == {"kind": "error", "error": {"name": "RuntimeError",
                                                                 "message": "model went away"}}
    assert todos.plan == CANONICAL  # turn/end keeps the plan


async def test_concurrent_invocations_on_one_session_are_serialised(todos: TodoBinding) -> None:
    """Two invocations at once, each :func:`run_turn`: the second joins the turn the first opened, and their calls
    are written one at a time (each step whole, never interleaved), as on every adapter."""
    first, second = ScriptedLlm(steps=[["c1"], ["c2"]]), ScriptedLlm(steps=[["c4"], ["c3"]])
    results = await asyncio.gather(invoke(first, todo_write_tool(todos), todos),
                                   invoke(second, todo_write_tool(todos), todos))
    assert [final_text(events) for events in results] == [FINAL_TEXT, FINAL_TEXT]
    assert function_responses(first.requests[-1]) == {"c1": {"result": TEXT["c1"]}, "c2": {"result": TEXT["c2"]}}
    assert function_responses(second.requests[-1]) == {"c4": {"result": TEXT["c4"]}, "c3": {"result": NO_ARGS}}
    events = list(todos.session.events)
    kinds = [event["type"] for event in events]
    for event in events:
        if event["type"] == "tool/call":
            body = ["todo/write", "tool/result"] if event["data"]["callId"] == "c1" else ["tool/result"]
            seq = event["seq"]
            assert kinds[seq - 2: seq] == ["step/start", "assistant/message"]
            assert_advertised(events[seq - 1], event)
            assert kinds[seq + 1: seq + 2 + len(body)] == [*body, "step/end"]
    calls = [e["data"]["callId"] for e in events if e["type"] == "tool/call"]
    assert sorted(calls) == ["c1", "c2", "c3", "c4"]
    assert set(calls[:2]) == {"c1", "c4"}, "both invocations were in flight at once"
    assert kinds.count("turn/start") == 1 and kinds[0] == "turn/start"
    assert todo_writes(todos.session) == [CANONICAL]
    assert todos.plan == CANONICAL


async def test_the_plan_survives_a_restart_and_dsh_todo_plan_shows_it(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    with bind_todo(root=root, session="adk-demo", cwd=str(tmp_path)) as todos:
        await invoke(ScriptedLlm(steps=[["c1"], ["c4"]]), todo_write_tool(todos), todos)
    [log] = list(root.rglob("session*.jsonl*"))
    assert plan_json(log) == CANONICAL
    with bind_todo(root=root, session="adk-demo") as todos:  # a new process would do the same
        assert todos.plan == CANONICAL
        llm = ScriptedLlm(steps=[["c2"]])
        await invoke(llm, todo_write_tool(todos), todos)
        assert function_responses(llm.requests[-1]) == {"c2": {"result": TEXT["c2"]}}
        assert todos.plan is None  # the run's turn/start cleared the old plan, as in DSH; its only call was refused
    kinds = [event["type"] for event in read_session(log).events]
    assert kinds.count("turn/start") == kinds.count("turn/end") == 2
