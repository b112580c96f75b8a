"""MCP over stdio, one JSON-RPC message per line, where every request gets exactly one answer. No SDK import.

Lines are read with the rules of :mod:`dsh_todo.carriers.jsonrpc` (lines of at most :data:`MAX_LINE` bytes, nesting
of at most :data:`MAX_DEPTH`, numbers kept as the client wrote them), and whatever they refuse is answered here:
text that is not JSON gets ``-32700 Parse error`` with ``id: null``, an over-long or too-deep line ``-32600``. The
SDK's own stdio reader drops such lines without a word, so the client would wait forever. A number no float can
hold becomes a :class:`~dsh_todo.carriers.jsonrpc.RawNumber`, which the registry's lossless check refuses with
``Error: tool execution arguments must be losslessly JSON-serializable`` (the reference's answer) and which
:func:`~dsh_todo.carriers.jsonrpc.raw_json` writes back verbatim into ``tool/call``.

A request of the plain shape (:class:`Request`) is offered first to the :class:`Shortcut` (the server's
:class:`~dsh_todo.carriers.mcp.calls.Direct`, which answers the handshake and the hot methods); whatever it declines,
and every other message, goes to the :class:`Fallback` (the SDK half, :mod:`.fallback`), started on the first such
message, since importing the SDK takes about a second. So that a direct answer never overtakes the SDK's, a request is
offered to the shortcut only while no request handed to the SDK waits for its answer. A ``notifications/cancelled``
naming a direct call in flight cancels it (its step ends ``Error: tool call aborted`` in the log, and the request gets
no answer, as the SDK does). Reading never waits for a direct call (a tool that awaits would otherwise keep its
cancellation unread): beyond :data:`DIRECT_LIMIT` direct answers in progress, requests go the SDK's way.

Input ends when stdin does or when :func:`serve_lines` is told to stop (a signal). Then direct answers in progress
get :data:`DRAIN_SECONDS` to finish and be written: a call whose write has happened is answered with its result,
whatever happens to the connection afterwards. What is still running after that is cancelled and answered
``-32000 Connection closed``, as the SDK answers the requests it cuts off; then the SDK half stops and answers what it
still holds the same way.

Answers are written with :func:`dsh_todo.jsonutil.dumps_bytes`, which escapes lone surrogates the way
``JSON.stringify`` does, so a string the client sent comes back intact. A client that stops reading (``EPIPE``) costs
the server nothing: answers are dropped and the server runs until input ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import stat
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, BinaryIO, Final, Protocol

from dsh_todo.carriers import jsonrpc
from dsh_todo.jsonutil import dumps_bytes

log = logging.getLogger("dsh_todo.mcp")

MAX_LINE: Final = 4 * 1024 * 1024
"""Longest line read, in bytes (the SDK's default HTTP body limit): longer lines are skipped and refused."""

MAX_DEPTH: Final = jsonrpc.MAX_DEPTH
"""Deepest nesting a message may have: the shared rule's (:data:`dsh_todo.carriers.jsonrpc.MAX_DEPTH`)."""

CONNECTION_CLOSED_CODE: Final = -32000
CONNECTION_CLOSED: Final = "Connection closed"
"""The SDK's answer to a request still running when the connection ends."""

INTERNAL_ERROR: Final = -32603

DIRECT_LIMIT: Final = 16
"""Direct answers in progress at once (running or waiting to be written); beyond, requests go the SDK's way (whose
tasks a cancellation can still reach: reading never waits for a direct call)."""

DRAIN_SECONDS: Final = 2.0
"""How long direct answers in progress at the end of input may take before they are cancelled. A ``todo_write``
call takes milliseconds; only a tool that hangs waits this long."""

CHUNK: Final = 1 << 16


def error_line(request_id: Any, code: int, message: str) -> bytes:
    """A JSON-RPC error answer line, keys in the SDK's order."""
    return dumps_bytes({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}) + b"\n"


def correlation(request_id: Any) -> Any:
    """The id requests are matched by: ``"7"`` and ``7`` are one (as in the SDK's dispatcher and the TS SDK)."""
    if isinstance(request_id, str):
        with contextlib.suppress(ValueError):
            return int(request_id)
    return request_id


REQUEST_KEYS: Final = frozenset({"jsonrpc", "id", "method", "params"})
DIRECT_METHODS: Final = frozenset({"initialize", "tools/call", "ping", "tools/list"})


class Request:
    """A request of the plain shape a :class:`Shortcut` may answer: ``jsonrpc``, a string or integer ``id``, one of
    :data:`DIRECT_METHODS`, ``params`` an object or absent, and no other key. :attr:`value` is the message as parsed,
    what the SDK half gets when the shortcut declines."""

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


class Shortcut(Protocol):
    """Answers some :class:`Request` s without the SDK (:class:`dsh_todo.carriers.mcp.calls.Direct`)."""

    def serve(self, request: Request) -> Awaitable[bytes] | None:
        """The answer line to ``request``, to be awaited, or ``None`` to leave it to the SDK."""

    def notify(self, method: str) -> None:
        """A notification arrived (the SDK half, once it runs, gets it too)."""


Emit = Callable[[bytes], Awaitable[None]]


class Fallback(Protocol):
    """The SDK half of the server (:class:`dsh_todo.carriers.mcp.fallback.SdkHalf`)."""

    def busy(self) -> bool:
        """Whether a request handed to it still waits for its answer."""

    async def deliver(self, value: dict[str, Any]) -> None:
        """One message: validated there (a refusal is answered through ``emit``), then served by the SDK."""

    async def close(self) -> None:
        """Input ended: stop the SDK, answer every request it still holds, return once all is written."""


StartFallback = Callable[[Emit], Awaitable[Fallback]]
"""Starts the SDK half (in a task of its own), answering through ``emit``."""


def decode(line: bytes, *, cut: bool = False) -> dict[str, Any] | bytes | None:
    """A line from the client (``cut``: it was longer than :data:`MAX_LINE` and this is its head): the JSON object to
    serve, the answer line refusing it, or ``None`` for a blank line (:func:`jsonrpc.check`'s rules)."""
    value = jsonrpc.check(line, cut=cut, max_line=MAX_LINE)
    if isinstance(value, jsonrpc.Refusal):
        return error_line(*value)
    return value


async def serve_lines(shortcut: Shortcut, start_fallback: StartFallback, *, stdin: BinaryIO | None = None,
                      stdout_fd: int | None = None, stop: asyncio.Event | None = None) -> None:
    """Serve the client on stdin/stdout until input ends or ``stop`` is set, then answer what is left and return.

    While it serves, fd 1 points at stderr (a stray ``print`` cannot corrupt the wire) and answers go to a private
    duplicate of the original stdout. A stdin the event loop can wait on (a pipe, a socket, a terminal) is read on the
    loop; any other (a file) on a daemon thread with plain ``os.read`` (never the buffered ``sys.stdin``, whose lock a
    thread still inside it at interpreter shutdown turns into ``Fatal Python error: _enter_buffered_busy``), so an
    interrupted server never waits for a read. Either way a line is handed over before the next is read. Plain
    asyncio, no anyio: this is the path to the first answer, and anyio's import alone is tens of milliseconds.
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
    write_lock = asyncio.Lock()  # one answer line at a time, in the order they were ready
    broken = False
    ended = False
    in_flight: dict[Any, asyncio.Task[None]] = {}  # direct answers not yet computed, by correlation id
    unwritten: set[asyncio.Task[None]] = set()  # direct answers not yet written, computed or not
    silenced: set[asyncio.Task[None]] = set()  # direct calls their client cancelled: never answered
    slots = asyncio.Semaphore(DIRECT_LIMIT)
    fallback: Fallback | None = None
    input_over = asyncio.Event()

    async def emit(data: bytes) -> None:
        nonlocal broken
        async with write_lock:
            if broken:
                return  # the client stopped reading: drop answers, keep serving until input ends
            try:
                if not _write_now(out_fd, data, out_pipe):
                    await loop.run_in_executor(None, _write_fully, out_fd, data)
            except OSError:
                broken = True

    def cancel(params: Any) -> None:
        """``notifications/cancelled`` naming a direct call: it is answered by nobody (JSON-RPC's cancellation)."""
        request_id = params.get("requestId") if isinstance(params, Mapping) else None
        if not jsonrpc.usable_id(request_id):
            return
        task = in_flight.pop(correlation(request_id), None)
        if task is not None:
            silenced.add(task)
            task.cancel()

    async def answer_directly(request: Request, served: Awaitable[bytes]) -> None:
        task = asyncio.current_task()
        try:
            try:
                data = await served
            except asyncio.CancelledError:
                if task in silenced:
                    silenced.discard(task)
                    return
                data = error_line(request.id, CONNECTION_CLOSED_CODE, CONNECTION_CLOSED)
            except Exception:  # a bug on the direct path: still one answer, never a traceback on the wire
                log.exception("MCP direct answer to %r failed", request.method)
                data = error_line(request.id, INTERNAL_ERROR, "Internal error")
            finally:
                key = correlation(request.id)
                if in_flight.get(key) is task:
                    del in_flight[key]
            await emit(data)
        finally:
            slots.release()

    async def sdk(value: dict[str, Any]) -> None:
        nonlocal fallback
        if fallback is None:
            fallback = await start_fallback(emit)
        await fallback.deliver(value)

    async def deliver(item: dict[str, Any] | bytes) -> None:
        if ended:
            return
        if isinstance(item, bytes):  # refused by the line rules
            await emit(item)
            return
        request = Request.of(item)
        if request is not None and not (fallback is not None and fallback.busy()) and not slots.locked():
            await slots.acquire()  # (free: does not wait)
            try:
                served = shortcut.serve(request)
            except Exception:  # a bug on the direct path: the SDK answers instead
                log.exception("MCP direct path refused %r", request.method)
                served = None
            if served is not None:
                task = in_flight[correlation(request.id)] = loop.create_task(answer_directly(request, served))
                unwritten.add(task)
                task.add_done_callback(unwritten.discard)
                return
            slots.release()
        method = item.get("method")
        if "id" not in item and isinstance(method, str):  # a notification: ours to note, the SDK's once it runs
            shortcut.notify(method)
            if method == "notifications/cancelled":
                cancel(item.get("params"))
            if fallback is None:
                return  # nothing of the SDK's is running that it could concern
        await sdk(item)

    async def feed(lines: list[tuple[bytes, bool]]) -> None:
        for line, cut in lines:
            message = decode(line, cut=cut)
            if message is not None:
                await deliver(message)

    def read_thread(fd: int | None) -> None:
        lines = jsonrpc.Lines(MAX_LINE)
        try:
            while not ended:
                data = os.read(fd, CHUNK) if fd is not None else source.read(CHUNK)
                batch = lines.feed(data) if data else lines.end()
                asyncio.run_coroutine_threadsafe(feed(batch), loop).result()
                if not data:
                    break
        except (OSError, ValueError, RuntimeError):
            pass  # stdin failed, or the server is gone: either way this is the end of input
        finally:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(input_over.set)

    async def pump(fd: int) -> None:
        """Read stdin on the loop and hand over its lines in order. The descriptor stays registered while the pump
        keeps up (registering it anew for every line cost more than the read), and is let go while two chunks wait
        (a slow hand-over, e.g. to the SDK while it starts): at most two chunks and a line are held."""
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
                await feed(lines.feed(data) if data else lines.end())
                if not data:
                    break
        except OSError:
            pass  # the server is gone: this is the end of input
        finally:
            if reading:
                loop.remove_reader(fd)
            input_over.set()

    async def until_stopped() -> None:
        if stop is not None:
            await stop.wait()
            input_over.set()

    async def drain() -> None:
        """Input is over: the direct answers in progress finish and are written (one still computing past
        :data:`DRAIN_SECONDS` is cancelled and answered ``Connection closed``; a line the client does not take within
        as long again is given up); then the SDK half stops and answers what it holds. A computed answer waits for
        its write (on a worker thread for a regular file or a full pipe), so it is awaited until written, not only
        until computed."""
        if unwritten:
            _, late = await asyncio.wait(list(unwritten), timeout=DRAIN_SECONDS)
            computing = [task for task in late if task in in_flight.values()]
            for task in computing:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=DRAIN_SECONDS)
        if fallback is not None:
            await fallback.close()

    fd, pollable = _descriptor(source)
    blocking = os.get_blocking(fd) if fd is not None and pollable else True
    try:
        watcher = loop.create_task(until_stopped())
        if fd is not None and pollable:
            if not os.isatty(fd):
                os.set_blocking(fd, False)
            reader = loop.create_task(pump(fd))
        else:
            reader = None
            threading.Thread(target=read_thread, args=(fd,), name="dsh-todo-mcp-stdin", daemon=True).start()
        try:
            await input_over.wait()
        finally:
            ended = True
            watcher.cancel()
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
        await drain()
    finally:
        if fd is not None and pollable:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, blocking)
        if private_out is not None:
            with contextlib.suppress(OSError):
                os.dup2(private_out, 1)
                os.close(private_out)


def _descriptor(source: BinaryIO) -> tuple[int | None, bool]:
    """``source``'s file descriptor (``None`` for an object without one) and whether the event loop can wait on it:
    a pipe, a socket or a terminal; not a regular file. Nothing must have been read through ``source`` yet (a raw
    read would miss what a buffered reader already holds)."""
    try:
        fd = source.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return None, False
    return fd, stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


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
