"""``dsh-todo acp``: the SDK's own client spawns the agent with a scripted model and sees the plan (SPEC §10)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests import needs

needs.module("acp")

from acp.exceptions import RequestError
from acp.helpers import text_block
from acp.stdio import spawn_agent_process

from dsh_todo.carriers.acp.agent import TodoAgent, stop_reason
from dsh_todo.carriers.acp.updates import UpdateFeed
from dsh_todo.harness import Context
from dsh_todo.harness.agent_loop import TurnOutcome
from dsh_todo.harness.llm import ModelReply, ModelRequest, ScriptedModel, ToolCallRequest
from dsh_todo.harness.tools import AbortSignal
from dsh_todo.jsonutil import dumps
from dsh_todo.standard import open_runtime
from dsh_todo.tool_todo.rules import standing_plan
from tests.conftest import BootFactory, events_of, hanging_tool, plan_json, todo_writes

pytestmark = pytest.mark.anyio

TODOS = [{"content": "read the code", "status": "in_progress"},
         {"content": "write the fix", "status": "pending"},
         {"content": "run the tests", "status": "pending"}]
RAW_TODOS = [{"content": "  read the code", "status": "in_progress"}, *TODOS[1:]]  # untrimmed, as the model sent
PLAN = {"sessionUpdate": "plan", "entries": [{"content": t["content"], "priority": "medium", "status": t["status"]}
                                             for t in TODOS]}
RESULT_TEXT = "Updated todo list: 2 pending, 1 in progress, 0 completed."
SCRIPT = [{"tool_calls": [{"id": "call_plan", "name": "todo_write", "arguments": dumps({"todos": RAW_TODOS})}]},
          {"text": "DONE"}]


def tool_call(call_id: str = "call_plan") -> dict[str, Any]:
    return {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "Update todo list", "kind": "other",
            "status": "in_progress", "rawInput": {"todos": RAW_TODOS}}


def tool_call_update(text: str = RESULT_TEXT, status: str = "completed", call_id: str = "call_plan") -> dict[str, Any]:
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status,
            "content": [{"type": "content", "content": {"type": "text", "text": text}}]}


def chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


class Recorder:
    """An ACP client that keeps every ``session/update`` it is sent (as wire dicts) and refuses everything else."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update.model_dump(mode="json", by_alias=True, exclude_none=True)))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")


class Wire:
    """Every JSON-RPC message the client receives, in arrival order (the SDK's stream observer)."""

    def __init__(self) -> None:
        self.incoming: list[dict[str, Any]] = []

    def __call__(self, event: Any) -> None:
        if event.direction.value == "incoming":
            self.incoming.append(event.message)

    def since(self, mark: int) -> list[dict[str, Any]]:
        """Updates and responses after ``mark``: updates as their payload, responses as ``{"result": …}``."""
        out: list[dict[str, Any]] = []
        for message in self.incoming[mark:]:
            if message.get("method") == "session/update":
                out.append(message["params"]["update"])
            elif "result" in message or "error" in message:
                out.append({key: message[key] for key in ("result", "error") if key in message})
        return out


def agent_argv(script: Path, root: Path) -> list[str]:
    return ["-m", "dsh_todo.cli", "acp", "--script", str(script), "--root", str(root)]


async def test_prompt_streams_tool_call_plan_result_and_stop_reason(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(dumps(SCRIPT))
    root = tmp_path / "sessions"
    client, wire = Recorder(), Wire()
    async with asyncio.timeout(60), spawn_agent_process(client, sys.executable, *agent_argv(script, root),
                                                        cwd=tmp_path, observers=[wire]) as (conn, _process):
        init = await conn.initialize(protocol_version=1)
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
        assert init.agent_info is not None and init.agent_info.name == "dsh-todo"
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        mark = len(wire.incoming)
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("plan the fix")])
        assert response.stop_reason == "end_turn"
        received = wire.since(mark)
    assert received == [tool_call(), PLAN, tool_call_update(), chunk("agent_message_chunk", "DONE"),
                        {"result": {"stopReason": "end_turn"}}]
    assert [update for _, update in client.updates] == received[:-1]
    assert {sid for sid, _ in client.updates} == {session.session_id}
    # The ACP session is a DSH session on disk, turn-enclosed, with the plan standing.
    ctx: Context = open_runtime(root)
    try:
        stored = ctx.session_persistence.read(session.session_id)
    finally:
        ctx.dispose()
    assert stored.meta["cwd"] == str(tmp_path)
    assert standing_plan(stored.events) == TODOS


