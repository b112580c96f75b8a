"""The agent loop on a scripted model: SPEC §11.2, the loop-path conformance vectors, ordering and aborts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_todo.harness import Agent, Context
from dsh_todo.harness.agent_loop import AgentLoop, derive_messages, parse_arguments
from dsh_todo.harness.llm import ModelReply, ModelRequest, ScriptedModel, ToolCallRequest
from dsh_todo.harness.tools import AbortSignal
from dsh_todo.jsonutil import dumps, loads
from tests.conftest import BootFactory, fixtures_dir, hanging_tool, read_jsonl, todo_writes

pytestmark = pytest.mark.anyio


def call(call_id: str, arguments: str, name: str = "todo_write") -> ToolCallRequest:
    return ToolCallRequest(call_id, name, arguments)


def todos_json(*items: tuple[str, str]) -> str:
    return dumps({"todos": [{"content": c, "status": s} for c, s in items]})


async def run(ctx: Context, replies: list[ModelReply], prompt: str = "go") -> tuple[Agent, ScriptedModel]:
    session = ctx.sessions.create("s")
    agent = Agent("agent", session)
    model = ScriptedModel(replies)
    outcome = await AgentLoop(ctx.tools, model).run_turn(agent, prompt)
    assert outcome.reason == {"kind": "completed"}
    return agent, model


async def test_integration_single_call(make_ctx: BootFactory) -> None:
    """SPEC §11.2 case 1."""
    ctx = make_ctx()
    args = todos_json(("read the code", "in_progress"), ("write the fix", "pending"))
    agent, _ = await run(ctx, [ModelReply("", [call("call-1", args)], "tool_calls"), ModelReply("Plan recorded.")])
    events = list(agent.session.events)
    types = [e["type"] for e in events]
    assert any(e["type"] == "tool/call" and e["data"]["name"] == "todo_write" for e in events)
    first_result = next(e for e in events if e["type"] == "tool/result")
    message = first_result["data"]["message"]  # format v4: a tool-role message, keys as DSH 0.2 writes them
    assert list(message) == ["role", "source", "toolCallId", "content", "isError", "id"]
    assert (message["role"], message["source"], message["toolCallId"], message["isError"]) == (
        "tool", {"kind": "tool", "callId": "call-1"}, "call-1", False)
    assert message["content"] == [{"type": "text", "text": "Updated todo list: 1 pending, 1 in progress, 0 completed."}]
    assert todo_writes(agent.session) == [[{"content": "read the code", "status": "in_progress"},
                                           {"content": "write the fix", "status": "pending"}]]
    call_seq = types.index("tool/call")
    assert types[call_seq:call_seq + 3] == ["tool/call", "todo/write", "tool/result"]
    assert first_result["sourceEventSeqs"] == [call_seq]
    assert first_result["surfaceOp"] == "append"
    assert types[0] == "turn/start" and types[-1] == "turn/end"


async def test_integration_two_calls_last_wins(make_ctx: BootFactory) -> None:
    """SPEC §11.2 case 2."""
    ctx = make_ctx()
    first = todos_json(("step one", "in_progress"))
    second = todos_json(("step one", "completed"), ("step two", "in_progress"))
    agent, _ = await run(ctx, [ModelReply("", [call("c1", first)], "tool_calls"),
                               ModelReply("", [call("c2", second)], "tool_calls"), ModelReply("done")])
    writes = todo_writes(agent.session)
    assert len(writes) == 2
    assert writes[-1] == [{"content": "step one", "status": "completed"},
                          {"content": "step two", "status": "in_progress"}]


async def test_two_calls_in_one_message_run_in_order(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    first = todos_json(("a", "in_progress"))
    second = todos_json(("a", "completed"), ("b", "in_progress"))
    agent, _ = await run(ctx, [ModelReply("", [call("c1", first), call("c2", second)], "tool_calls"),
                               ModelReply("done")])
    kinds = [(e["type"], e["data"].get("callId")) for e in agent.session.events
             if e["type"] in ("tool/call", "todo/write", "tool/result")]
    assert kinds == [("tool/call", "c1"), ("todo/write", None), ("tool/result", None),
                     ("tool/call", "c2"), ("todo/write", None), ("tool/result", None)]
    assert ctx.session_projections.snapshot(agent.session)["values"]["todos"] == [
        {"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]


async def test_history_is_derived_from_the_log_and_never_shows_todo_write(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    args = todos_json(("x", "in_progress"))
    agent, model = await run(ctx, [ModelReply("planning", [call("c1", args)], "tool_calls"), ModelReply("ok")])
    second: ModelRequest = model.requests[1]
    assert second.messages == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "planning", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "todo_write", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Updated todo list: 0 pending, 1 in progress, 0 completed."},
    ]
    assert derive_messages(agent.session.events)[:3] == second.messages
    assert [t["function"]["name"] for t in second.tools] == ["todo_write"]


async def test_second_turn_continues_turn_numbers_and_clears_the_standing_plan(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    agent = Agent("agent", session)
    model = ScriptedModel([ModelReply("", [call("c1", todos_json(("x", "completed")))], "tool_calls"),
                           ModelReply("done"), ModelReply("hello again")])
    loop = AgentLoop(ctx.tools, model)
    await loop.run_turn(agent, "first")
    assert ctx.session_projections.snapshot(session)["values"]["todos"] == [{"content": "x", "status": "completed"}]
    outcome = await loop.run_turn(agent, "second")
    assert outcome.turn == 2
    assert ctx.session_projections.snapshot(session)["values"]["todos"] is None
    assert [e["data"]["turn"] for e in session.events if e["type"] == "turn/start"] == [1, 2]


async def test_abort_before_dispatch_appends_no_todo_write(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    agent = Agent("agent", session)
    signal = AbortSignal()

    class AbortingModel(ScriptedModel):
        async def complete(self, request: ModelRequest) -> ModelReply:
            reply = await super().complete(request)
            signal.abort("user")  # the user presses stop while the model's reply arrives
            return reply

    model = AbortingModel([ModelReply("", [call("c1", todos_json(("x", "pending")))], "tool_calls")])
    outcome = await AgentLoop(ctx.tools, model).run_turn(agent, "go", signal=signal)
    assert todo_writes(session) == []
    result = next(e for e in session.events if e["type"] == "tool/result")["data"]
    assert result["message"]["content"] == [{"type": "text", "text": "Error: tool call aborted before dispatch"}]
    assert result["message"]["isError"] is True
    assert result["error"] == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    assert outcome.reason == {"kind": "aborted", "reason": {"kind": "user"}}
    assert session.events[-1]["type"] == "turn/end"


async def test_model_failure_ends_the_turn_with_an_error_reason(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    outcome = await AgentLoop(ctx.tools, ScriptedModel([])).run_turn(Agent("a", session), "go")
    assert outcome.reason["kind"] == "error"
    assert "no reply left" in outcome.reason["error"]["message"]
    assert [e["type"] for e in session.events][-2:] == ["step/end", "turn/end"]


async def test_length_finish_ends_with_max_tokens(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    outcome = await AgentLoop(ctx.tools, ScriptedModel([ModelReply("cut", [], "length")])).run_turn(
        Agent("a", session), "go")
    assert outcome.reason == {"kind": "max-tokens"}


@pytest.mark.parametrize(("raw", "expected"), [
    ("", {}), ("{\"todos\": []}", {"todos": []}), ("not json", "not json"), ("{\"todos\": [", "{\"todos\": ["),
    ("42", 42), ("null", None)])
def test_parse_arguments_follows_the_reference(raw: str, expected: Any) -> None:
    assert parse_arguments(raw) == expected


def _loop_vectors() -> list[dict[str, Any]]:
    vectors = read_jsonl(fixtures_dir() / "conformance" / "exec-vectors.jsonl")
    return [v for v in vectors if v["path"] == "loop"]


def _normalise(event: Any, call_id: str) -> dict[str, Any]:
    text = dumps({"type": event["type"], "data": event["data"]})
    text = text.replace(dumps(call_id), '"<callId>"')
    data: dict[str, Any] = loads(text)
    message = data["data"].get("message")
    if isinstance(message, dict) and "id" in message:
        message["id"] = "<uuid>"
    return data


def _v4_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A vector's events (DSH 0.1.1's, format v0) as a v4 log holds them: each ``tool/result`` message becomes the
    tool-role message DSH 0.2 writes (``role, source, toolCallId, content, isError, id``); the rest is unchanged."""
    converted = []
    for event in events:
        if event["type"] == "tool/result":
            old = event["data"]["message"]
            [block] = old["content"]
            message = {"role": "tool", "source": old["source"], "toolCallId": block["toolCallId"],
                       "content": block["content"], "isError": block["isError"], "id": old["id"]}
            event = {**event, "data": {**event["data"], "message": message}}
        converted.append(event)
    return converted


