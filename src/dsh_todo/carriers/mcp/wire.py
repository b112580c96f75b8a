"""MCP over stdio, one JSON-RPC message per line, where every request gets exactly one answer.

The SDK's own stdio transport parses each line with pydantic, which refuses three kinds of valid-looking input and
then drops the line without a word, so the client waits forever: text that is not JSON (JSON-RPC wants ``-32700
Parse error`` with ``id: null``), lone surrogate escapes such as ``"\\ud800"`` (valid JSON text, and what JavaScript's
``JSON.stringify`` writes for half a surrogate pair) and values nested 200 levels or more. This transport reads the
lines itself and answers whatever it cannot hand on:

- not UTF-8, not JSON → ``-32700`` ``Parse error: …``, ``id: null``;
- JSON that is not a JSON-RPC message → ``-32600`` ``Invalid Request``, under the request's ``id`` when it has a
  usable one (an invalid notification is dropped: JSON-RPC never answers notifications);
- nesting deeper than :data:`MAX_DEPTH` or a line longer than :data:`MAX_LINE` → ``-32600`` under the request's id
  when it can be found (a bounded transport: neither the stack nor memory grows with what a client sends);
- blank lines are skipped.

Numbers are parsed so that the registry, not the transport, judges them, and the log keeps them as the client wrote
them: a number no float can hold (``1e400``, an integer of thousands of digits) or JavaScript's ``-0`` becomes a
:class:`RawNumber`, which the registry's lossless check refuses with ``Error: tool execution arguments must be
losslessly JSON-serializable`` (the reference's answer, conformance category ``lossless``) and which
:func:`raw_json` writes back verbatim into ``tool/call``. Other integers stay exact Python ints.

Answers are written with :func:`dsh_todo.jsonutil.dumps_bytes`, which escapes lone surrogates the way
``JSON.stringify`` does, so a string the client sent comes back intact. A client that stops reading (``EPIPE``) costs
the server nothing: answers are dropped and the server runs until stdin ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import select
import stat
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO, Final

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from dsh_todo.jsonutil import MAX_VALUE_DEPTH, dumps, dumps_bytes, nests_deeper

MAX_LINE: Final = 4 * 1024 * 1024
"""Longest line read, in bytes (the SDK's default HTTP body limit): longer lines are skipped and refused."""

MAX_DEPTH: Final = MAX_VALUE_DEPTH
"""Deepest nesting a message may have (objects and arrays). Deeper is refused before anything walks it."""

TOO_DEEP: Final = f"Invalid Request: JSON nested deeper than {MAX_DEPTH} levels"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600


class RawNumber:
    """A JSON number no Python float can carry losslessly, kept as the client's text.

    Not a ``float`` (nor an ``int``), so the registry's lossless check refuses it, as the reference refuses the
    ``Infinity`` or ``-0`` that JavaScript makes of it; :func:`raw_json` writes :attr:`text` back unchanged.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"RawNumber({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawNumber) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def _float(text: str) -> Any:
    value = float(text)
    return RawNumber(text) if math.isinf(value) else value


def _int(text: str) -> Any:
    if text == "-0":
        return RawNumber(text)
    try:
        return int(text)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits): no float holds it either
        return RawNumber(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(text: str) -> Any:
    """One line of JSON text, numbers kept exact (:class:`RawNumber`); ``ValueError`` if it is not JSON,
    ``RecursionError`` if it nests beyond what the parser can follow."""
    return json.loads(text, parse_float=_float, parse_int=_int, parse_constant=_no_constant)


def raw_json(value: Any) -> str:
    """Compact JSON for a parsed value, :class:`RawNumber` and non-finite floats written as numbers the client could
    have sent (``1e400``), never as ``null``: the text ``tool/call`` records must parse back to what was sent."""
    try:
        text = dumps_bytes(value)
    except (TypeError, ValueError, RecursionError):  # a RawNumber, or nesting too deep for the encoders
        pass
    else:
        if b"null" not in text:  # a non-finite float is written as null: without any null, nothing was one
            return text.decode("utf-8")
    try:
        if not _has_unusual_number(value):
            return dumps(value)
    except RecursionError:
        pass
    return "".join(_raw_parts(value))


def _has_unusual_number(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, RawNumber) or (isinstance(item, float) and not math.isfinite(item)):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _raw_parts(value: Any) -> Iterator[str]:
    """The pieces of :func:`raw_json`'s text, depth-first without recursion."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (_Literal, RawNumber)):
            yield item.text
        elif isinstance(item, float) and not math.isfinite(item):
            yield "1e400" if item > 0 else "-1e400"
        elif isinstance(item, dict):
            pieces: list[Any] = [_Literal("{")]
            for index, (key, child) in enumerate(item.items()):
                pieces += [_Literal(("," if index else "") + dumps(key) + ":"), child]
            stack.extend(reversed([*pieces, _Literal("}")]))
        elif isinstance(item, (list, tuple)):
            pieces = [_Literal("[")]
            for index, child in enumerate(item):
                pieces += [_Literal(","), child] if index else [child]
            stack.extend(reversed([*pieces, _Literal("]")]))
        else:
            yield dumps(item)


class _Literal:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


# -- finding a request's id without parsing it whole -------------------------------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s"{}\[\],:]+')


def scan_id(text: str) -> Any:
    """The top-level ``"id"`` of a message too deep or too long to parse, or ``None``: a token scan that only follows
    the nesting depth, so it neither recurses nor needs the message to be complete."""
    depth = 0
    expect_key = False
    after_id = 0  # 1: saw the top-level "id" key, 2: saw its colon
    for match in _TOKEN.finditer(text):
        token = match.group()
        if after_id == 2:
            if depth == 1 and token not in "{[":
                with contextlib.suppress(ValueError):
                    found = json.loads(token)
                    return found if _usable_id(found) else None
            return None
        if token in "{[":
            depth += 1
            expect_key = token == "{" and depth == 1
        elif token in "}]":
            depth -= 1
        elif token == ",":
            expect_key = depth == 1
        elif token == ":":
            after_id = 2 if after_id == 1 else 0
            expect_key = False
        elif depth == 1 and expect_key and token == '"id"':
            after_id = 1
        elif depth == 1:
            expect_key = False
    return None


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# -- one line in, a message or an answer out ---------------------------------------------------------------------


def error_answer(request_id: Any, code: int, message: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                             error=types.ErrorData(code=code, message=message)))


