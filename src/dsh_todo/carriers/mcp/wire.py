"""MCP over stdio, one JSON-RPC message per line, where every request gets exactly one answer.

The SDK's own stdio transport parses each line with pydantic, which refuses three kinds of valid-looking input and
then drops the line without a word, so the client waits forever: text that is not JSON (JSON-RPC wants ``-32700
Parse error`` with ``id: null``), lone surrogate escapes such as ``"\\ud800"`` (valid JSON text, and what JavaScript's
``JSON.stringify`` writes for half a surrogate pair) and values nested 200 levels or more. This transport reads the
lines itself, with the rules of :mod:`dsh_todo.carriers.jsonrpc` (lines of at most :data:`MAX_LINE` bytes, nesting of
at most :data:`MAX_DEPTH`, numbers kept as the client wrote them), and answers whatever it cannot hand on; a JSON
object it can is validated by the SDK's models, and refused by the same rules when they fail it. A number no float
can hold becomes a :class:`~dsh_todo.carriers.jsonrpc.RawNumber`, which the registry's lossless check refuses with
``Error: tool execution arguments must be losslessly JSON-serializable`` (the reference's answer, conformance
category ``lossless``) and which :func:`raw_json` writes back verbatim into ``tool/call``.

Answers are written with :func:`dsh_todo.jsonutil.dumps_bytes`, which escapes lone surrogates the way
``JSON.stringify`` does, so a string the client sent comes back intact. A client that stops reading (``EPIPE``) costs
the server nothing: answers are dropped and the server runs until stdin ends.

Requests of the plain shape (:class:`Request`: ``tools/call``, ``ping``, ``tools/list``) are offered first to a
:class:`Shortcut` (the server's :class:`~dsh_todo.carriers.mcp.direct.Direct`), which answers them without the SDK
once the SDK has accepted the handshake; whatever it declines is validated and handed to the SDK as before. So that a
direct answer never overtakes the SDK's, a request is offered only while no request handed to the SDK waits for its
answer. A ``notifications/cancelled`` naming a direct call in flight cancels it (its step ends ``Error: tool call
aborted`` in the log, and the request gets no answer, as the SDK does); a call still running when input ends is
cancelled and answered ``Connection closed``, as the SDK answers its own, before the SDK's lifespan ends. A request
handed to the SDK just before input ended, whose handler the SDK cancelled before it ran, gets the same answer once
the SDK has stopped: every request is answered. Reading never waits for a direct call (a tool that awaits would
otherwise keep its cancellation unread): beyond :data:`DIRECT_LIMIT` direct answers in progress, requests go the
SDK's way (docs/decisions/0013).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import select
import stat
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, BinaryIO, Final, Protocol

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from dsh_todo.carriers import jsonrpc
from dsh_todo.carriers.jsonrpc import RawNumber
from dsh_todo.jsonutil import dumps, dumps_bytes

log = logging.getLogger("dsh_todo.mcp")

MAX_LINE: Final = 4 * 1024 * 1024
"""Longest line read, in bytes (the SDK's default HTTP body limit): longer lines are skipped and refused."""

MAX_DEPTH: Final = jsonrpc.MAX_DEPTH
"""Deepest nesting a message may have: the shared rule's (:data:`dsh_todo.carriers.jsonrpc.MAX_DEPTH`)."""


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


# -- one line in, a message or an answer out ---------------------------------------------------------------------


def error_answer(request_id: Any, code: int, message: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                             error=types.ErrorData(code=code, message=message)))


REQUEST_KEYS: Final = frozenset({"jsonrpc", "id", "method", "params"})
DIRECT_METHODS: Final = frozenset({"tools/call", "ping", "tools/list"})


