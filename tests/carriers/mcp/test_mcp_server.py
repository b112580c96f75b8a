"""``dsh-todo mcp``: the MCP tool answers exactly as the native registry does; a connection is one turn, each call a
step of it.

Driven by the real SDK client: in process (both protocol eras: the 2026 per-request path and the handshake path
over in-memory streams), and against ``dsh-todo mcp`` as a stdio subprocess, whose log is then read back from disk.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import needs

needs.module("mcp")

import mcp_types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from dsh_todo.carriers.mcp.calls import ABSENT, SESSION_META_KEY, CallSession, Connections, raw_argument_text
from dsh_todo.carriers.mcp.server import build_server
from dsh_todo.harness import Agent, Context, Session
from dsh_todo.harness.tools.registry import ToolResult
from dsh_todo.jsonutil import dumps, loads
from dsh_todo.standard import open_runtime
from dsh_todo.testing import stop
from dsh_todo.tool_todo.rules import standing_plan
from tests.conftest import BootFactory, DiskSyncs, fixtures_dir, hanging_tool, plan_json, read_jsonl

pytestmark = pytest.mark.anyio

STEP_HEAD = ["step/start", "assistant/message", "tool/call"]
STEP_TAIL = ["tool/result", "step/end"]


def direct_vectors(allow_parallel: bool) -> list[dict[str, Any]]:
    """The public ``direct`` conformance vectors with an owning agent, for one policy."""
    vectors = read_jsonl(fixtures_dir() / "conformance" / "exec-vectors.jsonl")
    return [v for v in vectors if v["path"] == "direct" and v["agent"]
            and v["config"]["allowParallelInProgress"] is allow_parallel]


def plain(value: Any) -> Any:
    return loads(dumps(value))


def brief(events: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"type": e["type"], "data": plain(e["data"])} for e in events]


class Native:
    """The reference answer: ``ctx.tools.execute`` with an owning agent on a fresh session, and what it appended."""

    def __init__(self, make_ctx: BootFactory, allow_parallel: bool) -> None:
        self.ctx = make_ctx(allow_parallel=allow_parallel)
        self.count = 0

    async def __call__(self, args: Any) -> tuple[ToolResult, list[dict[str, Any]]]:
        self.count += 1
        session = self.ctx.sessions.create(f"native-{self.count}")
        result = await self.ctx.tools.execute("todo_write", args, Agent("native", session))
        return result, brief(session.events)


async def call(client: Client, arguments: Any) -> types.CallToolResult:
    """``tools/call`` with any JSON value as ``arguments``: objects the normal way, anything else sent as is."""
    if isinstance(arguments, dict):
        return await client.call_tool("todo_write", arguments)
    params = types.CallToolRequestParams.model_construct(name="todo_write", arguments=arguments)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns that the value is not the object MCP's schema wants
        return await client.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)


def check_step(new_events: Sequence[Any], step: int, arguments: Any, result: ToolResult,
               native_events: list[dict[str, Any]]) -> None:
    """One call's slice of the log: a step of the connection's turn, in the loop's own call shape (the client's
    model's reply advertising the call, then the call), with the native side effects."""
    types_ = [e["type"] for e in new_events]
    assert types_ == STEP_HEAD + [e["type"] for e in native_events] + STEP_TAIL
    assert brief(new_events[3:3 + len(native_events)]) == native_events
    assert new_events[0]["data"] == new_events[-1]["data"] == {"turn": 1, "step": step}
    advert, tool_call, tool_result = new_events[1], new_events[2], new_events[-2]
    assert tool_call["data"]["name"] == "todo_write"
    assert tool_call["data"]["arguments"] == raw_argument_text(arguments)
    check_advert(advert, tool_call)
    assert tool_result["sourceEventSeqs"] == [tool_call["seq"]]
    assert tool_result["surfaceOp"] == "append"
    block = tool_result["data"]["message"]
    assert block["toolCallId"] == tool_call["data"]["callId"]
    assert plain(block["content"]) == result.content
    assert block["isError"] is result.is_error
    assert plain(tool_result["data"].get("error")) == result.error


def check_advert(advert: Any, tool_call: Any) -> None:
    """The ``assistant/message`` that advertises an MCP call in its step (DSH 0.2 refuses a log whose ``tool/call``
    none advertised): the call's id, name and the very argument text the ``tool/call`` logged, from a model outside
    the harness, with an empty stream (a format-1 session)."""
    message = plain(advert["data"]["message"])
    assert plain(advert["data"]) == {
        "turn": tool_call["data"]["turn"], "step": tool_call["data"]["step"],
        "message": {"role": "assistant",
                    "content": [{"type": "tool-call", "id": tool_call["data"]["callId"], "name": "todo_write",
                                 "arguments": tool_call["data"]["arguments"]}],
                    "source": {"kind": "model", "provider": "external", "model": "external"},
                    "id": message["id"]},
        "stream": []}
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", message["id"])
    assert message["content"][0]["arguments"] == plain(tool_call["data"]["arguments"])
    assert advert["surfaceOp"] == "append"
    assert advert["seq"] == tool_call["seq"] - 1