@pytest.mark.parametrize("version", [4, 0], ids=["v4", "v0"])
@pytest.mark.parametrize("vector", _loop_vectors(), ids=lambda v: v["id"])
async def test_loop_conformance_vector(make_ctx: BootFactory, vector: dict[str, Any], version: int) -> None:
    """The vector's events exactly (key order too), in a v0 session as DSH 0.1.1 recorded them, in a v4 session
    with DSH 0.2's tool-role result."""
    ctx = make_ctx(allow_parallel=vector["config"]["allowParallelInProgress"])
    session = ctx.sessions.create("v", **({"version": 0} if version == 0 else {}))
    model = ScriptedModel([ModelReply("", [call("call_vec", vector["rawArguments"])], "tool_calls"),
                           ModelReply("done")])
    await AgentLoop(ctx.tools, model).run_turn(Agent("a", session), "go")
    got = [_normalise(e, "call_vec") for e in session.events if e["type"] in ("tool/call", "todo/write", "tool/result")]
    expected = vector["events"] if version == 0 else _v4_events(vector["events"])
    assert dumps(got) == dumps(expected)
    message = got[-1]["data"]["message"]
    result = message["content"][0] if version == 0 else message
    assert result["isError"] is vector["isError"]
    assert result["content"] == [{"type": "text", "text": vector["text"]}]


