"""The stdio server's direct answers (``carriers/mcp/calls.py``, :class:`Direct`) against the SDK's, byte for byte.

The server's own pieces run in process (``build_server`` and ``stdio_transport`` over two pipes): once with the
direct path, once without it, on the same lines. Every answer must be the same bytes (session ids aside) and both
connections must leave the same log; the direct run must really have answered the plain requests itself. Then what
only the direct path has to get right by itself: a client's cancellation, the end of input during a call.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import select
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests import needs

needs.module("mcp")

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from dsh_todo.carriers.jsonrpc import Lines, read_line
from dsh_todo.carriers.mcp.calls import HANDSHAKE_VERSIONS, LATEST_VERSION, Connections, Direct
from dsh_todo.carriers.mcp.stdio import serve_stdio
from dsh_todo.carriers.mcp.wire import MAX_DEPTH, Request
from dsh_todo.harness import Context
from dsh_todo.jsonutil import dumps
from dsh_todo.standard import composition as persisted
from tests.conftest import BootFactory, hanging_tool

pytestmark = pytest.mark.anyio

ANSWER_TIMEOUT = 20.0
TEN = {"todos": [{"content": f"step {i}", "status": ("completed", "in_progress", "pending")[i % 3]}
                 for i in range(10)]}


class Counting(Direct):
    """The direct path, noting the id of every request it answered itself."""

    def __init__(self, connections: Connections, *, structured: bool) -> None:
        super().__init__(connections, server_version="0", structured=structured)
        self.served: list[Any] = []

    def serve(self, request: Request) -> Any:
        served = super().serve(request)
        if served is not None:
            self.served.append(request.id)
        return served


class SdkOnly(Direct):
    """No direct path: every message goes to the SDK half (the reference the direct answers are held to)."""

    def __init__(self, connections: Connections, *, structured: bool) -> None:
        super().__init__(connections, server_version="0", structured=structured)

    def serve(self, request: Request) -> Any:
        return None


class Pipes:
    """A client's end of an in-process stdio server: lines in, answer lines out (each within a deadline)."""

    direct: Direct

    def __init__(self) -> None:
        self.server_in, self.client_out = os.pipe()
        self.client_in, self.server_out = os.pipe()
        self._pending = b""

    def send(self, line: bytes) -> None:
        os.write(self.client_out, line + b"\n")

    def _answer(self) -> bytes:
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            assert left > 0, "no answer: the server left the request unanswered"
            if select.select([self.client_in], [], [], left)[0]:
                chunk = os.read(self.client_in, 1 << 16)
                assert chunk, "the server closed stdout"
                self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line

    async def answer(self) -> bytes:
        return await anyio.to_thread.run_sync(self._answer)

    async def ask(self, line: bytes) -> bytes:
        self.send(line)
        return await self.answer()

    def rest(self) -> bytes:
        """Whatever the server wrote after its last answer was read (call once it has stopped)."""
        os.close(self.server_out)
        chunks = [self._pending]
        while chunk := os.read(self.client_in, 1 << 16):
            chunks.append(chunk)
        os.close(self.client_in)
        return b"".join(chunks)


@asynccontextmanager
async def serving(ctx: Context, kind: type[Direct] = Counting, *, structured: bool = False) -> AsyncIterator[Pipes]:
    """``dsh-todo mcp``'s stdio server on ``ctx`` in process, its direct path of ``kind`` (``pipes.direct``); input
    ends, and the server stops and closes its session, when the block is left."""
    pipes = Pipes()
    connections = Connections(ctx, cwd="/project")
    pipes.direct = kind(connections, structured=structured)  # type: ignore[call-arg]
    stdin = os.fdopen(pipes.server_in, "rb")

    async def serve() -> None:
        try:
            await serve_stdio(connections, version="0", stop=asyncio.Event(), stdin=stdin, stdout_fd=pipes.server_out,
                              direct=pipes.direct)
        finally:
            connections.close()

    async with anyio.create_task_group() as group:
        group.start_soon(serve)
        try:
            yield pipes
        finally:
            os.close(pipes.client_out)
    stdin.close()


