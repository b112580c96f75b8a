"""The ACP agent's JSON-RPC messages over stdin and stdout, one per line, read by our line rules.

The SDK's own newline reader hands on whatever JSON a line holds and logs a Python traceback for a line that is not
JSON, answering nothing; a JSON array (a JSON-RPC batch) or a string then ended the agent, and ``{}`` went
unanswered. :class:`LineTransport` is the SDK's message-level transport (``receive``, ``send``, ``close``) reading
the lines itself, by the rules of :mod:`dsh_todo.carriers.jsonrpc`: a line they refuse is answered here, JSON-RPC's
way (``-32700`` for text that is not JSON, ``-32600`` for JSON that is not a message, nesting too deep or a line too
long), and only a message of JSON-RPC's shape reaches the SDK. Lines may be as long as the SDK allowed them
(:data:`MAX_LINE`: a prompt can embed whole files); numbers are read as the SDK read them (``json.loads``). Answers
are written as the SDK writes its own (compact ``json.dumps``), one line at a time.

The end of input is not the end of the conversation: a client that writes its requests to a file, or into a pipe it
closes at once, still reads the answers. So :meth:`LineTransport.receive` reports the end (``None``, on which the SDK
disconnects and cancels every request still running) only once every request it handed on has been answered, or
stdout is lost (nobody hears an answer any more), or :data:`DRAIN_SECONDS` have passed; a request still unanswered
then is answered here, with an error, and its own answer, should it still come, is dropped: every request gets
exactly one. The MCP server follows the same rule (:mod:`dsh_todo.carriers.mcp.wire`); a stop signal still ends
everything at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter, deque
from typing import Any, Final, Protocol

from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

from dsh_todo.carriers import jsonrpc

MAX_LINE: Final = DEFAULT_STDIO_BUFFER_LIMIT_BYTES
"""Longest line read, in bytes: the SDK's own limit for a line over stdio."""

CHUNK: Final = 1 << 16

DRAIN_SECONDS: Final = 60.0
"""How long the requests read before the end of input may take to be answered. A scripted prompt takes
milliseconds, a model's turn seconds to a minute; only a turn that hangs is cut off (its turn ends ``aborted``)."""

INTERNAL_ERROR: Final = -32603


class Writer(Protocol):
    """What :class:`LineTransport` needs of its output (:class:`~dsh_todo.carriers.acp.stdio.Stdout` over stdio)."""

    lost: bool
    """The reader went away: what is written is dropped."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    async def closed(self) -> None:
        """Return once the writer is lost."""


class LineTransport:
    """JSON-RPC messages over a reader and a writer of lines (see the module's docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer, *,
                 max_line: int = MAX_LINE, drain_seconds: float = DRAIN_SECONDS) -> None:
        self._reader = reader
        self._writer = writer
        self._max_line = max_line
        self._drain_seconds = drain_seconds
        self._lines = jsonrpc.Lines(max_line)
        self._ready: deque[tuple[bytes, bool]] = deque()
        self._ended = False
        self._open: Counter[Any] = Counter()
        """Requests handed on and not yet answered, by id (a client may reuse an id)."""
        self._answered = asyncio.Event()
        self._answered.set()
        self._cut: Counter[Any] = Counter()
        """Requests answered here at the end of the drain, whose own answers are dropped."""

    async def receive(self) -> dict[str, Any] | None:
        """The next message for the SDK, answering the lines refused before it; ``None`` at the end of input."""
        while True:
            while self._ready:
                line, cut = self._ready.popleft()
                checked = jsonrpc.check(line, cut=cut, max_line=self._max_line, parse=json.loads)
                if isinstance(checked, dict):
                    checked = jsonrpc.plain_message(checked)
                if isinstance(checked, dict):
                    if "method" in checked and "id" in checked:  # a request: it is owed an answer
                        self._open[checked["id"]] += 1
                        self._answered.clear()
                    return checked
                if checked is not None:
                    await self._write({"jsonrpc": "2.0", "id": checked.id,
                                       "error": {"code": checked.code, "message": checked.message}})
            if self._ended:
                await self._settle()
                return None
            data = await self._reader.read(CHUNK)
            if data:
                self._ready.extend(self._lines.feed(data))
            else:
                self._ended = True
                self._ready.extend(self._lines.end())

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message and "id" in message:  # an answer
            key = message["id"]
            if self._cut[key]:
                self._cut[key] -= 1
                return  # answered already, when the input ended
            if self._open[key]:
                self._open[key] -= 1
                if not self._open[key]:
                    del self._open[key]
                if not self._open:
                    self._answered.set()
        await self._write(message)

    async def _settle(self) -> None:
        """The input is over: wait for the answers still owed (see the module's docstring), then owe none."""
        if not self._open or self._writer.lost:
            return
        waits = [asyncio.ensure_future(self._answered.wait()), asyncio.ensure_future(self._writer.closed())]
        try:
            await asyncio.wait(waits, timeout=self._drain_seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        late, self._open = self._open, Counter()
        self._cut += late
        details = f"the input ended and the answer was not ready within {self._drain_seconds:g} s"
        for key in late.elements():
            await self._write({"jsonrpc": "2.0", "id": key, "error": {
                "code": INTERNAL_ERROR, "message": "Internal error", "data": {"details": details}}})

    async def _write(self, message: dict[str, Any]) -> None:
        self._writer.write((json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8"))
        await self._writer.drain()

    async def close(self) -> None:
        """Let what is written reach the client; stdout itself stays open (the process owns it)."""
        with contextlib.suppress(Exception):
            await self._writer.drain()
