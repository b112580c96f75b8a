"""The OpenAI-compatible adapter against an in-process fake endpoint (httpx2's MockTransport).

Pins what goes over the wire: the tool as ``{"type":"function","function":{…}}`` with our exact schema bytes and no
``strict`` flag, the tool result as a ``role: "tool"`` message whose content is the model-visible text, and the
model's raw argument string reaching the log verbatim.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.llm.base import ModelError
from dsh_todo.harness.llm.wire import function_tool
from dsh_todo.jsonutil import dumps, loads
from tests import needs
from tests.conftest import BootFactory, todo_writes

httpx2 = needs.module("httpx2")
openai = needs.module("openai")

from dsh_todo.harness.llm.openai_compat import OpenAICompatibleModel

pytestmark = pytest.mark.anyio

RAW_ARGS = '{"todos": [{"content": "  inspect the failing test ", "status": "in_progress"}]}'


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {"id": "cmpl-1", "object": "chat.completion", "created": 1, "model": "deepseek-v4-flash",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}


class FakeEndpoint:
    """Answers chat completions from a list and records every request body."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: Any) -> Any:
        self.paths.append(request.url.path)
        self.bodies.append(loads(request.content))
        return httpx2.Response(200, json=self.replies.pop(0))


def model_for(endpoint: FakeEndpoint) -> OpenAICompatibleModel:
    client = openai.AsyncOpenAI(api_key="test-key", base_url="http://fake.invalid/v1", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)))
    return OpenAICompatibleModel("deepseek-v4-flash", client=client)


async def test_wire_request_and_tool_message(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    endpoint = FakeEndpoint([
        completion({"content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "todo_write", "arguments": RAW_ARGS}}]},
            "tool_calls"),
        completion({"content": "DONE"}, "stop"),
    ])
    session = ctx.sessions.create("s")
    outcome = await AgentLoop(ctx.tools, model_for(endpoint), system="sys").run_turn(Agent("a", session), "plan it")
    assert outcome.text == "DONE"
    assert endpoint.paths == ["/v1/chat/completions", "/v1/chat/completions"]
    first, second = endpoint.bodies
    assert first["model"] == "deepseek-v4-flash"
    assert first["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "plan it"}]
    expected_tool = function_tool(ctx.tools.schemas()[0])
    assert first["tools"] == [expected_tool]
    assert "strict" not in first["tools"][0]["function"]
    assert dumps(first["tools"][0]) == dumps(expected_tool)  # key order survives the trip
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_0",
                                      "content": "Updated todo list: 0 pending, 1 in progress, 0 completed."}
    assert second["messages"][-2]["tool_calls"][0]["function"]["arguments"] == RAW_ARGS
    tool_call = next(e for e in session.events if e["type"] == "tool/call")
    assert tool_call["data"]["arguments"] == RAW_ARGS
    assert todo_writes(session) == [[{"content": "inspect the failing test", "status": "in_progress"}]]
    message = next(e for e in session.events if e["type"] == "assistant/message" and e["data"].get("usage"))
    assert message["data"]["usage"] == {"inputTokens": 11, "outputTokens": 7}


async def test_rejected_call_reaches_the_model_as_error_text(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    endpoint = FakeEndpoint([
        completion({"content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "todo_write", "arguments": "{\"todos\": ["}}]},
            "tool_calls"),
        completion({"content": "sorry"}, "stop"),
    ])
    session = ctx.sessions.create("s")
    await AgentLoop(ctx.tools, model_for(endpoint)).run_turn(Agent("a", session), "go")
    assert endpoint.bodies[1]["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_0", "content": 'Error: invalid arguments: "arguments" must be an object'}
    assert todo_writes(session) == []


async def test_http_failure_is_a_clear_model_error() -> None:
    def fail(request: Any) -> Any:
        return httpx2.Response(401, json={"error": {"message": "bad key", "type": "auth"}})

    client = openai.AsyncOpenAI(api_key="k", base_url="http://fake.invalid/v1", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(fail)))
    model = OpenAICompatibleModel("m", client=client)
    from dsh_todo.harness.llm.base import ModelRequest
    from dsh_todo.harness.llm.history import UserText

    with pytest.raises(ModelError, match="bad key"):
        await model.complete(ModelRequest([UserText("x")], []))


def test_missing_key_is_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(ModelError, match="DEEPSEEK_API_KEY"):
        OpenAICompatibleModel()