def decode(line: bytes) -> SessionMessage | None:
    """A line from the client: the message to serve, an answer to write back (a :class:`types.JSONRPCError`), or
    ``None`` for a line that needs neither (blank, an invalid notification or response)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return error_answer(None, PARSE_ERROR, f"Parse error: not UTF-8 (byte {exc.start})")
    if not text.strip():
        return None
    try:
        value = parse(text)
    except RecursionError:
        return error_answer(scan_id(text), INVALID_REQUEST, TOO_DEEP)
    except json.JSONDecodeError as exc:
        return error_answer(None, PARSE_ERROR, f"Parse error: {exc.msg} at column {exc.colno}")
    except ValueError as exc:
        return error_answer(None, PARSE_ERROR, f"Parse error: {exc}")
    request_id = value.get("id") if isinstance(value, dict) and _usable_id(value.get("id")) else None
    if nests_deeper(value, MAX_DEPTH):
        return error_answer(request_id, INVALID_REQUEST, TOO_DEEP)
    if not isinstance(value, dict):
        return error_answer(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    try:
        message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        pass
    else:
        if not (isinstance(message, types.JSONRPCNotification) and "id" in value):
            return SessionMessage(message)
        # a request whose id is no id (a list, null, a number no float holds) reads as a notification: refuse it
    if "id" in value and "method" in value:
        return error_answer(request_id, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request")
    if "id" in value and not ("result" in value or "error" in value):  # neither request nor response: whose id?
        return error_answer(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    return None  # a notification or a response that does not validate: nobody waits for an answer


def encode(message: SessionMessage) -> bytes:
    """One answer line, lone surrogates escaped as ``JSON.stringify`` escapes them."""
    return dumps_bytes(message.message.model_dump(by_alias=True, exclude_unset=True, mode="json")) + b"\n"


def read_line(source: BinaryIO) -> tuple[bytes, bool] | None:
    """The next line (without its newline) and whether it was cut at :data:`MAX_LINE` (the rest is skipped);
    ``None`` at the end of input."""
    line = source.readline(MAX_LINE + 1)
    if not line:
        return None
    if line.endswith(b"\n") or len(line) <= MAX_LINE:
        return line.rstrip(b"\r\n"), False
    while True:  # too long: skip to the end of the line without keeping it
        rest = source.readline(MAX_LINE)
        if not rest or rest.endswith(b"\n"):
            return line[:4096], True


# -- the transport -----------------------------------------------------------------------------------------------


@asynccontextmanager
async def stdio_transport(stdin: BinaryIO | None = None, stdout_fd: int | None = None) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]]:
    """``(read_stream, write_stream)`` for :meth:`mcp.server.lowlevel.Server.run` over stdin and stdout.

    While it serves, fd 1 points at stderr (a stray ``print`` cannot corrupt the wire) and answers go to a private
    duplicate of the original stdout. Lines are read on a daemon thread (any stdin: a pipe, a file, a tty), so an
    interrupted server never waits for a read that will not return.
    """
    loop = asyncio.get_running_loop()
    source = stdin if stdin is not None else sys.stdin.buffer
    private_out = None
    if stdout_fd is None:
        sys.stdout.flush()
        private_out = os.dup(1)
        os.dup2(2, 1)
        stdout_fd = private_out
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    answers = write_send.clone()

    async def deliver(message: SessionMessage) -> None:
        if isinstance(message.message, types.JSONRPCError):
            await answers.send(message)
        else:
            await read_send.send(message)

    async def finish() -> None:
        read_send.close()
        answers.close()

    def read_all() -> None:
        try:
            while (item := read_line(source)) is not None:
                line, cut = item
                if cut:
                    message: SessionMessage | None = error_answer(
                        scan_id(line.decode("utf-8", "replace")), INVALID_REQUEST,
                        f"Invalid Request: a message longer than {MAX_LINE} bytes")
                else:
                    message = decode(line)
                if message is not None:  # parsed here, off the event loop; handed over one at a time
                    asyncio.run_coroutine_threadsafe(deliver(message), loop).result()
        except (OSError, ValueError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # stdin failed, or the server is gone: either way this is the end of input
        finally:
            with contextlib.suppress(RuntimeError):
                asyncio.run_coroutine_threadsafe(finish(), loop)

    async def write_all() -> None:
        broken = False
        async with write_recv:
            async for message in write_recv:
                if broken:
                    continue  # the client stopped reading: drop answers, keep serving until stdin ends
                data = encode(message)
                try:
                    if not _write_now(stdout_fd, data):
                        await anyio.to_thread.run_sync(_write_fully, stdout_fd, data)
                except OSError:
                    broken = True

    threading.Thread(target=read_all, name="dsh-todo-mcp-stdin", daemon=True).start()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(write_all)
            yield read_recv, write_send
    finally:
        if private_out is not None:
            with contextlib.suppress(OSError):
                os.dup2(private_out, 1)
                os.close(private_out)


def _write_now(fd: int, data: bytes) -> bool:
    """Write ``data`` on the event loop when that cannot block: a pipe that has room for it (a write of at most
    ``PIPE_BUF`` bytes to a pipe with room completes at once). Otherwise (a larger answer, a full pipe, a client
    that stopped reading, any other kind of stdout) the caller writes it on a worker thread. Handing every answer to
    a thread cost a thread switch each way per call, about as much as the rest of the server's work on it."""
    if len(data) > select.PIPE_BUF or not _is_pipe(fd):
        return False
    writable = select.select([], [fd], [], 0)[1]
    if not writable:
        return False
    _write_fully(fd, data)
    return True


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def _write_fully(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