def check_connection(events: Sequence[Any], calls: Sequence[tuple[Any, ToolResult, list[dict[str, Any]]]]) -> None:
    """A whole connection's log: one turn, opened by the first call and closed ``completed`` when the client left,
    holding one step per call in order."""
    assert events[0]["type"] == "turn/start" and events[0]["data"] == {"turn": 1}
    assert events[-1]["type"] == "turn/end" and events[-1]["data"] == {"turn": 1, "reason": {"kind": "completed"}}
    position = 1
    for step, (arguments, want, want_events) in enumerate(calls, start=1):
        size = len(STEP_HEAD) + len(want_events) + len(STEP_TAIL)
        check_step(events[position:position + size], step, arguments, want, want_events)
        position += size
    assert position == len(events) - 1


def check_answer(got: types.CallToolResult, want: ToolResult, *, structured: bool = True) -> None:
    """The native answer; its canonical value as ``structuredContent`` only when the server offers it
    (``--structured-output``)."""
    assert [block.model_dump(exclude_none=True) for block in got.content] == want.content
    assert got.is_error is want.is_error
    assert got.structured_content == (None if want.is_error or not structured else plain(want.value))


# -- in process -----------------------------------------------------------------------------------------------


def in_process(ctx: Context, *, structured: bool = True) -> Any:
    """The SDK's server on ``ctx`` for the SDK's in-memory ``Client``, which ends its sessions when it leaves."""
    return build_server(Connections(ctx, cwd="/project"), version="0", structured=structured, own=True)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tool_listing_is_our_description_and_schema(make_ctx: BootFactory, mode: str) -> None:
    ctx = make_ctx(allow_parallel=True)
    async with Client(in_process(ctx), mode=mode) as client:
        listed = (await client.list_tools()).tools
    [schema] = ctx.tools.schemas()
    assert [tool.name for tool in listed] == ["todo_write"]
    assert listed[0].description == schema["description"]
    assert listed[0].input_schema == plain(schema["parameters"])
    assert listed[0].output_schema == plain(ctx.tools.get("todo_write").output_schema)
    if mode == "auto":  # the 2026 surface keeps our key order; the 2025 one re-serialises the root object
        assert dumps(listed[0].input_schema) == dumps(schema["parameters"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tool_listing_says_the_call_is_safe_to_repeat(make_ctx: BootFactory, mode: str) -> None:
    """Repro (issue 13 item 7): ``tools/list`` had no ``title`` and no ``annotations``, so a client that honours the
    hints took the defaults (destructive, open world) and asked for confirmation on every call. The call replaces
    our own plan and nothing else: not read-only, not destructive, idempotent, closed world."""
    ctx = make_ctx(allow_parallel=True)
    async with Client(in_process(ctx), mode=mode) as client:
        [tool] = (await client.list_tools()).tools
    assert tool.title == "Update todo list"
    assert tool.annotations is not None
    assert tool.annotations.model_dump(by_alias=True, exclude_none=True) == {
        "readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("allow_parallel", [True, False], ids=["parallel", "single-active"])
async def test_conformance_vectors_in_process(make_ctx: BootFactory, mode: str, allow_parallel: bool) -> None:
    ctx = make_ctx(allow_parallel=allow_parallel)
    vectors = direct_vectors(allow_parallel)
    assert vectors
    native = Native(make_ctx, allow_parallel)
    session: Session | None = None
    wanted: list[tuple[Any, ToolResult, list[dict[str, Any]]]] = []
    async with Client(in_process(ctx), mode=mode) as client:
        for step, vector in enumerate(vectors, start=1):
            want, want_events = await native(vector["args"])
            assert want.is_error is vector["isError"], vector["id"]
            before = session.seq if session is not None else 1
            got = await call(client, vector["args"])
            check_answer(got, want)
            assert got.meta is not None
            session = ctx.sessions.get(got.meta[SESSION_META_KEY])
            assert session is not None
            check_step(session.events[before:], step, vector["args"], want, want_events)
            wanted.append((vector["args"], want, want_events))
    assert session is not None and session.closed  # the connection ended: its turn closed, its session let go
    check_connection(session.events, wanted)


async def test_absent_arguments_are_an_empty_object(make_ctx: BootFactory) -> None:
    """No ``arguments`` is the loop's empty argument string: logged as ``""``, executed as ``{}``."""
    ctx = make_ctx(allow_parallel=True)
    async with Client(in_process(ctx)) as client:
        got = await client.call_tool("todo_write")
        assert got.meta is not None
        session = ctx.sessions.get(got.meta[SESSION_META_KEY])
    assert got.is_error
    assert got.content[0].model_dump(exclude_none=True) == {
        "type": "text", "text": 'Error: invalid arguments: missing required property "todos"'}
    assert session is not None
    assert [e["data"]["arguments"] for e in session.events if e["type"] == "tool/call"] == [""]


async def test_unknown_tool_is_a_protocol_error_and_logs_nothing(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    async with Client(in_process(ctx)) as client:
        with pytest.raises(MCPError, match='unknown tool "todo_read"'):
            await client.call_tool("todo_read", {})
    assert ctx.sessions.list() == []


async def test_concurrent_calls_never_interleave_their_steps(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    seen: list[str] = []

    async def one(client: Client, index: int) -> None:
        got = await client.call_tool("todo_write", {"todos": [{"content": f"task {index}", "status": "pending"}]})
        assert got.meta is not None
        seen.append(got.meta[SESSION_META_KEY])

    async with Client(in_process(ctx)) as client:
        async with anyio.create_task_group() as group:
            for index in range(8):
                group.start_soon(one, client, index)
        session = ctx.sessions.get(seen[0])
        assert session is not None and set(seen) == {session.id}
        kinds = [e["type"] for e in session.events]
        assert kinds == ["turn/start", *[*STEP_HEAD, "todo/write", *STEP_TAIL] * 8]
        assert [e["data"]["step"] for e in session.events if e["type"] == "step/start"] == list(range(1, 9))


async def test_turns_satisfy_the_session_invariant(make_ctx: BootFactory) -> None:
    """With DSH's turn-enclosure invariant mounted, a host calling the tool outside a turn is vetoed; MCP is not."""
    ctx = make_ctx(allow_parallel=True, invariants={"enabled": True}, session_invariant=True, todo_invariant=True)
    async with Client(in_process(ctx)) as client:
        got = await client.call_tool("todo_write", {"todos": [{"content": "a", "status": "in_progress"}]})
    assert not got.is_error, got.content


async def test_call_session_without_the_sdk(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=False)
    calls = CallSession(ctx, cwd="/srv/project")
    assert calls.session is None  # nothing is created before the first call
    first = await calls.call("todo_write")
    second = await calls.call("todo_write", {"todos": [{"content": "a", "status": "in_progress"}]})
    assert first.text == 'Error: invalid arguments: missing required property "todos"'
    assert second.text == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    session = calls.session
    assert session is not None and session.cwd == "/srv/project"
    assert [e["data"]["arguments"] for e in session.events if e["type"] == "tool/call"] == [
        "", '{"todos":[{"content":"a","status":"in_progress"}]}']
    assert standing_plan(session.events) == [{"content": "a", "status": "in_progress"}]
    calls.close()
    calls.close()
    assert session.closed
    with pytest.raises(RuntimeError, match="closed"):
        await calls.call("todo_write", ABSENT)


# -- over stdio, against the real command ---------------------------------------------------------------------


def command_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DSH_TODO_ROOT", None)
    return env


@pytest.fixture
def server_cwd(tmp_path: Path) -> Iterator[Path]:
    cwd = tmp_path / "project"
    cwd.mkdir()
    yield cwd


@pytest.mark.parametrize("allow_parallel", [True, False], ids=["parallel", "single-active"])
async def test_conformance_vectors_over_stdio(make_ctx: BootFactory, tmp_path: Path, server_cwd: Path,
                                              allow_parallel: bool, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sessions"
    argv = ["-m", "dsh_todo.cli", "mcp", "--root", str(root)] + ([] if allow_parallel else ["--single-active"])
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(server_cwd), env=command_env())
    vectors = direct_vectors(allow_parallel)
    native = Native(make_ctx, allow_parallel)
    wanted: list[tuple[Any, ToolResult, list[dict[str, Any]]]] = []
    session_ids: set[str] = set()
    with anyio.fail_after(60):
        async with Client(params) as client:
            for vector in vectors:
                want, want_events = await native(vector["args"])
                got = await call(client, vector["args"])
                check_answer(got, want, structured=False)
                assert got.meta is not None
                session_ids.add(got.meta[SESSION_META_KEY])
                wanted.append((vector["args"], want, want_events))
    # The client closed stdin; the server flushed, released its lock and exited. Read the log back from disk.
    [session_id] = session_ids
    ctx: Context = open_runtime(root)
    try:
        stored = ctx.session_persistence.read(session_id)
    finally:
        ctx.dispose()
    assert stored.torn is None
    assert stored.meta["cwd"] == str(server_cwd)
    events = stored.events
    assert [e["seq"] for e in events] == list(range(len(events)))
    check_connection(events, wanted)
    # …and ``dsh-todo plan`` reads it like any other DSH log.
    from dsh_todo.cli import main

    capsys.readouterr()
    assert main(["plan", str(stored.path.parent), "--json"]) == 0
    assert loads(capsys.readouterr().out) == plain(standing_plan(events))


async def test_streamable_http(tmp_path: Path, server_cwd: Path) -> None:
    """``--http``: one server, answered over streamable HTTP on 127.0.0.1; the log is flushed on shutdown."""
    import subprocess

    root = tmp_path / "sessions"
    process = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "mcp", "--http", "--port", "0",
                                "--root", str(root)], cwd=server_cwd, env=command_env(),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        with anyio.fail_after(30):
            banner = await anyio.to_thread.run_sync(process.stderr.readline)
            line = await anyio.to_thread.run_sync(process.stderr.readline)
        assert banner.startswith("dsh-todo mcp: serving todo_write (allowParallelInProgress: true)"), banner
        assert line.startswith("dsh-todo mcp: listening on http://127.0.0.1:"), line
        url = line.split("listening on ", 1)[1].strip()
        with anyio.fail_after(30):
            async with Client(url) as client:
                got = await client.call_tool("todo_write", {"todos": [{"content": "ship", "status": "in_progress"}]})
        assert got.content[0].model_dump(exclude_none=True) == {
            "type": "text", "text": "Updated todo list: 0 pending, 1 in progress, 0 completed."}
        assert got.meta is not None
        session_id = got.meta[SESSION_META_KEY]
    finally:
        stop(process)
    ctx: Context = open_runtime(root)
    try:
        stored = ctx.session_persistence.read(session_id)
    finally:
        ctx.dispose()
    assert standing_plan(stored.events) == [{"content": "ship", "status": "in_progress"}]


# -- the standing plan across calls (issue 12) -------------------------------------------------------------------

ACCEPTED = {"todos": [{"content": "ship", "status": "in_progress"}]}
PLAN = [{"content": "ship", "status": "in_progress"}]
REFUSED: list[Any] = [
    {"todos": [{"content": "ship", "status": "doing"}]},  # the schema refuses it
    {"todos": [{"content": "a", "status": "pending"}, {"content": "a ", "status": "pending"}]},  # the tool does
    "not an object",  # the registry does, before either
]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_rejected_call_leaves_the_standing_plan_alone(make_ctx: BootFactory, mode: str) -> None:
    """Repro (issue 12): a valid call, then a rejected one; ``dsh-todo plan`` printed ``null`` because the rejected
    call opened a turn of its own, and its ``turn/start`` cleared the plan it never replaced."""
    ctx = make_ctx(allow_parallel=True)
    async with Client(in_process(ctx), mode=mode) as client:
        accepted = await call(client, ACCEPTED)
        assert not accepted.is_error and accepted.meta is not None
        session = ctx.sessions.get(accepted.meta[SESSION_META_KEY])
        assert session is not None
        for arguments in REFUSED:
            assert (await call(client, arguments)).is_error
            assert ctx.session_projections.snapshot(session)["values"]["todos"] == PLAN
        assert (await client.call_tool("todo_write")).is_error  # no arguments at all
        assert ctx.session_projections.snapshot(session)["values"]["todos"] == PLAN
    assert standing_plan(session.events) == PLAN  # and after the client went away


async def test_a_cancelled_call_is_answered_and_leaves_the_turn_and_the_plan_alone(make_ctx: BootFactory) -> None:
    """Repro (issue 12): a valid call, then a call the client cancels while it runs; the cancelled call's own turn
    cleared the plan. The client cancelled one request, not the connection: the call gets ``Error: tool call
    aborted`` and its step closes; the next call is the next step of the same turn, which ends when the client
    goes away."""
    ctx = make_ctx(allow_parallel=True)
    started = hanging_tool(ctx)
    calls = CallSession(ctx)
    assert not (await calls.call("todo_write", ACCEPTED)).is_error
    async with anyio.create_task_group() as group:
        group.start_soon(calls.call, "slow", {})
        await started.wait()
        group.cancel_scope.cancel()
    session = calls.session
    assert session is not None
    assert standing_plan(session.events) == PLAN
    assert [e["type"] for e in session.events][7:] == [
        "step/start", "assistant/message", "tool/call", "tool/result", "step/end"]
    result = session.events[10]
    assert result["sourceEventSeqs"] == [9]
    assert result["data"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert result["data"]["message"]["content"] == [{"type": "text", "text": "Error: tool call aborted"}]
    assert (await calls.call("todo_write", {"todos": []})).text == (
        "Updated todo list: 0 pending, 0 in progress, 0 completed.")
    assert session.events[-1]["data"] == {"turn": 1, "step": 3}
    calls.close()
    assert session.events[-1]["data"] == {"turn": 1, "reason": {"kind": "completed"}}
    assert standing_plan(session.events) == []


async def test_a_rejected_call_over_stdio_leaves_the_persisted_plan_alone(tmp_path: Path, server_cwd: Path) -> None:
    """The same repro against ``dsh-todo mcp`` itself: ``dsh-todo plan --json`` on its log, while the client is still
    connected and after it left."""
    root = tmp_path / "sessions"
    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_todo.cli", "mcp", "--root", str(root)],
                                   cwd=str(server_cwd), env=command_env())
    with anyio.fail_after(60):
        async with Client(params) as client:
            accepted = await call(client, ACCEPTED)
            assert not accepted.is_error and accepted.meta is not None
            session_id = accepted.meta[SESSION_META_KEY]
            for arguments in REFUSED:
                assert (await call(client, arguments)).is_error
                # Every call is durable before its answer: the live log already says what the client was told.
                assert plan_json(session_log(root, session_id)) == PLAN
    assert plan_json(session_log(root, session_id)) == PLAN


def session_log(root: Path, session_id: str) -> Path:
    ctx: Context = open_runtime(root)
    try:
        where = ctx.session_persistence.locate(session_id)
    finally:
        ctx.dispose()
    assert where is not None
    return Path(where)


async def test_a_harness_failure_is_answered_as_the_log_has_it(make_ctx: BootFactory,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro (issue 13 item 2): a call on which the harness itself raised (it was a RecursionError in the lossless
    walk) reached the SDK, which answered JSON-RPC error code 0 with the exception's text and printed a traceback.
    The client gets one tool result, the ``Error: …`` the log holds, and the step is closed."""
    ctx = make_ctx(allow_parallel=True)

    async def broken(*_args: Any, **_kwargs: Any) -> ToolResult:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(ctx.tools, "execute", broken)
    async with Client(in_process(ctx)) as client:
        got = await client.call_tool("todo_write", {"todos": []})
        assert got.meta is not None
        session = ctx.sessions.get(got.meta[SESSION_META_KEY])
        assert session is not None
        assert [e["type"] for e in session.events] == ["turn/start", *STEP_HEAD, *STEP_TAIL]
    assert got.is_error
    assert [block.model_dump(exclude_none=True) for block in got.content] == [
        {"type": "text", "text": "Error: maximum recursion depth exceeded"}]
    assert session.events[4]["data"]["message"]["content"] == [
        {"type": "text", "text": "Error: maximum recursion depth exceeded"}]
    assert session.events[-1]["type"] == "turn/end"


async def test_each_call_is_durable_at_one_fsync(tmp_path: Path, disk_syncs: DiskSyncs) -> None:
    """Repro (issue 14 goal 3): a durable MCP call cost two fsyncs and a checkpoint rename while each call was a turn
    of its own. A call is a step of the connection's turn: one fsync, whoever makes it, with everything the client
    is told already on disk when the answer comes back; the turn's end at close is one more."""
    ctx = open_runtime(tmp_path / "root")
    calls = CallSession(ctx, cwd=str(tmp_path))
    try:
        await calls.call("todo_write", {"todos": [{"content": "first", "status": "pending"}]})  # creates the log
        log = Path(ctx.session_persistence.locate(calls.session_id) or "")
        for number in range(3):
            todos = [{"content": f"task {number}", "status": "in_progress"}]
            disk_syncs.reset()
            result = await calls.call("todo_write", {"todos": todos})
            assert not result.is_error
            assert (disk_syncs.here("fsync"), disk_syncs.elsewhere("fsync")) == (1, 0)
            assert (disk_syncs.here("replace"), disk_syncs.elsewhere("replace")) == (0, 0)
            assert plan_json(log) == todos
        disk_syncs.reset()
        calls.close()
        assert disk_syncs.here("fsync") == 1  # the turn's end
        assert disk_syncs.here("replace") + disk_syncs.elsewhere("replace") == 1  # its checkpoint, by close
    finally:
        calls.close()
        ctx.dispose()
