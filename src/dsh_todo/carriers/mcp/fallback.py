"""The stdio server's SDK half: every message the direct path declines, served by the MCP SDK's low-level server.

Started by the transport on the first such message (importing this module imports the SDK, about a second), on the
same :class:`~dsh_todo.carriers.mcp.calls.Connections` as the direct path. It is first told the handshake the direct
path answered (:meth:`dsh_todo.carriers.mcp.calls.Direct.replay`: the client's own ``initialize`` under a private
id, whose answer nobody gets, and ``notifications/initialized``), so the SDK's connection negotiates the same version
and opens its gate exactly as it would have. Each message is validated by the SDK's models here; one they fail gets
the refusal :func:`dsh_todo.carriers.jsonrpc.refusal` gives it, under its id, or no answer where nobody waits.

The requests handed to the SDK are counted until their answers pass the writer (by correlation id, as the SDK's
dispatcher matches them), so that the transport offers nothing to the direct path while one waits, so that at the end
of input the SDK is given time to answer them before it is stopped, and so that a request it took but never started
still gets ``-32000 Connection closed`` once it has stopped: every request is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from dsh_todo.carriers import jsonrpc
from dsh_todo.carriers.mcp.calls import REPLAYED_ID, Direct
from dsh_todo.carriers.mcp.server import build_server
from dsh_todo.carriers.mcp.wire import (
    CONNECTION_CLOSED,
    CONNECTION_CLOSED_CODE,
    DRAIN_SECONDS,
    Emit,
    correlation,
    error_line,
)
from dsh_todo.jsonutil import dumps_bytes


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


def encode(message: SessionMessage) -> bytes:
    """One answer line, lone surrogates escaped as ``JSON.stringify`` escapes them."""
    return dumps_bytes(message.message.model_dump(by_alias=True, exclude_unset=True, mode="json")) + b"\n"


class SdkHalf:
    """The SDK's server on one stdio connection, fed message by message (a :class:`~.wire.Fallback`)."""

    def __init__(self, direct: Direct, emit: Emit) -> None:
        self.direct = direct
        self.emit = emit
        self.read_send, self.read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write_send, self.write_recv = anyio.create_memory_object_stream[SessionMessage](0)
        self.waiting: dict[Any, list[Any]] = {}
        """Requests handed to the SDK and not yet answered: their ids as written, by correlation id."""
        self.stopped = anyio.Event()
        self._task: asyncio.Task[None] | None = None
        self._settled = anyio.Event()
        """Set (and replaced) whenever a waiting request is answered."""

    @classmethod
    async def start(cls, direct: Direct, emit: Emit) -> SdkHalf:
        """The SDK half, running in a task of its own, told the handshake the direct path answered."""
        half = cls(direct, emit)
        server = build_server(direct.connections, version=direct.server_version, structured=direct.structured)
        half._task = asyncio.get_running_loop().create_task(half._serve(server))
        for message in direct.replay():
            await half.deliver(message)
        return half

    async def _serve(self, server: Any) -> None:
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._write_all)
                async with self.write_send:
                    await server.run(self.read_recv, self.write_send, server.create_initialization_options())
        finally:
            self.stopped.set()

    def busy(self) -> bool:
        return bool(self.waiting)

    def _settle(self, request_id: Any) -> None:
        key = correlation(request_id)
        ids = self.waiting.get(key)
        if not ids:
            return
        if request_id in ids:
            ids.remove(request_id)
        else:  # the same correlation id written otherwise ("7" for 7): the SDK answers them in turn
            ids.pop(0)
        if not ids:
            del self.waiting[key]
        self._settled.set()
        self._settled = anyio.Event()

    async def deliver(self, value: dict[str, Any]) -> None:
        judged = validated(value)
        if judged is None:
            return
        if isinstance(judged, jsonrpc.Refusal):
            await self.emit(error_line(*judged))
            return
        inner = judged.message
        if isinstance(inner, types.JSONRPCRequest):
            self.waiting.setdefault(correlation(inner.id), []).append(inner.id)
        elif isinstance(inner, types.JSONRPCNotification) and inner.method == "notifications/cancelled":
            request_id = (inner.params or {}).get("requestId")
            if jsonrpc.usable_id(request_id):
                self._settle(request_id)  # the SDK answers no request its client cancelled
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):  # the SDK has stopped:
            await self.read_send.send(judged)  # close() answers what it was handed

    async def _write_all(self) -> None:
        async with self.write_recv:
            async for message in self.write_recv:
                inner = message.message
                if isinstance(inner, (types.JSONRPCResponse, types.JSONRPCError)):
                    self._settle(inner.id)
                    if inner.id == REPLAYED_ID:
                        continue  # the replayed handshake: the client had its answer from the direct path
                await self.emit(encode(message))

    async def close(self) -> None:
        """Input ended: what the SDK is serving gets :data:`~.wire.DRAIN_SECONDS` to be answered; then the SDK stops
        (cancelling its handlers, which answer ``Connection closed``), and a request it took but never started gets
        the same answer here."""
        with anyio.move_on_after(DRAIN_SECONDS):
            while self.waiting:
                await self._settled.wait()
        self.read_send.close()
        await self.stopped.wait()
        for ids in list(self.waiting.values()):
            for request_id in ids:
                if request_id != REPLAYED_ID:
                    await self.emit(error_line(request_id, CONNECTION_CLOSED_CODE, CONNECTION_CLOSED))
        self.waiting.clear()
