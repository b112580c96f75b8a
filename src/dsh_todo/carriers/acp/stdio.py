"""The ACP agent's stdin and stdout, whatever they are: pipes, sockets, ttys, files, ``/dev/null``; public asyncio only.

The ACP SDK's own ``stdio_streams`` hands both descriptors to asyncio's pipe transports, which only take what epoll
can watch: with stdout redirected to a file it fails ("Pipe transport is only for pipes, sockets and character
devices"), and with stdin from ``/dev/null`` the registration fails later, inside the loop, so the agent printed a
traceback and then waited forever for input that could never come. Here each descriptor gets the pipe transport when
epoll accepts it (flow control, no thread) and a plain blocking fallback when it does not: a reader thread for
stdin (regular files and ``/dev/null`` never block for long, and end), direct writes for stdout. Either way the end
of stdin reaches the connection as EOF, so the agent exits when its input ends.

Stdout is :class:`Stdout`, an object of ours with what :class:`~dsh_todo.carriers.acp.lines.LineTransport` calls
(``write``, ``drain``, and ``lost``/``closed`` while it drains at the end of input), not an ``asyncio.StreamWriter``:
a ``StreamWriter`` over a transport of our own needs a protocol with asyncio's private ``_drain_helper`` and
``_get_close_waiter``, which any Python release may change (decision 0028). :class:`Stdout` is the write pipe's
protocol itself, told of a full pipe by the public ``pause_writing``/``resume_writing`` callbacks; its buffer limit
is zero, so ``drain`` returns once everything written is in the operating system's hands, and an answer written
just before the end of input is not left in a buffer the process drops at exit.

A client that closes our stdout cannot hear the agent any more: it has left, as one that closes stdin has. So the
loss of stdout (``EPIPE``, the reader hanging up) ends the input too, and the connection ends at once, with no
wait for answers nobody can read (a prompt in progress ends ``aborted``, flushed); the process exits 0 without a
traceback; nothing is written after the loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

READ_CHUNK = 64 * 1024


def pollable(fd: int, events: int) -> bool:
    """Whether the event loop can watch ``fd`` (epoll refuses regular files and ``/dev/null``)."""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, events)
    except (OSError, ValueError):
        return False
    return True


class Stdout(asyncio.Protocol):
    """Stdout for :class:`~dsh_todo.carriers.acp.lines.LineTransport` (see the module's docstring): the protocol of
    a write pipe transport, or, without one, direct blocking writes to ``fd``. ``on_lost`` is called once, on the
    loop, when stdout goes away."""

    def __init__(self, fd: int, on_lost: Callable[[], object]) -> None:
        self._fd = fd
        self._on_lost = on_lost
        self._transport: asyncio.WriteTransport | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._gone = asyncio.Event()
        self.lost = False
        """Stdout went away: what is written from now on is dropped."""

    # -- what LineTransport calls ---------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.lost:
            return
        if self._transport is not None:
            if not self._transport.is_closing():
                self._transport.write(data)
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            self._lose()

    async def drain(self) -> None:
        """Wait until everything written is in the operating system's hands, or stdout is gone (never raises)."""
        await self._writable.wait()

    async def closed(self) -> None:
        """Return once stdout is lost."""
        await self._gone.wait()

    # -- the pipe transport's protocol (public asyncio callbacks) -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self._transport = transport
        transport.set_write_buffer_limits(high=0)  # paused while anything waits in our buffer: drain = written

    def pause_writing(self) -> None:
        if not self.lost:
            self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lose()

    def _lose(self) -> None:
        if not self.lost:
            self.lost = True
            self._writable.set()
            self._gone.set()
            self._on_lost()


class _StdinThread:
    """Stdin that epoll cannot watch (a regular file, ``/dev/null``), read on a daemon thread into ``reader``,
    then EOF (also when the read fails). :meth:`end` gives the reader its EOF now and drops what comes after."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, source: BinaryIO) -> None:
        self._loop = loop
        self._reader = reader
        self._source = source
        self._ended = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="dsh-todo-acp-stdin", daemon=True).start()

    def end(self) -> None:
        """On the loop: EOF for the reader, once."""
        if not self._ended.is_set():
            self._ended.set()
            self._reader.feed_eof()

    def _deliver(self, chunk: bytes) -> None:
        if not self._ended.is_set():
            self._reader.feed_data(chunk)

    def _run(self) -> None:
        read = getattr(self._source, "read1", self._source.read)
        try:
            while not self._ended.is_set() and (chunk := read(READ_CHUNK)):
                self._loop.call_soon_threadsafe(self._deliver, chunk)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is already gone: nobody is waiting
                self._loop.call_soon_threadsafe(self.end)


async def stdio_streams(limit: int, stdin: BinaryIO | None = None,
                        stdout: BinaryIO | None = None) -> tuple[asyncio.StreamReader, Stdout]:
    """``(reader of stdin, writer to stdout)`` for any kind of stdin and stdout (the process's own by default); the
    loss of stdout ends the reader's input."""
    loop = asyncio.get_running_loop()
    stdin = sys.stdin.buffer if stdin is None else stdin
    stdout = sys.stdout.buffer if stdout is None else stdout
    reader = asyncio.StreamReader(limit=limit)
    end_input: Callable[[], object]
    if pollable(stdin.fileno(), selectors.EVENT_READ):
        pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        end_input = pipe.close  # the protocol then feeds the reader its EOF
    else:
        thread = _StdinThread(loop, reader, stdin)
        thread.start()
        end_input = thread.end
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # whatever Python wrote there before goes first
    writer = Stdout(stdout.fileno(), end_input)
    if pollable(stdout.fileno(), selectors.EVENT_WRITE):
        await loop.connect_write_pipe(lambda: writer, stdout)
    return reader, writer