async def test_a_v4_session_logs_the_system_prompt_when_it_changes_and_an_empty_stream(
        make_ctx: BootFactory) -> None:
    """Format v4 keeps the system prompt in the history (a ``system/message`` surface event at step 1, written
    again only when the prompt changed) and each reply's stream (``[]``: this loop records none); a v0 session has
    neither, as DSH 0.1 wrote none."""
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    agent = Agent("a", session)
    await AgentLoop(ctx.tools, ScriptedModel([ModelReply("one")]), system="be brief").run_turn(agent, "first")
    await AgentLoop(ctx.tools, ScriptedModel([ModelReply("two")]), system="be brief").run_turn(agent, "second")
    await AgentLoop(ctx.tools, ScriptedModel([ModelReply("three")]), system="be kind").run_turn(agent, "third")
    systems = [event for event in session.events if event["type"] == "system/message"]
    assert [(event["data"]["turn"], event["data"]["step"]) for event in systems] == [(1, 1), (3, 1)]
    first = systems[0]
    assert first["surfaceOp"] == "append"
    assert list(first["data"]["message"]) == ["role", "content", "source", "id"]
    assert {key: first["data"]["message"][key] for key in ("role", "content", "source")} == {
        "role": "system", "content": [{"type": "text", "text": "be brief"}], "source": {"kind": "system-prompt"}}
    assert [event["type"] for event in session.events[:4]] == [
        "turn/start", "step/start", "system/message", "user/message"]
    replies = [event for event in session.events if event["type"] == "assistant/message"]
    assert [event["data"]["stream"] for event in replies] == [[], [], []]

    old = ctx.sessions.create("old", version=0)
    await AgentLoop(ctx.tools, ScriptedModel([ModelReply("one")]), system="be brief").run_turn(Agent("b", old), "go")
    assert [event["type"] for event in old.events] == [
        "turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"]
    assert "stream" not in old.events[3]["data"]


def test_history_skips_results_of_calls_no_model_made() -> None:
    """An MCP-written log holds tool calls from outside any model; resuming it must not send orphan results."""
    result = {"type": "tool/result", "seq": 1, "time": 0, "data": {"turn": 1, "step": 1, "message": {
        "source": {"kind": "tool", "callId": "mcp-1"},
        "content": [{"type": "tool-result", "toolCallId": "mcp-1", "content": [{"type": "text", "text": "ok"}],
                     "isError": False}], "role": "user", "id": "x"}}, "surfaceOp": "append"}
    user = {"type": "user/message", "seq": 2, "time": 0, "data": {"content": [{"type": "text", "text": "hi"}],
                                                                  "role": "user"}, "surfaceOp": "append"}
    assert derive_messages([result, user]) == [{"role": "user", "content": "hi"}]
    v4 = {**result, "data": {**result["data"], "message": {
        "role": "tool", "source": {"kind": "tool", "callId": "mcp-1"}, "toolCallId": "mcp-1",
        "content": [{"type": "text", "text": "ok"}], "isError": False, "id": "x"}}}
    assert derive_messages([v4, user]) == [{"role": "user", "content": "hi"}]


# -- rejected and aborted calls keep the standing plan (issue 12) -------------------------------------------------

ACCEPTED = todos_json(("read the code", "in_progress"))
PLAN = [{"content": "read the code", "status": "in_progress"}]
REFUSED = [todos_json(("x", "doing")), todos_json(("a", "pending"), ("a ", "pending")), "{\"todos\": ["]