async def test_load_replays_the_session_and_its_standing_plan(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(dumps(SCRIPT))
    again = tmp_path / "again.json"
    again.write_text(dumps([{"text": "nothing to plan"}]))
    root = tmp_path / "sessions"
    async with asyncio.timeout(60), spawn_agent_process(Recorder(), sys.executable, *agent_argv(script, root),
                                                        cwd=tmp_path) as (conn, _process):
        await conn.initialize(protocol_version=1)
        session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("plan the fix")])

    client, wire = Recorder(), Wire()
    async with asyncio.timeout(60), spawn_agent_process(client, sys.executable, *agent_argv(again, root),
                                                        cwd=tmp_path, observers=[wire]) as (conn, _process):
        await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError):
            await conn.load_session(cwd=str(tmp_path), session_id="no-such-session", mcp_servers=[])
        mark = len(wire.incoming)
        await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
        replayed = wire.since(mark)
        mark = len(wire.incoming)
        response = await conn.prompt(session_id=session_id, prompt=[text_block("and now?")])
        next_turn = wire.since(mark)
    assert replayed == [chunk("user_message_chunk", "plan the fix"), tool_call(), PLAN, tool_call_update(),
                        chunk("agent_message_chunk", "DONE"), {"result": {}}]
    # The next turn clears the standing plan (DSH's rule) and, writing none, leaves it cleared.
    assert response.stop_reason == "end_turn"
    assert next_turn == [{"sessionUpdate": "plan", "entries": []}, chunk("agent_message_chunk", "nothing to plan"),
                         {"result": {"stopReason": "end_turn"}}]
    ctx: Context = open_runtime(root)
    try:
        events = ctx.session_persistence.read(session_id).events
    finally:
        ctx.dispose()
    assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1, 2]
    assert standing_plan(events) is None


