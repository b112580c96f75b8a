"""GenAI spans beside the logs (issue 25 goal 3): a scripted session's turns, model requests and tool calls as the
spans the OpenTelemetry GenAI conventions name, exported by the SDK's OTLP/HTTP span exporter to a receiver on
127.0.0.1 that decodes each ``ExportTraceServiceRequest``.

The session: a turn whose first call is rejected and whose second is accepted, the model reporting token usage on
its first reply; then a turn whose model request fails (no reply left).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_todo.harness import Agent, Session, boot
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.llm import ModelReply, ScriptedModel
from tests.harness.telemetry.receiver import Receiver, Span
from tests.harness.telemetry.test_otel import call, dsh_home, full_config, receiver, write_composition

__all__ = ["dsh_home", "receiver"]  # the fixtures, shared with the logs' tests

pytestmark = pytest.mark.anyio

SCOPE = "@deepseek-ai/dsh-session-telemetry-otel"
INTERNAL, CLIENT = 1, 3
UNSET, ERROR = 0, 2
REJECTED = 'Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]'


def spans_config(receiver: Receiver, spans: str = "") -> str:
    return full_config(receiver.url) + (spans or f"\n    spans: {{exporter: {{endpoint: '{receiver.base}/v1/traces'}},"
                                                  " processor: {schedule_delay_millis: 50}}")


async def scripted_turns(composition: Path) -> Session:
    ctx = boot(composition)
    session = ctx.sessions.create("tele", cwd="/srv/app")
    model = ScriptedModel([
        ModelReply("", [call("c1", ("read the code", "done"))], "tool_calls",
                   usage={"inputTokens": 120, "outputTokens": 30}),
        ModelReply("", [call("c2", ("read the code", "in_progress"))], "tool_calls"),
        ModelReply("Planned.")], model="deepseek-chat")
    loop = AgentLoop(ctx.tools, model, persistence=ctx.session_persistence)
    await loop.run_turn(Agent("agent-1", session), "plan the work")
    await loop.run_turn(Agent("agent-1", session), "go on")  # no reply left: the request fails
    ctx.dispose()
    return session


def shape(span: Span, by_id: dict[str, Span]) -> tuple[str, str, int, int, str, dict[str, object]]:
    parent = by_id[span.parent_span_id].name if span.parent_span_id else ""
    return span.name, parent, span.kind, span.status_code, span.status_message, span.attributes


async def test_full_exports_a_span_per_turn_model_request_and_tool_call(tmp_path: Path, receiver: Receiver) -> None:
    session = await scripted_turns(write_composition(tmp_path, spans_config(receiver)))
    spans = receiver.spans  # in the order they ended: the SDK exports them so, one batch after the other
    by_id = {span.span_id: span for span in spans}
    conversation = {"gen_ai.conversation.id": "tele"}
    agent = {"gen_ai.operation.name": "invoke_agent", **conversation}
    chat = {"gen_ai.operation.name": "chat", **conversation}
    answered = {**chat, "gen_ai.request.model": "deepseek-chat", "gen_ai.provider.name": "scripted"}
    tool = {"gen_ai.operation.name": "execute_tool", **conversation, "gen_ai.tool.name": "todo_write",
            "gen_ai.tool.type": "function"}
    first_turn = [s for s in spans if s.trace_id == spans[0].trace_id]
    second_turn = [s for s in spans if s.trace_id != spans[0].trace_id]
    assert [shape(s, by_id) for s in first_turn] == [
        ("chat deepseek-chat", "invoke_agent", CLIENT, UNSET, "",
         {**answered, "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}),
        ("execute_tool todo_write", "invoke_agent", INTERNAL, ERROR, REJECTED,
         {**tool, "gen_ai.tool.call.id": "c1", "error.type": "tool_error"}),
        ("chat deepseek-chat", "invoke_agent", CLIENT, UNSET, "", answered),
        ("execute_tool todo_write", "invoke_agent", INTERNAL, UNSET, "", {**tool, "gen_ai.tool.call.id": "c2"}),
        ("chat deepseek-chat", "invoke_agent", CLIENT, UNSET, "", answered),
        ("invoke_agent", "", INTERNAL, UNSET, "", {**agent, "gen_ai.provider.name": "scripted"}),
    ]
    assert [shape(s, by_id) for s in second_turn] == [
        ("chat", "invoke_agent", CLIENT, ERROR, "the model request ended without a reply", chat),
        ("invoke_agent", "", INTERNAL, ERROR, "the scripted model has no reply left (it had 3)",
         {**agent, "error.type": "ModelError"}),
    ]
    assert len({s.trace_id for s in spans}) == 2  # one trace per turn
    assert {s.scope for s in spans} == {SCOPE}
    assert {s.resource["service.name"] for s in spans} == {"dsh-todo"}
    # the events' own times: the turn from its turn/start to its turn/end, a call from tool/call to tool/result
    millis = {(e["type"], e["data"].get("turn")): e["time"] for e in session.events
              if e["type"] in ("turn/start", "turn/end")}
    for span, turn in ((first_turn[-1], 1), (second_turn[-1], 2)):
        assert span.start_time_unix_nano == millis[("turn/start", turn)] * 1_000_000
        assert span.end_time_unix_nano == millis[("turn/end", turn)] * 1_000_000
    calls = {e["data"]["callId"]: e["time"] for e in session.events if e["type"] == "tool/call"}
    assert {s.attributes["gen_ai.tool.call.id"]: s.start_time_unix_nano for s in spans
            if s.name.startswith("execute_tool")} == {k: v * 1_000_000 for k, v in calls.items()}
    assert {r[":path"] for r in receiver.requests} == {"/v1/logs", "/v1/traces"}


@pytest.mark.parametrize("spans", ["\n    spans: false", ""], ids=["spans-false", "no-traces-endpoint"])
async def test_no_spans_without_a_traces_endpoint_or_with_spans_false(tmp_path: Path, receiver: Receiver,
                                                                       spans: str) -> None:
    """Spans go only where a traces endpoint is named, and ``spans: false`` keeps them home whatever is named; the
    logs are exported either way."""
    config = full_config(receiver.url) + spans if spans else full_config(receiver.url)
    await scripted_turns(write_composition(tmp_path, config))
    assert receiver.spans == []
    assert {r[":path"] for r in receiver.requests} == {"/v1/logs"}
    assert receiver.records


async def test_otel_traces_exporter_none_turns_the_spans_off(tmp_path: Path, receiver: Receiver,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    await scripted_turns(write_composition(tmp_path, spans_config(receiver)))
    assert receiver.spans == []
    assert receiver.records


async def test_feedback_only_sends_no_spans(tmp_path: Path, receiver: Receiver) -> None:
    """Spans are ``FULL``'s alone: a feedback event releases the log, never spans."""
    config = spans_config(receiver).replace("mode: FULL", "mode: FEEDBACK_ONLY")
    composition = write_composition(tmp_path, config)
    ctx = boot(composition)
    session = ctx.sessions.create("tele")
    loop = AgentLoop(ctx.tools, ScriptedModel([ModelReply("Fine.")]), persistence=ctx.session_persistence)
    await loop.run_turn(Agent("agent-1", session), "hello")
    session.append("feedback/record", {"text": "good"})
    ctx.dispose()
    assert receiver.spans == []
    assert [r.attributes["event.type"] for r in receiver.records][-1] == "feedback/record"