async def test_rejected_calls_leave_the_standing_plan_alone(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    agent, _ = await run(ctx, [ModelReply("", [call("c1", ACCEPTED)], "tool_calls"),
                               ModelReply("", [call(f"r{i}", raw) for i, raw in enumerate(REFUSED)], "tool_calls"),
                               ModelReply("done")])
    results = [e["data"]["message"]["isError"] for e in agent.session.events if e["type"] == "tool/result"]
    assert results == [False, True, True, True]
    assert ctx.session_projections.snapshot(agent.session)["values"]["todos"] == PLAN


async def test_an_abort_after_a_valid_call_leaves_the_standing_plan_alone(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    signal = AbortSignal()

    class StopAfterFirstReply(ScriptedModel):
        async def complete(self, request: ModelRequest) -> ModelReply:
            reply = await super().complete(request)
            if len(self.requests) == 2:
                signal.abort("user")
            return reply

    model = StopAfterFirstReply([ModelReply("", [call("c1", ACCEPTED)], "tool_calls"),
                                 ModelReply("", [call("c2", todos_json(("other", "pending")))], "tool_calls")])
    outcome = await AgentLoop(ctx.tools, model).run_turn(Agent("a", session), "go", signal=signal)
    assert outcome.reason == {"kind": "aborted", "reason": {"kind": "user"}}
    assert ctx.session_projections.snapshot(session)["values"]["todos"] == PLAN


async def test_a_cancelled_turn_answers_its_call_and_closes_aborted(make_ctx: BootFactory) -> None:
    """Repro: cancelling the task running a turn (a client that went away) while a tool ran left the call without a
    ``tool/result`` and the turn open; the call must still be answered and the turn closed ``aborted``."""
    ctx = make_ctx()
    started = hanging_tool(ctx)
    session = ctx.sessions.create("s")
    model = ScriptedModel([ModelReply("", [call("c1", ACCEPTED)], "tool_calls"),
                           ModelReply("", [call("c2", "{}", name="slow")], "tool_calls")])
    running = asyncio.ensure_future(AgentLoop(ctx.tools, model).run_turn(Agent("a", session), "go"))
    await asyncio.wait_for(started.wait(), 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    kinds = [e["type"] for e in session.events]
    assert kinds[-4:] == ["tool/call", "tool/result", "step/end", "turn/end"]
    assert session.events[-3]["sourceEventSeqs"] == [session.events[-4]["seq"]]
    assert session.events[-3]["data"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert session.events[-3]["data"]["message"]["content"] == [{"type": "text", "text": "Error: tool call aborted"}]
    assert session.events[-1]["data"] == {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}
    assert ctx.session_projections.snapshot(session)["values"]["todos"] == PLAN


async def test_every_call_is_durable_before_the_model_reads_its_result(tmp_path: Any) -> None:
    """With persistence, the loop flushes each call before the next model request (an ACP client, too, is shown
    the result only once it is on disk); ``dsh-todo plan --json`` then reads the plan the model was told about."""
    from dsh_todo.standard import open_runtime
    from tests.conftest import plan_json

    ctx = open_runtime(tmp_path / "sessions")
    try:
        session = ctx.sessions.create("durable", cwd=str(tmp_path))
        seen: list[Any] = []

        class Reader(ScriptedModel):
            async def complete(self, request: ModelRequest) -> ModelReply:
                if self.requests:
                    log = ctx.session_persistence.locate("durable")
                    seen.append(plan_json(log) if log is not None else "no log")
                return await super().complete(request)

        model = Reader([ModelReply("", [call("c1", ACCEPTED)], "tool_calls"),
                        ModelReply("", [call("c2", REFUSED[0])], "tool_calls"), ModelReply("done")])
        loop = AgentLoop(ctx.tools, model, persistence=ctx.session_persistence)
        await loop.run_turn(Agent("a", session), "go")
        assert seen == [PLAN, PLAN]
        log = ctx.session_persistence.locate("durable")
        assert log is not None and plan_json(log) == PLAN
    finally:
        ctx.dispose()


@pytest.mark.parametrize("depth", [1025, 5000, 100_000])
def test_raw_arguments_nested_beyond_the_parser_are_not_json(depth: int) -> None:
    """Repro (found by tests/test_fuzz.py): a model's ``arguments`` of ``"[" * 1975 + "]" * 1975`` made the loop
    raise ``RecursionError`` (orjson stops at 1,024 levels, and the standard library's fallback recursed), leaving
    the turn open. Text nested deeper than the parser goes is not JSON to us, so the reference's rule applies: the
    raw string reaches validation, which refuses it."""
    raw = "[" * depth + "]" * depth
    assert parse_arguments(raw) == raw
    assert parse_arguments('{"todos":' + "[" * depth) == '{"todos":' + "[" * depth