def request(request_id: Any, method: str, params: Any = None, **extra: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps({**message, **extra}).encode()


def call(request_id: Any, arguments: bytes | None, name: str = "todo_write") -> bytes:
    """A ``tools/call`` line with ``arguments`` as raw JSON text (left out when ``None``)."""
    params = b'{"name":%s%s}' % (json.dumps(name).encode(), b"" if arguments is None else b',"arguments":' + arguments)
    return b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}' % (json.dumps(request_id).encode(), params)


def initialize(version: str) -> bytes:
    return request(0, "initialize", {"protocolVersion": version, "capabilities": {},
                                     "clientInfo": {"name": "differential", "version": "1"}})


INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


CONVERSATION: list[tuple[bytes, bool]] = [  # (line, whether the server answers it); after the handshake
    (call(1, json.dumps(TEN).encode()), True),  # accepted: structuredContent
    (call(2, b'{"todos":3}'), True),  # refused by the registry: isError
    (call("three", b'{"todos":[{"content":"a","status":"pending"},{"content":" a ","status":"done"}]}'), True),
    (call(4, b'{"todos":[{"content":"a","status":"pending"},{"content":" a","status":"pending"}]}'), True),
    (call(5, b'{"todos":[]}'), True),
    (call(6, None), True),  # arguments left out
    (call(7, b"null"), True),
    (call(8, b"[1,2]"), True),  # not an object: the registry's own answer
    (call(9, b'"text"'), True),
    (call(10, b"1e400"), True),  # lossless refusal (RawNumber)
    (call(11, b'{"todos":[],"x":-0}'), True),
    (call(12, b'{"todos":[],"x":' + b"9" * 400 + b"}"), True),
    (call(13, b'{"todos":[],"x":123456789012345678901234567890}'), True),
    (call(14, b'{"todos":[{"content":"\\ud800 half","status":"pending"}]}'), True),  # lone surrogate
    (call(15, b'{"todos":[{"content":"caf\\u00e9 \xe2\x9c\x93","status":"in_progress"}]}'), True),
    (call(16, nested(MAX_DEPTH - 8)), True),  # deep, within the limit
    (call(17, nested(MAX_DEPTH + 3)), True),  # beyond it: refused by the transport
    (call(18, b'{"todos":[]}', name="no_such_tool"), True),  # unknown tool: the SDK's -32602
    (call(19, b'{"todos":[]}', name=""), True),
    (request(20, "tools/call", {"arguments": {"todos": []}}), True),  # no name: the SDK's invalid params
    (request(21, "tools/call", {"name": 7}), True),
    (request(22, "tools/call", [1]), True),
    (request(23, "tools/call", {"name": "todo_write", "arguments": {"todos": []}, "_meta": {"progressToken": 5}}),
     True),  # a progress token (Claude Code sends a _meta of its own): nothing to report, the same answer
    (request(31, "tools/call", {"name": "todo_write", "arguments": {"todos": []}, "_meta": 3}), True),
    (request(24, "tools/call", {"name": "todo_write", "arguments": {"todos": []}, "task": {}}), True),
    (request(25, "tools/call", {"name": "todo_write", "arguments": {"todos": []}}, extra=1), True),
    (request("7", "tools/call", {"name": "todo_write", "arguments": {"todos": []}}), True),
    (request(2**70, "tools/call", {"name": "todo_write", "arguments": {"todos": []}}), True),
    (request(-3, "ping"), True),
    (request("ping-2", "ping", {}), True),
    (request("ping-3", "ping", {"_meta": {"progressToken": "p"}}), True),
    (request(26, "tools/list"), True),
    (request(27, "tools/list", {}), True),
    (request(28, "tools/list", {"cursor": "x"}), True),
    (request(29, "resources/list"), True),  # a method the server does not serve
    (b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}', False),
    (call(30, json.dumps(TEN).encode()), True),
]
PLAIN = [0, 1, 2, "three", 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 23, "7", 2**70, -3, "ping-2", 26, 27, 30]
"""The requests the direct path answers itself: ``initialize`` (id 0), then those of CONVERSATION it takes (the rest
are the SDK's, or refused before)."""