async def test_an_mcp_connection_is_one_turn_of_tool_spans_without_chat_spans(tmp_path: Path,
                                                                               receiver: Receiver) -> None:
    """An MCP client's calls are steps of the connection's turn with no model reply in them (the model is the
    client's, its only message the ``external`` one advertising each call): one ``invoke_agent`` span over the
    connection, one ``execute_tool`` child per call, and no ``chat`` span, which would otherwise claim a model
    request per call (``chat external``: so it did once calls were advertised, for DSH 0.2)."""
    from dsh_todo.carriers.mcp.calls import CallSession

    ctx = boot(write_composition(tmp_path, spans_config(receiver)))
    connection = CallSession(ctx, session_id="mcp-1", cwd="/srv/app")
    await connection.call("todo_write", {"todos": [{"content": "a", "status": "in_progress"}]})
    await connection.call("todo_write", {"todos": [{"content": "a", "status": "done"}]})
    connection.close()
    ctx.dispose()
    by_id = {span.span_id: span for span in receiver.spans}
    assert [(s.name, by_id[s.parent_span_id].name if s.parent_span_id else "", s.status_code)
            for s in receiver.spans] == [("execute_tool todo_write", "invoke_agent", UNSET),
                                         ("execute_tool todo_write", "invoke_agent", ERROR),
                                         ("invoke_agent", "", UNSET)]
    assert len({s.trace_id for s in receiver.spans}) == 1
    # Each call is advertised by the client's model (an ``external`` assistant/message): no model request of ours,
    # so it names no provider on the turn either.
    assert [s.attributes.get("gen_ai.provider.name") for s in receiver.spans] == [None, None, None]