class Request:
    """A request of the plain shape a :class:`Shortcut` may answer: ``jsonrpc``, a string or integer ``id``, one of
    :data:`DIRECT_METHODS`, ``params`` an object or absent, and no other key. Kept as parsed, not yet validated by
    the SDK's models: :meth:`message` is what the SDK gets when the shortcut declines."""

    __slots__ = ("id", "method", "params", "value")

    def __init__(self, value: dict[str, Any], request_id: Any, method: str, params: dict[str, Any] | None) -> None:
        self.value = value
        self.id = request_id
        self.method = method
        self.params = params

    @classmethod
    def of(cls, value: dict[str, Any]) -> Request | None:
        method, request_id, params = value.get("method"), value.get("id"), value.get("params")
        if (method not in DIRECT_METHODS or value.get("jsonrpc") != "2.0" or not jsonrpc.usable_id(request_id)
                or not value.keys() <= REQUEST_KEYS or not (params is None or isinstance(params, dict))
                or ("params" in value and params is None)):
            return None
        return cls(value, request_id, method, params)

    def message(self) -> SessionMessage | None:
        """The request as :func:`decode` hands it to the SDK (or the answer refusing it)."""
        return _message(self.value)


class Shortcut(Protocol):
    """Answers some :class:`Request` s without the SDK (:class:`dsh_todo.carriers.mcp.direct.Direct`)."""

    def serve(self, request: Request) -> Awaitable[bytes] | None:
        """The answer line to ``request``, to be awaited, or ``None`` to leave it to the SDK."""


def decode(line: bytes, *, cut: bool = False, direct: bool = False) -> SessionMessage | Request | None:
    """A line from the client (``cut``: it was longer than :data:`MAX_LINE` and this is its head): the message to
    serve, an answer to write back (a :class:`types.JSONRPCError`), or ``None`` for a line that needs neither (blank,
    an invalid notification or response). With ``direct``, a request of the plain shape comes back as a
    :class:`Request` (not yet validated by the SDK's models). The line rules are :func:`jsonrpc.check`'s."""
    value = jsonrpc.check(line, cut=cut, max_line=MAX_LINE)
    if value is None or isinstance(value, jsonrpc.Refusal):
        return None if value is None else error_answer(*value)
    if direct and (request := Request.of(value)) is not None:
        return request
    return _message(value)


def validated(value: dict[str, Any]) -> SessionMessage | jsonrpc.Refusal | None:
    """A JSON object as the SDK's message, or the :class:`~dsh_todo.carriers.jsonrpc.Refusal` it gets when the SDK's
    models fail it, or ``None`` when nobody waits for an answer (an invalid notification, a response-like object)."""
    try:
        message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        pass
    else:
        if not (isinstance(message, types.JSONRPCNotification) and "id" in value):
            return SessionMessage(message)
        # a request whose id is no id (a list, null, a number no float holds) reads as a notification: refuse it
    return jsonrpc.refusal(value)


def _message(value: dict[str, Any]) -> SessionMessage | None:
    """:func:`validated`, a refusal as the answer to write back."""
    judged = validated(value)
    return error_answer(*judged) if isinstance(judged, jsonrpc.Refusal) else judged


def encode(message: SessionMessage) -> bytes:
    """One answer line, lone surrogates escaped as ``JSON.stringify`` escapes them."""
    return dumps_bytes(message.message.model_dump(by_alias=True, exclude_unset=True, mode="json")) + b"\n"


# -- the transport -----------------------------------------------------------------------------------------------

CONNECTION_CLOSED: Final = "Connection closed"
"""The SDK's answer to a request still running when the connection ends (code ``-32000``)."""

DIRECT_LIMIT: Final = 16
"""Direct answers in progress at once (running or waiting to be written); beyond, requests go the SDK's way (whose
tasks a cancellation can still reach: reading never waits for a direct call)."""

CHUNK: Final = 1 << 16