SESSION_ID = re.compile(rb'"dsh-todo/sessionId":"[0-9a-f-]{36}"')
RANDOM_IDS = re.compile(r"call_mcp_[0-9a-f]{24}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def converse(ctx: Context, kind: type[Direct], version: str, *, structured: bool = False,
                   before: bytes | None = None) -> tuple[list[bytes], str, Direct]:
    """The answers to the handshake and :data:`CONVERSATION` (after the line ``before``, if any, sent before the
    handshake); the session id; the direct path."""
    async with serving(ctx, kind, structured=structured) as pipes:
        answers = [] if before is None else [await pipes.ask(before)]
        answers.append(await pipes.ask(initialize(version)))
        pipes.send(INITIALIZED)
        for line, answered in CONVERSATION:
            if answered:
                answers.append(await pipes.ask(line))
            else:
                pipes.send(line)
    assert pipes.rest() == b""
    [session_id] = {match.group() for answer in answers for match in SESSION_ID.finditer(answer)}
    return answers, json.loads(b"{" + session_id + b"}")["dsh-todo/sessionId"], pipes.direct


def stored(ctx: Context, session_id: str) -> list[str]:
    """The connection's log as read back from disk, ids that are random per run replaced, times left out."""
    log = ctx.session_persistence.read(session_id)
    assert log.torn is None
    return [RANDOM_IDS.sub("ID", dumps({k: v for k, v in event.items() if k != "time"})) for event in log.events]


def test_the_handshake_versions_are_the_sdks() -> None:
    assert (HANDSHAKE_VERSIONS, LATEST_VERSION) == (HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION)


@pytest.mark.parametrize("structured", [False, True], ids=["text", "structured"])
@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, "2099-01-01"])
async def test_direct_answers_are_the_sdks_bytes(make_ctx: BootFactory, tmp_path: Path, version: str,
                                                 structured: bool) -> None:
    """The handshake and every plain request, answered without the SDK, are the very bytes the SDK writes, at every
    handshake version (and an unknown one, negotiated to the latest), with and without ``--structured-output``; the
    first declined request starts the SDK half, told the handshake, and the connection goes on."""
    ctx = make_ctx(persisted(tmp_path / "sessions", compression="none", invariants=True))
    through_sdk, sdk_session, _ = await converse(ctx, SdkOnly, version, structured=structured)
    through_direct, direct_session, direct = await converse(ctx, Counting, version, structured=structured)
    assert isinstance(direct, Counting) and direct.served == PLAIN
    assert len(through_direct) == len(through_sdk) == 1 + sum(answered for _line, answered in CONVERSATION)
    for got, want in zip(through_direct, through_sdk, strict=True):
        assert SESSION_ID.sub(b"S", got) == SESSION_ID.sub(b"S", want)
    assert stored(ctx, direct_session) == stored(ctx, sdk_session)
    tools = json.loads(through_direct[1 + CONVERSATION.index((request(26, "tools/list"), True))])
    [tool] = tools["result"]["tools"]
    assert tool["name"] == "todo_write" and ("outputSchema" in tool) is structured
    accepted = json.loads(through_direct[1])["result"]
    assert ("structuredContent" in accepted) is structured
    assert accepted["content"] == [{"type": "text",
                                    "text": "Updated todo list: 3 pending, 3 in progress, 4 completed."}]


async def test_a_request_before_the_handshake_leaves_the_connection_to_the_sdk(make_ctx: BootFactory,
                                                                               tmp_path: Path) -> None:
    """A call before ``initialize`` gets the SDK's init gate answer; the SDK then keeps the connection (its own
    handshake and everything after it), and every answer is what the SDK alone gives."""
    ctx = make_ctx(persisted(tmp_path / "sessions", compression="none"))
    early = call(-1, b'{"todos":[]}')
    through_sdk, _, _ = await converse(ctx, SdkOnly, "2025-06-18", before=early)
    through_direct, _, direct = await converse(ctx, Counting, "2025-06-18", before=early)
    assert json.loads(through_direct[0])["error"]["code"] == -32602
    assert isinstance(direct, Counting) and direct.served == []
    assert [SESSION_ID.sub(b"S", got) for got in through_direct] == [SESSION_ID.sub(b"S", got) for got in through_sdk]


