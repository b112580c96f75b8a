"""The ACP agent's JSON-RPC messages over stdin and stdout, one per line, read by our line rules.

The SDK's own newline reader hands on whatever JSON a line holds and logs a Python traceback for a line that is not
JSON, answering nothing; a JSON array (a JSON-RPC batch) or a string then ended the agent, and ``{}`` went
unanswered. :class:`LineTransport` is the SDK's message-level transport (``receive``, ``send``, ``close``) reading
the lines itself, by the rules of :mod:`dsh_todo.carriers.jsonrpc`: a line they refuse is answered here, JSON-RPC's
way (``-32700`` for text that is not JSON, ``-32600`` for JSON that is not a message, nesting too deep or a line too
long), and only a message of JSON-RPC's shape reaches the SDK. Lines may be as long as the SDK allowed them
(:data:`MAX_LINE`: a prompt can embed whole files); numbers are read as the SDK read them (``json.loads``). Answers
are written as the SDK writes its own (compact ``json.dumps``), one line at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from typing import Any, Final, Protocol

from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

from dsh_todo.carriers import jsonrpc

MAX_LINE: Final = DEFAULT_STDIO_BUFFER_LIMIT_BYTES
"""Longest line read, in bytes: the SDK's own limit for a line over stdio."""

CHUNK: Final = 1 << 16


class Writer(Protocol):
    """What :class:`LineTransport` needs of its output (:class:`~dsh_todo.carriers.acp.stdio.Stdout` over stdio)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class LineTransport:
    """JSON-RPC messages over a reader and a writer of lines (see the module's docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer, *,
                 max_line: int = MAX_LINE) -> None:
        self._reader = reader
        self._writer = writer
        self._max_line = max_line
        self._lines = jsonrpc.Lines(max_line)
        self._ready: deque[tuple[bytes, bool]] = deque()
        self._ended = False

    async def receive(self) -> dict[str, Any] | None:
        """The next message for the SDK, answering the lines refused before it; ``None`` at the end of input."""
        while True:
            while self._ready:
                line, cut = self._ready.popleft()
                checked = jsonrpc.check(line, cut=cut, max_line=self._max_line, parse=json.loads)
                if isinstance(checked, dict):
                    checked = jsonrpc.plain_message(checked)
                if isinstance(checked, dict):
                    return checked
                if checked is not None:
                    await self.send({"jsonrpc": "2.0", "id": checked.id,
                                     "error": {"code": checked.code, "message": checked.message}})
            if self._ended:
                return None
            data = await self._reader.read(CHUNK)
            if data:
                self._ready.extend(self._lines.feed(data))
            else:
                self._ended = True
                self._ready.extend(self._lines.end())

    async def send(self, message: dict[str, Any]) -> None:
        self._writer.write((json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8"))
        await self._writer.drain()

    async def close(self) -> None:
        """Let what is written reach the client; stdout itself stays open (the process owns it)."""
        with contextlib.suppress(Exception):
            await self._writer.drain()
