"""Asyncio streams over the process's stdin and stdout, whatever they are: pipes, sockets, ttys, files, ``/dev/null``.

The ACP SDK's own ``stdio_streams`` hands both descriptors to asyncio's pipe transports, which only take what epoll
can watch: with stdout redirected to a file it fails ("Pipe transport is only for pipes, sockets and character
devices"), and with stdin from ``/dev/null`` the registration fails later, inside the loop, so the agent printed a
traceback and then waited forever for input that could never come. Here each descriptor gets the pipe transport when
epoll accepts it (flow control, no thread) and a plain blocking fallback when it does not: a reader thread for
stdin (regular files and ``/dev/null`` never block for long, and end), direct writes for stdout. Either way the end
of stdin reaches the connection as EOF, so the agent exits when its input ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import sys
import threading
from typing import Any, BinaryIO

READ_CHUNK = 64 * 1024


def pollable(fd: int, events: int) -> bool:
    """Whether the event loop can watch ``fd`` (epoll refuses regular files and ``/dev/null``)."""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, events)
    except (OSError, ValueError):
        return False
    return True


class _DrainProtocol(asyncio.BaseProtocol):
    """What :class:`asyncio.StreamWriter` needs of a protocol: ``drain()`` waits while the transport is paused."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._paused = False
        self._waiters: list[asyncio.Future[None]] = []
        self._lost: BaseException | None = None
        self._closed = self._loop.create_future()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake(None)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._lost = exc or ConnectionResetError("stdout closed")
        self._wake(self._lost)
        if not self._closed.done():
            self._closed.set_result(None)

    def _wake(self, exc: BaseException | None) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(exc)
        self._waiters.clear()

    async def _drain_helper(self) -> None:
        if self._lost is not None:
            raise self._lost
        if not self._paused:
            return
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        await waiter

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:
        return self._closed


class _BlockingWriteTransport(asyncio.WriteTransport):
    """Writes straight to a descriptor epoll cannot watch (a regular file, ``/dev/null``): such writes do not block
    for long, and there is nothing to wait for."""

    def __init__(self, fd: int, protocol: _DrainProtocol) -> None:
        super().__init__()
        self._fd = fd
        self._protocol = protocol
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        view = memoryview(bytes(data))
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            self._closing = True
            self._protocol.connection_lost(exc)

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._protocol.connection_lost(None)

    def abort(self) -> None:
        self.close()

    def get_write_buffer_size(self) -> int:
        return 0


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, source: BinaryIO) -> None:
    """Read ``source`` on a daemon thread into ``reader``, then signal EOF (also when the read fails)."""

    def run() -> None:
        try:
            while chunk := source.read1(READ_CHUNK) if hasattr(source, "read1") else source.read(READ_CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is already gone: nobody is waiting
                loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=run, name="dsh-todo-acp-stdin", daemon=True).start()


async def stdio_streams(limit: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``(reader of stdin, writer to stdout)`` for any kind of stdin and stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    if pollable(sys.stdin.fileno(), selectors.EVENT_READ):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), sys.stdin)
    else:
        _feed_from_thread(loop, reader, sys.stdin.buffer)
    protocol = _DrainProtocol()
    transport: asyncio.WriteTransport
    if pollable(sys.stdout.fileno(), selectors.EVENT_WRITE):
        transport = (await loop.connect_write_pipe(lambda: protocol, sys.stdout))[0]
    else:
        sys.stdout.flush()
        transport = _BlockingWriteTransport(sys.stdout.fileno(), protocol)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)