def test_missing_key_without_a_script_fails_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_todo.cli import main

    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    assert main(["acp", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsh-todo acp: no API key: set DEEPSEEK_API_KEY")
    assert "--script FILE" in err


# -- in process -----------------------------------------------------------------------------------------------


class GatedModel:
    """Replies with one ``todo_write`` call, but only once the test lets it (so a cancel can land first)."""

    provider = "test"
    model = "gated"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.entered.set()
        await self.release.wait()
        return ModelReply("", [ToolCallRequest("call_late", "todo_write", dumps({"todos": RAW_TODOS}))], "tool_calls")


async def prompt_until_gated(ctx: Context, model: GatedModel) -> tuple[TodoAgent, Recorder, str, asyncio.Task[Any]]:
    """A new session's prompt, running until ``model`` waits at its gate: the agent, its client, the session id
    and the prompt's task."""
    agent, client = TodoAgent(ctx, model), Recorder()
    agent.on_connect(client)  # type: ignore[arg-type]
    session_id = (await agent.new_session(cwd="/srv/project")).session_id
    running = asyncio.create_task(agent.prompt(session_id=session_id, prompt=[text_block("go")]))
    await asyncio.wait_for(model.entered.wait(), 10)
    return agent, client, session_id, running


async def test_cancel_ends_the_turn_cancelled_and_writes_no_plan(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    model = GatedModel()
    agent, client, session_id, running = await prompt_until_gated(ctx, model)
    with pytest.raises(RequestError):  # one prompt at a time per session
        await agent.prompt(session_id=session_id, prompt=[text_block("again")])
    await agent.cancel(session_id=session_id)
    model.release.set()
    response = await asyncio.wait_for(running, 10)
    assert response.stop_reason == "cancelled"
    session = ctx.sessions.get(session_id)
    assert session is not None
    assert todo_writes(session) == []
    assert events_of(session, "turn/end")[-1]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    aborted = "Error: tool call aborted before dispatch"
    assert [update for _, update in client.updates] == [tool_call("call_late"),
                                                        tool_call_update(aborted, "failed", "call_late")]


async def test_unknown_session_and_model_failure_are_errors(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = TodoAgent(ctx, ScriptedModel([]))
    with pytest.raises(RequestError):
        await agent.prompt(session_id="nope", prompt=[text_block("go")])
    session_id = (await agent.new_session(cwd="/srv/project")).session_id
    with pytest.raises(RequestError) as raised:
        await agent.prompt(session_id=session_id, prompt=[text_block("go")])
    assert "no reply left" in str(raised.value.data)
    with pytest.raises(RequestError):  # without persistence there is nothing to load
        await agent.load_session(cwd="/srv/project", session_id=session_id)


@pytest.mark.parametrize(("reason", "expected"), [
    ({"kind": "completed"}, "end_turn"),
    ({"kind": "aborted", "reason": {"kind": "user"}}, "cancelled"),
    ({"kind": "max-tokens"}, "max_tokens"),
    ({"kind": "error", "error": {"name": "MaxStepsError", "message": "too long"}}, "max_turn_requests"),
])
def test_stop_reasons(reason: dict[str, Any], expected: str) -> None:
    assert stop_reason(TurnOutcome(1, reason, "", 1), AbortSignal()) == expected


# -- the mapping itself (no SDK) ------------------------------------------------------------------------------


def test_update_feed_is_the_retired_dsh_mapping(make_ctx: BootFactory) -> None:
    """SPEC §10, byte for byte (our dicts keep the bridge's key order)."""
    ctx = make_ctx(allow_parallel=True)
    feed = UpdateFeed(ctx.tools)
    call = {"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "c1", "name": "todo_write",
                                          "arguments": dumps({"todos": RAW_TODOS})}}
    write = {"type": "todo/write", "data": {"todos": TODOS}}
    result = {"type": "tool/result", "data": {"turn": 1, "step": 1, "message": {
        "source": {"kind": "tool", "callId": "c1"},
        "content": [{"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": RESULT_TEXT}],
                     "isError": False}], "role": "user", "id": "x"}}}
    assert dumps(feed.feed(call)) == dumps([{"sessionUpdate": "tool_call", "toolCallId": "c1",
                                             "title": "Update todo list", "kind": "other", "status": "in_progress",
                                             "rawInput": {"todos": RAW_TODOS}}])
    assert dumps(feed.feed(write)) == dumps([PLAN])
    assert feed.feed(result) == [tool_call_update(call_id="c1")]
    assert feed.feed({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}) == []
    assert feed.feed({"type": "turn/start", "data": {"turn": 2}}) == [{"sessionUpdate": "plan", "entries": []}]
    assert feed.feed({"type": "turn/start", "data": {"turn": 3}}) == []  # nothing standing, nothing to clear
    assert feed.feed({"type": "todo/write", "data": {"todos": []}}) == [{"sessionUpdate": "plan", "entries": []}]
    # Arguments that do not validate get the generic card, named after the tool, with the raw value: an object as
    # sent, anything else (text that is not JSON, a list) as the raw argument text under "arguments".
    bad = {"type": "tool/call", "data": {"turn": 3, "step": 1, "callId": "c2", "name": "todo_write",
                                         "arguments": "{\"todos\": ["}}
    assert feed.feed(bad) == [{"sessionUpdate": "tool_call", "toolCallId": "c2", "title": "todo_write",
                               "kind": "other", "status": "in_progress", "rawInput": {"arguments": "{\"todos\": ["}}]
    listed = {"type": "tool/call", "data": {**bad["data"], "arguments": "[1]"}}
    assert feed.feed(listed)[0]["rawInput"] == {"arguments": "[1]"}
    wrong = {"type": "tool/call", "data": {**bad["data"], "arguments": '{"todos":[{"content":"a","status":"x"}]}'}}
    assert feed.feed(wrong)[0]["rawInput"] == {"todos": [{"content": "a", "status": "x"}]}
    user = {"type": "user/message", "data": {"content": [{"type": "text", "text": "hi"}]}}
    assert feed.feed(user) == []
    assert UpdateFeed(ctx.tools, history=True).feed(user) == [chunk("user_message_chunk", "hi")]


# -- rejected and aborted calls keep the standing plan (issue 12) -------------------------------------------------

REFUSED_TODOS = [{"content": "read the code", "status": "doing"}]
REFUSED_TEXT = 'Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]'


def persisted_agent(tmp_path: Path, model: Any) -> tuple[Context, TodoAgent, Recorder]:
    ctx = open_runtime(tmp_path / "sessions")
    agent, client = TodoAgent(ctx, model), Recorder()
    agent.on_connect(client)  # type: ignore[arg-type]
    return ctx, agent, client


def log_of(ctx: Context, session_id: str) -> Path:
    where = ctx.session_persistence.locate(session_id)
    path = None if where is None else Path(where)
    assert path is not None
    return path


async def test_a_rejected_call_leaves_the_plan_alone(tmp_path: Path) -> None:
    """A valid call, then a rejected one in the same prompt: the editor's plan panel (no further ``plan`` update),
    the ``todos`` projection and ``dsh-todo plan --json`` on the persisted log all keep the accepted list."""
    model = ScriptedModel([
        ModelReply("", [ToolCallRequest("c1", "todo_write", dumps({"todos": RAW_TODOS}))], "tool_calls"),
        ModelReply("", [ToolCallRequest("c2", "todo_write", dumps({"todos": REFUSED_TODOS}))], "tool_calls"),
        ModelReply("DONE")])
    ctx, agent, client = persisted_agent(tmp_path, model)
    try:
        session_id = (await agent.new_session(cwd=str(tmp_path))).session_id
        response = await agent.prompt(session_id=session_id, prompt=[text_block("plan the fix")])
        assert response.stop_reason == "end_turn"
        plans = [update for _, update in client.updates if update["sessionUpdate"] == "plan"]
        assert plans == [PLAN]
        assert tool_call_update(REFUSED_TEXT, "failed", "c2") in [update for _, update in client.updates]
        session = ctx.sessions.get(session_id)
        assert session is not None
        assert ctx.session_projections.snapshot(session)["values"]["todos"] == TODOS
        assert plan_json(log_of(ctx, session_id)) == TODOS
    finally:
        ctx.dispose()


async def test_a_cancel_after_a_valid_call_leaves_the_plan_alone(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    first = ModelReply("", [ToolCallRequest("c1", "todo_write", dumps({"todos": RAW_TODOS}))], "tool_calls")

    class PlanThenGate(GatedModel):
        async def complete(self, request: ModelRequest) -> ModelReply:
            if len(request.messages) == 1:
                return first
            return await super().complete(request)

    model = PlanThenGate()
    agent, client, session_id, running = await prompt_until_gated(ctx, model)
    await agent.cancel(session_id=session_id)
    model.release.set()
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
    session = ctx.sessions.get(session_id)
    assert session is not None
    assert ctx.session_projections.snapshot(session)["values"]["todos"] == TODOS
    assert [update for _, update in client.updates if update["sessionUpdate"] == "plan"] == [PLAN]


async def test_a_prompt_cancelled_while_a_tool_runs_is_answered_closed_and_durable(tmp_path: Path) -> None:
    """Repro: a prompt task cancelled while a tool ran (the client went away) left the call unanswered, the turn
    open and the log unflushed; now the call gets its error result, the turn ends ``aborted``, the plan written
    before stands, and all of it is on disk."""
    model = ScriptedModel([
        ModelReply("", [ToolCallRequest("c1", "todo_write", dumps({"todos": RAW_TODOS}))], "tool_calls"),
        ModelReply("", [ToolCallRequest("c2", "slow", "{}")], "tool_calls")])
    ctx, agent, _client = persisted_agent(tmp_path, model)
    try:
        started = hanging_tool(ctx)
        session_id = (await agent.new_session(cwd=str(tmp_path))).session_id
        running = asyncio.create_task(agent.prompt(session_id=session_id, prompt=[text_block("go")]))
        await asyncio.wait_for(started.wait(), 10)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        session = ctx.sessions.get(session_id)
        assert session is not None
        assert [e["type"] for e in session.events][-4:] == ["tool/call", "tool/result", "step/end", "turn/end"]
        assert session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
        assert ctx.session_projections.snapshot(session)["values"]["todos"] == TODOS
        stored = ctx.session_persistence.read(session_id)
        assert [e["type"] for e in stored.events][-1] == "turn/end"
        assert plan_json(log_of(ctx, session_id)) == TODOS
    finally:
        ctx.dispose()


# -- any stdio: files, /dev/null, ttys (issue 13 item 6) ------------------------------------------------------------


def test_raw_input_is_an_object_for_clients_before_sdk_0_13(make_ctx: BootFactory) -> None:
    """Repro (issue 13 item 6): ``tool_call.rawInput`` was the bare todos array; Zed's
    ``@zed-industries/agent-client-protocol`` 0.4.x accepts only an object there and dropped the whole notification.
    It is ``{"todos": [...]}`` with the model's raw, untrimmed items."""
    ctx = make_ctx(allow_parallel=True)
    call = {"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "c1", "name": "todo_write",
                                          "arguments": dumps({"todos": RAW_TODOS, "note": "extra keys are ignored"})}}
    [update] = UpdateFeed(ctx.tools).feed(call)
    assert update["rawInput"] == {"todos": RAW_TODOS}
    assert update["rawInput"]["todos"][0]["content"] == "  read the code"


def run_acp(tmp_path: Path, stdin: Any, stdout: Any) -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "script.json"
    script.write_text(dumps(SCRIPT))
    return subprocess.run([sys.executable, *agent_argv(script, tmp_path / "sessions")], stdin=stdin, stdout=stdout,
                          stderr=subprocess.PIPE, cwd=tmp_path, timeout=30)


def test_stdin_from_dev_null_exits_at_once(tmp_path: Path) -> None:
    """Repro (issue 13 item 6): ``dsh-todo acp </dev/null`` printed a traceback (asyncio cannot watch /dev/null) and
    hung. Stdin that ends is a client that left: exit 0, promptly, without a word on stderr beyond the banner."""
    started = time.monotonic()
    with open(os.devnull, "rb") as null_in:
        result = run_acp(tmp_path, null_in, subprocess.PIPE)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 20
    assert b"Traceback" not in result.stderr
    assert result.stderr.decode().splitlines()[1:] == []  # the banner only
    assert result.stdout == b""


def test_requests_from_a_file_answered_into_a_file(tmp_path: Path) -> None:
    """Repro (issue 13 item 6): with stdout redirected to a file the agent failed with "Pipe transport is only for
    pipes". Stdin a file holding an ``initialize`` request, stdout a file: the answer is in the file."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text(dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": 1}}) + "\n")
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        result = run_acp(tmp_path, stdin, stdout)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    [line] = answers.read_text().splitlines()
    answer = json.loads(line)
    assert answer["id"] == 1 and answer["result"]["agentInfo"]["name"] == "dsh-todo"


BAD_LINES = [  # (line, the answer it gets: None for none)
    (b"{not json", {"id": None, "error": {"code": -32700,
                                          "message": "Parse error: Expecting property name enclosed in double quotes "
                                                     "at column 2"}}),
    (b"\xff\xfe not utf-8", {"id": None, "error": {"code": -32700, "message": "Parse error: not UTF-8 (byte 0)"}}),
    (b"[1, 2]", {"id": None, "error": {"code": -32600, "message": "Invalid Request: a message is a JSON object"}}),
    (b'"hello"', {"id": None, "error": {"code": -32600, "message": "Invalid Request: a message is a JSON object"}}),
    (b"{}", {"id": None, "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message"}}),
    (b'{"jsonrpc":"2.0","id":7,"method":5}',
     {"id": 7, "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 request"}}),
    (b'{"jsonrpc":"2.0","id":8,"method":"session/new","params":"cwd"}',
     {"id": 8, "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 request"}}),
    (b'{"jsonrpc":"2.0","id":9,"method":"session/new","params":' + b"[" * 600 + b"]" * 600 + b"}",
     {"id": 9, "error": {"code": -32600, "message": "Invalid Request: JSON nested deeper than 512 levels"}}),
    (b'{"jsonrpc":"2.0","method":5}', None),  # an invalid notification: JSON-RPC never answers one
    (b"   ", None),
]


def test_bad_lines_are_answered_and_the_agent_stays_up(tmp_path: Path) -> None:
    """Repro: ``dsh-todo acp`` logged a Python traceback for a line that is not JSON and answered nothing; a JSON
    array (a JSON-RPC batch) ended the agent (``dsh-todo: error: 'list' object has no attribute 'get'``, exit 1);
    ``{}`` got no answer. Each bad line gets JSON-RPC's answer (or none, for a notification), nothing reaches stderr
    but the banner, and the agent serves the next request."""
    lines = [dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).encode(),
             *(line for line, _answer in BAD_LINES),
             dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                    "params": {"cwd": str(tmp_path), "mcpServers": []}}).encode()]
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b"\n".join(lines) + b"\n")
    with requests.open("rb") as stdin:
        result = run_acp(tmp_path, stdin, subprocess.PIPE)
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines()[1:] == []  # the banner only: no traceback
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    results = {answer["id"]: answer["result"] for answer in answers if "result" in answer}
    assert results[1]["agentInfo"]["name"] == "dsh-todo" and "sessionId" in results[2]
    assert [{key: answer[key] for key in ("id", "error")} for answer in answers if "error" in answer] == [
        want for _line, want in BAD_LINES if want is not None]  # in the order of the lines
    assert len(answers) == 2 + len([want for _line, want in BAD_LINES if want is not None])


class Written:
    """A stand-in for stdout's writer (a :class:`~dsh_todo.carriers.acp.lines.Writer`): keeps what is written."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.lost = False

    def write(self, data: bytes) -> None:
        self.lines += [json.loads(line) for line in data.splitlines()]

    async def drain(self) -> None:
        pass

    async def closed(self) -> None:
        await asyncio.Event().wait()  # never lost


async def test_a_line_longer_than_the_limit_is_refused_as_it_arrives_under_its_id() -> None:
    """A request longer than the limit is refused under its id, found by a scan of its head (the only part of it the
    transport keeps: :class:`~dsh_todo.carriers.jsonrpc.Lines`), and the next line is read as usual."""
    from dsh_todo.carriers.acp.lines import LineTransport

    reader = asyncio.StreamReader()
    written = Written()
    # the test never answers session/new: at the end of input the transport waits drain_seconds for that answer
    transport = LineTransport(reader, written, max_line=1000, drain_seconds=0.1)
    long = b'{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"text":"' + b"x" * 5000 + b'"}}\n'
    reader.feed_data(long)
    reader.feed_data(b'{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}\n')
    reader.feed_eof()
    assert (await transport.receive()) == {"jsonrpc": "2.0", "id": 3, "method": "session/new",
                                           "params": {"cwd": "/p", "mcpServers": []}}
    assert written.lines == [{"jsonrpc": "2.0", "id": "big", "error": {
        "code": -32600, "message": "Invalid Request: a message longer than 1000 bytes"}}]
    assert await transport.receive() is None


# -- stdout: back-pressure and a reader that goes away (public asyncio only: decision 0028) -------------------------

BIG = 1 << 20
"""Far more than a pipe holds (64 KiB on Linux)."""


def read_exactly(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 16))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