async def test_a_ping_before_the_handshake_is_answered_directly(make_ctx: BootFactory, tmp_path: Path) -> None:
    ctx = make_ctx(persisted(tmp_path / "sessions", compression="none"))
    through_sdk, _, _ = await converse(ctx, SdkOnly, "2025-06-18", before=request(-5, "ping"))
    through_direct, _, direct = await converse(ctx, Counting, "2025-06-18", before=request(-5, "ping"))
    assert isinstance(direct, Counting) and direct.served == [-5, *PLAIN]
    assert [SESSION_ID.sub(b"S", got) for got in through_direct] == [SESSION_ID.sub(b"S", got) for got in through_sdk]


@asynccontextmanager
async def a_slow_call_running(ctx: Context) -> AsyncIterator[Pipes]:
    """A served connection past its handshake whose request 1 is a direct call to a tool that never returns by
    itself; input ends when the block does."""
    started = hanging_tool(ctx)
    async with serving(ctx) as pipes:
        await pipes.ask(initialize("2025-06-18"))
        pipes.send(INITIALIZED)
        pipes.send(call(1, b"{}", name="slow"))
        with anyio.fail_after(ANSWER_TIMEOUT):
            await started.wait()
        yield pipes


async def test_a_call_its_client_cancels_gets_no_answer_and_ends_its_step(make_ctx: BootFactory,
                                                                          tmp_path: Path) -> None:
    """``notifications/cancelled`` for a direct call that is still running: no answer to it (as the SDK does), an
    ``Error: tool call aborted`` result closing its step in the log, and the connection goes on."""
    ctx = make_ctx(persisted(tmp_path / "sessions", compression="none"))
    async with a_slow_call_running(ctx) as pipes:
        pipes.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}')
        assert json.loads(await pipes.ask(request(2, "ping"))) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        answer = json.loads(await pipes.ask(call(3, b'{"todos":[]}')))
    assert pipes.rest() == b""
    assert isinstance(pipes.direct, Counting) and pipes.direct.served == [0, 1, 2, 3]
    events = ctx.session_persistence.read(answer["result"]["_meta"]["dsh-todo/sessionId"]).events
    kinds = [event["type"] for event in events]
    assert kinds == ["turn/start", "step/start", "assistant/message", "tool/call", "tool/result", "step/end",
                     "step/start", "assistant/message", "tool/call", "todo/write", "tool/result", "step/end",
                     "turn/end"]
    assert events[4]["data"]["error"] == {"name": "AbortError", "code": "ABORTED"}


async def test_a_call_running_when_input_ends_is_answered_connection_closed(make_ctx: BootFactory,
                                                                            tmp_path: Path) -> None:
    """The client closes stdin while a direct call runs (and never finishes): once :data:`DRAIN_SECONDS` are up it
    gets the SDK's ``Connection closed`` (-32000), its step and the connection's turn close in the log."""
    ctx = make_ctx(persisted(tmp_path / "sessions", compression="none"))
    async with a_slow_call_running(ctx) as pipes:
        session_id = pipes.direct.connections.default.session_id
    answer = json.loads(pipes.rest())
    assert answer == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "Connection closed"}}
    kinds = [event["type"] for event in ctx.session_persistence.read(session_id).events]
    assert kinds == ["turn/start", "step/start", "assistant/message", "tool/call", "tool/result", "step/end",
                     "turn/end"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a plain test: the module's anyio mark needs a backend
@given(data=st.binary(max_size=300).map(lambda b: b.replace(b"x", b"\n").replace(b"y", b"\r")),
       cuts=st.lists(st.integers(1, 64)))
@example(data=b"\0" * 42, cuts=[])  # an over-long last line: the loop's reader kept 42 bytes
def test_lines_split_a_stream_as_read_line_reads_a_file(anyio_backend: str, data: bytes, cuts: list[int]) -> None:
    """The loop's reader (:class:`Lines`, fed whatever a pipe delivers) and the thread's (:func:`read_line` on a
    file) see the same lines, cut at the same limit, however the bytes arrive."""
    source = io.BytesIO(data)
    want = []
    while (item := read_line(source, 40)) is not None:
        want.append(item)
    lines, got, start = Lines(40), [], 0
    for size in [*cuts, len(data)]:
        got += lines.feed(data[start:start + size])
        start += size
    got += lines.end()
    assert got == want
