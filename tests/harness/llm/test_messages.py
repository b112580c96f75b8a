"""The Anthropic Messages adapter (DSH 0.2's wire) through the real ``anthropic`` client, against a scripted
Messages endpoint on 127.0.0.1 (the one the Claude Code test uses), and its stream reader on hand-made events.

Pins what goes over the wire: ``POST /v1/messages`` with ``x-api-key`` and ``anthropic-version: 2023-06-01``,
``stream: true``, the tool as ``{"name","description","input_schema"}`` with our exact schema, each result as a
``tool_result`` with the log's ``is_error`` and its exact text; and what comes back: the raw arguments verbatim in
the log, the usage as DSH 0.2 logs it, an HTTP failure as one line.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.llm.base import ModelError, ModelRequest
from dsh_todo.harness.llm.history import UserText
from dsh_todo.harness.llm.messages import MessagesModel, StreamReader, messages_tool
from dsh_todo.jsonutil import dumps
from tests.carriers.mcp.agents.anthropic_fake import script, tool_results
from tests.carriers.mcp.agents.common import Reply, Request, fake_model
from tests.conftest import BootFactory, todo_writes

pytestmark = pytest.mark.anyio

ACCEPTED = '{"todos": [{"content": "  inspect the failing test ", "status": "in_progress"}]}'
REFUSED = '{"todos": [{"content": "inspect the failing test", "status": "done"}]}'
UPDATED = "Updated todo list: 0 pending, 1 in progress, 0 completed."
REFUSAL = 'Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]'


def model_at(url: str, **options: Any) -> MessagesModel:
    return MessagesModel("deepseek-flash", api_key="test-key", base_url=url, **options)


async def test_a_turn_over_the_messages_wire(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    with fake_model(script([ACCEPTED, REFUSED], "DONE")) as fake:
        outcome = await AgentLoop(ctx.tools, model_at(fake.url), system="sys").run_turn(Agent("a", session), "plan")
    assert outcome.reason == {"kind": "completed"} and outcome.text == "DONE"
    assert [(r.method, r.path) for r in fake.requests] == [("POST", "/v1/messages")] * 3
    for request in fake.requests:
        assert request.headers["x-api-key"] == "test-key"
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in request.headers
    first, second, third = (request.body for request in fake.requests)
    assert first["stream"] is True
    assert first["model"] == "deepseek-flash"
    assert first["system"] == "sys"
    assert first["thinking"] == {"type": "disabled"}
    assert first["messages"] == [{"role": "user", "content": [{"type": "text", "text": "plan"}]}]
    [schema] = ctx.tools.schemas()
    assert first["tools"] == [{"name": "todo_write", "description": schema["description"],
                               "input_schema": schema["parameters"]}]
    assert dumps(first["tools"][0]) == dumps(messages_tool(schema))  # key order survives the trip
    assert tool_results(second) == [{"type": "tool_result", "tool_use_id": "toolu_01",
                                     "content": [{"type": "text", "text": UPDATED}], "is_error": False}]
    assert tool_results(third)[1] == {"type": "tool_result", "tool_use_id": "toolu_02",
                                      "content": [{"type": "text", "text": REFUSAL}], "is_error": True}
    # the call went back as the model made it: its input the parsed arguments
    assert second["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_01", "name": "todo_write",
         "input": {"todos": [{"content": "  inspect the failing test ", "status": "in_progress"}]}}]}
    calls = [e["data"]["arguments"] for e in session.events if e["type"] == "tool/call"]
    assert calls == [ACCEPTED, REFUSED]  # the raw strings, byte for byte
    assert todo_writes(session) == [[{"content": "inspect the failing test", "status": "in_progress"}]]
    assistant = [e["data"] for e in session.events if e["type"] == "assistant/message"]
    assert assistant[0]["message"]["source"] == {"kind": "model", "provider": "deepseek-official",
                                                 "model": "deepseek-flash"}
    assert assistant[0]["usage"] == {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 0,
                                     "cacheWriteTokens": 0, "totalTokens": 15}


def failing(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Any:
    def answer(request: Request) -> Reply:
        return Reply(status, {"type": "error", "error": {"type": kind, "message": message}}, headers=headers or {})
    return answer


async def failure(answer: Any) -> tuple[str, int, str]:
    """The one-line error a request to an endpoint answering so raises, how many requests it made, and the URL."""
    with fake_model(answer) as fake, pytest.raises(ModelError) as caught:
        await model_at(fake.url).complete(ModelRequest([UserText("x")], []))
    return str(caught.value), len(fake.requests), fake.url


async def test_a_refused_key_is_one_line_with_the_status_and_the_api_message() -> None:
    line, requests, _ = await failure(failing(401, "authentication_error", "Authentication Fails (no such user)"))
    assert line == "deepseek-flash: HTTP 401: Authentication Fails (no such user)"
    assert requests == 1  # a 401 is not retried


async def test_a_server_error_is_retried_then_one_line() -> None:
    """The client retries a 5xx twice (here after the 1 ms the endpoint asks for), then the error is one line."""
    line, requests, _ = await failure(failing(500, "api_error", "Internal server error", {"retry-after-ms": "1"}))
    assert line == "deepseek-flash: HTTP 500: Internal server error"
    assert requests == 3


async def test_a_missing_route_hints_at_the_other_wire() -> None:
    line, _, url = await failure(failing(404, "not_found_error", "Not Found"))
    assert line == (f"deepseek-flash: HTTP 404: Not Found (is {url} an Anthropic Messages endpoint? For an "
                    "OpenAI-compatible one: --wire openai)")


async def test_an_unreachable_endpoint_is_one_line() -> None:
    with fake_model(failing(500, "api_error", "x")) as fake:
        url = fake.url
    with pytest.raises(ModelError) as caught:  # the server is gone: the port refuses connections
        await model_at(url, max_retries=0).complete(ModelRequest([UserText("x")], []))
    assert str(caught.value).startswith(f"deepseek-flash: cannot reach {url}")
    assert "\n" not in str(caught.value)


def test_missing_key_is_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(ModelError, match=r"^no API key: set DEEPSEEK_API_KEY"):
        MessagesModel()


def test_the_defaults_are_dsh_0_2s(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DEEPSEEK_BASE_URL", "DEEPSEEK_MODEL"):
        monkeypatch.delenv(name, raising=False)
    model = MessagesModel(api_key="k")
    assert (model.base_url, model.model, model.max_tokens) == ("https://api.deepseek.com/anthropic",
                                                               "deepseek-flash", 256000)
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/x")
    monkeypatch.setenv("DEEPSEEK_MODEL", "deepseek-v4-pro")
    model = MessagesModel(api_key="k")
    assert (model.base_url, model.model) == ("http://127.0.0.1:9/x", "deepseek-v4-pro")


# -- the stream reader ---------------------------------------------------------------------------------------------


def start(usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                                 "usage": usage or {"input_tokens": 7, "output_tokens": 1}}}


def read(events: list[dict[str, Any]]) -> Any:
    reader = StreamReader()
    for event in events:
        reader.feed(event)
    return reader.reply()


def test_arguments_are_the_fragments_joined_exactly_as_streamed() -> None:
    fragments = ['{"tod', 'os": [ {"content"', ': "a ",  "status": "pending"}', "]}"]
    reply = read([
        start(),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Plan"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ning."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "t1", "name": "todo_write", "input": {}}},
        *({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": part}}
          for part in fragments),
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
        {"type": "message_stop"},
    ])
    assert reply.text == "Planning."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("t1", "todo_write", "".join(fragments))]
    assert reply.finish_reason == "tool_calls"
    assert reply.usage == {"inputTokens": 7, "outputTokens": 30, "totalTokens": 37}


def test_a_call_streamed_without_fragments_has_its_start_input() -> None:
    reply = read([start(), {"type": "content_block_start", "index": 0,
                            "content_block": {"type": "tool_use", "id": "t1", "name": "todo_write", "input": {}}},
                  {"type": "content_block_stop", "index": 0},
                  {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, {"type": "message_stop"}])
    assert reply.tool_calls[0].arguments == "{}"


@pytest.mark.parametrize(("stop", "finish"), [("end_turn", "stop"), ("stop_sequence", "stop"),
                                               ("tool_use", "tool_calls"), ("max_tokens", "length")])
def test_stop_reasons_map_to_the_loops_words(stop: str, finish: str) -> None:
    reply = read([start(), {"type": "message_delta", "delta": {"stop_reason": stop}}, {"type": "message_stop"}])
    assert reply.finish_reason == finish


def test_a_stream_cut_before_its_stop_reason_is_an_error() -> None:
    with pytest.raises(ModelError, match=r"^the response stream ended before its stop reason$"):
        read([start(), {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}])


async def test_max_tokens_ends_the_turn_max_tokens(make_ctx: BootFactory) -> None:
    """``stop_reason: max_tokens`` is the loop's ``length``: the turn ends ``max-tokens``."""
    def answer(request: Request) -> Reply:
        from tests.carriers.mcp.agents.anthropic_fake import _message

        return _message(request.body, [{"type": "text", "text": "cut"}], "max_tokens")

    ctx = make_ctx()
    with fake_model(answer) as fake:
        outcome = await AgentLoop(ctx.tools, model_at(fake.url)).run_turn(Agent("a", ctx.sessions.create("s")), "go")
    assert outcome.reason == {"kind": "max-tokens"}