@asynccontextmanager
async def stdio_transport(stdin: BinaryIO | None = None, stdout_fd: int | None = None, *,
                          direct: Shortcut | None = None) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]]:
    """``(read_stream, write_stream)`` for :meth:`mcp.server.lowlevel.Server.run` over stdin and stdout.

    While it serves, fd 1 points at stderr (a stray ``print`` cannot corrupt the wire) and answers go to a private
    duplicate of the original stdout. A stdin the event loop can wait on (a pipe or a socket, as MCP hosts give) is
    read on the loop, non-blocking while served; any other (a file, a tty) on a daemon thread, so an interrupted
    server never waits for a read that will not return. Either way a line is handed over before the next is read.
    ``direct`` answers what it can of the plain requests (see the module's docstring).
    """
    loop = asyncio.get_running_loop()
    source = stdin if stdin is not None else sys.stdin.buffer
    private_out = None
    if stdout_fd is None:
        sys.stdout.flush()
        private_out = os.dup(1)
        os.dup2(2, 1)
        stdout_fd = private_out
    out_fd = stdout_fd
    out_pipe = _is_pipe(out_fd)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    write_lock = asyncio.Lock()  # one answer line at a time, in the order they were ready
    broken = False
    waiting: dict[Any, list[Any]] = {}  # requests handed to the SDK and not yet answered: their ids, by correlation id
    in_flight: dict[Any, asyncio.Task[None]] = {}  # direct answers not yet computed, by correlation id
    silenced: set[asyncio.Task[None]] = set()  # direct calls their client cancelled: never answered
    slots = asyncio.Semaphore(DIRECT_LIMIT)

    async def emit(data: bytes) -> None:
        nonlocal broken
        async with write_lock:
            if broken:
                return  # the client stopped reading: drop answers, keep serving until stdin ends
            try:
                if not _write_now(out_fd, data, out_pipe):
                    await anyio.to_thread.run_sync(_write_fully, out_fd, data)
            except OSError:
                broken = True

    def settle(request_id: Any) -> None:
        key = coerce_request_id(request_id)
        ids = waiting.get(key)
        if not ids:
            return
        if request_id in ids:
            ids.remove(request_id)
        else:  # the same correlation id written otherwise ("7" for 7): the SDK answers them in turn
            ids.pop(0)
        if not ids:
            del waiting[key]

    def cancel(params: Mapping[str, Any] | None) -> None:
        """``notifications/cancelled``: the named request is answered by nobody (JSON-RPC's cancellation)."""
        request_id = cancelled_request_id_from_params(params)
        if request_id is None:
            return
        task = in_flight.pop(coerce_request_id(request_id), None)
        if task is not None:
            silenced.add(task)
            task.cancel()
        settle(request_id)  # the SDK answers no request its client cancelled

    async def answer_directly(request: Request, served: Awaitable[bytes]) -> None:
        task = asyncio.current_task()
        try:
            try:
                data = await served
            except asyncio.CancelledError:
                if task in silenced:
                    silenced.discard(task)
                    return
                data = encode(error_answer(request.id, types.CONNECTION_CLOSED, CONNECTION_CLOSED))
            except Exception:  # a bug on the direct path: still one answer, never a traceback on the wire
                log.exception("MCP direct answer to %r failed", request.method)
                data = encode(error_answer(request.id, types.INTERNAL_ERROR, "Internal error"))
            finally:
                key = coerce_request_id(request.id)
                if in_flight.get(key) is task:
                    del in_flight[key]
            await emit(data)
        finally:
            slots.release()

    async def deliver(item: SessionMessage | Request) -> None:
        if isinstance(item, Request):
            if direct is not None and not waiting and not slots.locked():
                await slots.acquire()  # (free: does not wait)
                try:
                    served = direct.serve(item)
                except Exception:  # a bug on the direct path: the SDK answers instead
                    log.exception("MCP direct path refused %r", item.method)
                    served = None
                if served is not None:
                    in_flight[coerce_request_id(item.id)] = loop.create_task(answer_directly(item, served))
                    return
                slots.release()
            message = item.message()
            if message is None:
                return
            item = message
        inner = item.message
        if isinstance(inner, types.JSONRPCError):  # refused here: the SDK never sees it
            await emit(encode(item))
            return
        if isinstance(inner, types.JSONRPCRequest):
            waiting.setdefault(coerce_request_id(inner.id), []).append(inner.id)
        elif isinstance(inner, types.JSONRPCNotification) and inner.method == "notifications/cancelled":
            cancel(inner.params)
        await read_send.send(item)

    async def finish() -> None:
        running = list(in_flight.values())
        for task in running:  # input ended: answered "Connection closed", as the SDK answers its own
            task.cancel()
        if running:
            await asyncio.wait(running)
        read_send.close()

    def read_all() -> None:
        try:
            while (item := jsonrpc.read_line(source, MAX_LINE)) is not None:
                line, cut = item
                message = decode(line, cut=cut, direct=direct is not None)
                if message is not None:  # parsed here, off the event loop; handed over one at a time
                    asyncio.run_coroutine_threadsafe(deliver(message), loop).result()
        except (OSError, ValueError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # stdin failed, or the server is gone: either way this is the end of input
        finally:
            with contextlib.suppress(RuntimeError):
                asyncio.run_coroutine_threadsafe(finish(), loop)

    async def pump(fd: int) -> None:
        """Read stdin on the loop and hand over its lines in order. The descriptor stays registered while the pump
        keeps up (registering it anew for every line cost more than the read), and is let go while two chunks wait
        (a slow hand-over, e.g. to the SDK during ``initialize``): at most two chunks and a line are held."""
        lines = jsonrpc.Lines(MAX_LINE)
        chunks: deque[bytes] = deque()
        wake: asyncio.Future[None] | None = None
        reading = False

        def on_readable() -> None:
            nonlocal reading
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""  # stdin failed: the end of input
            chunks.append(data)
            if not data or len(chunks) >= 2:
                loop.remove_reader(fd)
                reading = False
            if wake is not None and not wake.done():
                wake.set_result(None)

        try:
            while True:
                if not chunks:
                    if not reading:
                        loop.add_reader(fd, on_readable)
                        reading = True
                    wake = loop.create_future()
                    await wake
                    continue
                data = chunks.popleft()
                for line, cut in lines.feed(data) if data else lines.end():
                    message = decode(line, cut=cut, direct=direct is not None)
                    if message is not None:
                        await deliver(message)
                if not data:
                    break
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the server is gone: this is the end of input
        finally:
            if reading:
                loop.remove_reader(fd)
        await finish()

    async def write_all() -> None:
        async with write_recv:
            async for message in write_recv:
                if isinstance(message.message, (types.JSONRPCResponse, types.JSONRPCError)):
                    settle(message.message.id)
                await emit(encode(message))

    fd = _pollable_fd(source) if stdin is None else None
    blocking = os.get_blocking(fd) if fd is not None else True
    if fd is None:
        threading.Thread(target=read_all, name="dsh-todo-mcp-stdin", daemon=True).start()
    else:
        os.set_blocking(fd, False)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(write_all)
            if fd is not None:
                group.start_soon(pump, fd)
            yield read_recv, write_send
        # The SDK has stopped, and every answer it wrote has been through write_all. A request it took just before
        # input ended can still be unanswered: its handler was cancelled before it ever ran. It gets the answer the
        # SDK gives a request that input's end cut off.
        for ids in list(waiting.values()):
            for request_id in ids:
                await emit(encode(error_answer(request_id, types.CONNECTION_CLOSED, CONNECTION_CLOSED)))
        waiting.clear()
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, blocking)
        if private_out is not None:
            with contextlib.suppress(OSError):
                os.dup2(private_out, 1)
                os.close(private_out)


def _pollable_fd(source: BinaryIO) -> int | None:
    """``source``'s file descriptor when the event loop can wait on it (a pipe or a socket), ``None`` for anything
    else (a file, a tty, an object without a descriptor). Only for the process's own stdin, of which nothing has been
    read (a raw read would miss what a buffered reader already holds)."""
    try:
        fd = source.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


def _write_now(fd: int, data: bytes, pipe: bool) -> bool:
    """Write ``data`` on the event loop when that cannot block: a pipe that has room for it (a write of at most
    ``PIPE_BUF`` bytes to a pipe with room completes at once). Otherwise (a larger answer, a full pipe, a client
    that stopped reading, any other kind of stdout) the caller writes it on a worker thread. Handing every answer to
    a thread cost a thread switch each way per call, about as much as the rest of the server's work on it. ``pipe``:
    whether ``fd`` is a pipe (:func:`_is_pipe`, asked once per server)."""
    if len(data) > select.PIPE_BUF or not pipe:
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