async def test_drain_waits_while_the_pipe_is_full_and_returns_once_it_is_read() -> None:
    """A client that stops reading holds the agent at ``drain`` (nothing piles up in memory); once it reads, the
    drain returns, and what was written arrives whole."""
    from dsh_todo.carriers.acp.stdio import stdio_streams

    out_r, out_w = os.pipe()
    with open(os.devnull, "rb") as stdin, os.fdopen(out_w, "wb", buffering=0) as stdout:
        _reader, writer = await stdio_streams(1 << 16, stdin, stdout)
        data = bytes(range(256)) * (BIG // 256)
        writer.write(data)
        drain = asyncio.create_task(writer.drain())
        await asyncio.sleep(0.3)
        assert not drain.done()
        received = await asyncio.to_thread(read_exactly, out_r, len(data))
        await asyncio.wait_for(drain, 10)
        assert received == data
        assert not writer.lost
        os.close(out_r)  # the reader hangs up: stdout is lost, and the pipe transport lets go of it
        for _ in range(100):
            if writer.lost:
                break
            await asyncio.sleep(0.05)
        assert writer.lost


async def test_stdout_closed_mid_write_wakes_the_drain_and_ends_the_input() -> None:
    """The reader closes stdout while a drain waits on a full pipe: the drain returns (no exception for the SDK to
    log), later writes are dropped, and the input ends as if stdin had, so the connection ends."""
    from dsh_todo.carriers.acp.stdio import stdio_streams

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        with os.fdopen(in_r, "rb", buffering=0) as stdin, os.fdopen(out_w, "wb", buffering=0) as stdout:
            reader, writer = await stdio_streams(1 << 16, stdin, stdout)
            writer.write(b"x" * BIG)
            drain = asyncio.create_task(writer.drain())
            await asyncio.sleep(0.3)
            assert not drain.done()
            os.close(out_r)
            await asyncio.wait_for(drain, 10)
            assert writer.lost
            writer.write(b"dropped\n")
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b""  # stdin is still open: the loss ended the input
    finally:
        os.close(in_w)


def rpc_line(request_id: Any, method: Any, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message).encode() + b"\n"


async def test_stdout_closed_during_a_prompt_ends_the_connection_and_the_turn_aborted(tmp_path: Path) -> None:
    """The client closes the agent's stdout while a prompt runs (stdin left open): the connection ends as when the
    client leaves, the turn ends ``aborted`` and is on disk."""
    from acp.core import run_agent

    from dsh_todo.carriers.acp.lines import LineTransport
    from dsh_todo.carriers.acp.stdio import stdio_streams

    model = GatedModel()
    ctx = open_runtime(tmp_path / "sessions")
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    answers = os.fdopen(out_r, "rb")

    def answer(request_id: int) -> dict[str, Any]:
        while line := answers.readline():
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message
        raise AssertionError("stdout ended")

    try:
        with os.fdopen(in_r, "rb", buffering=0) as stdin, os.fdopen(out_w, "wb", buffering=0) as stdout:
            reader, writer = await stdio_streams(1 << 16, stdin, stdout)
            serving = asyncio.create_task(run_agent(TodoAgent(ctx, model),  # type: ignore[arg-type]
                                                    input_stream=LineTransport(reader, writer)))
            os.write(in_w, rpc_line(0, "initialize", {"protocolVersion": 1}))
            await asyncio.to_thread(answer, 0)
            os.write(in_w, rpc_line(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
            session_id = (await asyncio.to_thread(answer, 1))["result"]["sessionId"]
            os.write(in_w, rpc_line(2, "session/prompt", {"sessionId": session_id,
                                                          "prompt": [{"type": "text", "text": "go"}]}))
            await asyncio.wait_for(model.entered.wait(), 10)
            answers.close()
            await asyncio.wait_for(serving, 10)
        stored = ctx.session_persistence.read(session_id)
        assert stored.events[-1]["type"] == "turn/end"
        assert stored.events[-1]["data"]["reason"]["kind"] == "aborted"
    finally:
        os.close(in_w)
        ctx.dispose()


def spawn_acp(tmp_path: Path) -> subprocess.Popen[bytes]:
    script = tmp_path / "script.json"
    script.write_text(dumps(SCRIPT))
    return subprocess.Popen([sys.executable, *agent_argv(script, tmp_path / "sessions")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)


def send_all(process: subprocess.Popen[bytes], data: bytes) -> threading.Thread:
    """Write ``data`` to the agent's stdin on a thread: the agent stops reading while its stdout is full."""

    def run() -> None:
        assert process.stdin is not None
        with contextlib.suppress(OSError):
            process.stdin.write(data)
            process.stdin.flush()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


BIG_IDS = [f"{index:04d}" + "x" * 10_000 for index in range(40)]
"""Ids of invalid requests, echoed in their answers: 400 KB of answers, many times what a pipe holds."""


def test_a_client_that_stops_reading_gets_every_answer_once_it_reads(tmp_path: Path) -> None:
    """Back-pressure end to end: while the client does not read, the agent waits (and stays up); once it reads, every
    answer arrives, whole and in order, and the agent exits 0 at the end of its input."""
    process = spawn_acp(tmp_path)
    try:
        writing = send_all(process, b"".join(rpc_line(request_id, 5) for request_id in BIG_IDS))
        time.sleep(1)
        assert process.poll() is None
        assert process.stdout is not None
        answers = [json.loads(process.stdout.readline()) for _ in BIG_IDS]
        assert [answer["id"] for answer in answers] == BIG_IDS
        assert {answer["error"]["code"] for answer in answers} == {-32600}
        writing.join(10)
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(20) == 0
        assert process.stdout.read() == b""
        assert process.stderr is not None
        assert process.stderr.read().decode().splitlines()[1:] == []  # the banner only
    finally:
        process.kill()
        process.wait()


def test_stdout_closed_by_the_client_mid_write_is_a_clean_exit(tmp_path: Path) -> None:
    """Repro: a client that closed the agent's stdout (stdin left open) got a Python traceback on stderr for every
    answer after, each longer than the last, and the agent ran on until stdin ended. Now the agent, blocked writing
    to a full pipe when the reader goes, exits 0 promptly with nothing on stderr but the banner."""
    process = spawn_acp(tmp_path)
    try:
        send_all(process, b"".join(rpc_line(request_id, 5) for request_id in BIG_IDS))
        time.sleep(1)  # the pipe fills; the agent waits, mid-write
        assert process.poll() is None
        assert process.stdout is not None
        process.stdout.close()
        assert process.wait(20) == 0
        assert process.stderr is not None
        err = process.stderr.read().decode()
        assert "Traceback" not in err
        assert err.splitlines()[1:] == []  # the banner only
    finally:
        process.kill()
        process.wait()
