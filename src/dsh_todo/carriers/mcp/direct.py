"""The stdio server's direct answers: ``tools/call``, ``ping`` and ``tools/list`` without the SDK's dispatch.

Over stdio the Python MCP SDK spent about 1.1 ms of CPU per ``tools/call`` around a carrier call of about 0.1 ms:
pydantic models for the request and the result (validated, dumped, validated again against the protocol version's
result surface, dumped again), memory streams between three tasks, a task per request, a middleware chain. With a
quiet disk that was three fsyncs' worth, so a durable MCP call cost 4× a durable call. This module answers the hot
methods itself, from the same state the SDK's handler uses:

- only once the SDK has accepted the handshake (its own gate, ``Connection.initialize_accepted``, on a handshake-era
  protocol version): ``initialize``, notifications and everything before them stay the SDK's, so protocol
  negotiation, the era decision and the init gate are never ours;
- only for messages of the plain shape: ``tools/call`` whose params hold ``name`` (a tool the registry has) and
  optionally ``arguments``, nothing else (no ``_meta``: no progress token, no 2026 envelope); ``ping`` and
  ``tools/list`` without params (or ``{}``: no cursor). Anything else (an unknown tool, invalid params, another
  method) goes to the SDK and gets its answer;
- the call runs on the connection's own :class:`~dsh_todo.carriers.mcp.calls.CallSession` (the lifespan's
  :class:`~dsh_todo.carriers.mcp.server.Connections`: one agent session per connection, the same ``_meta`` session
  id, the same release when the connection ends), and its answer is :func:`~dsh_todo.carriers.mcp.calls.call_result`
  written with the canonical encoder, byte-identical to what the SDK writes for the same request (a differential
  test runs the same requests through both). ``tools/list`` is the SDK's own dump of the listing, made once per
  protocol version with the SDK's result surface.

Cancellation, ordering and the end of input are the transport's (:func:`dsh_todo.carriers.mcp.wire.stdio_transport`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final

from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from dsh_todo.carriers.mcp.calls import ABSENT, call_result
from dsh_todo.carriers.mcp.server import Connections, sdk_connection, tool_listing
from dsh_todo.harness import Context
from dsh_todo.jsonutil import dumps_bytes

if TYPE_CHECKING:
    from dsh_todo.carriers.mcp.wire import Request

CALL_PARAMS: Final = frozenset({"name", "arguments"})
"""The only params keys a ``tools/call`` answered directly may have."""


class Direct:
    """Answers the hot requests of one stdio connection once the SDK has accepted its ``initialize``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.connections: Connections | None = None
        """The server's lifespan state while it lives (set by :func:`~dsh_todo.carriers.mcp.server.build_server`)."""
        self.connection: Connection | None = None
        """The SDK connection that served the first request (:meth:`watch`): the handshake's, over stdio."""
        self._listings: dict[str, bytes] = {}

    async def watch(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: remember the SDK connection the first request arrived on (``initialize``, normally),
        whose state says when the handshake is done."""
        if self.connection is None:
            self.connection = sdk_connection(ctx)
        return await call_next(ctx)

    def _version(self) -> str | None:
        """The negotiated handshake-era protocol version once the SDK accepted the handshake, else ``None``."""
        connection = self.connection
        if connection is None or self.connections is None or not connection.initialize_accepted:
            return None
        version = connection.protocol_version
        return version if version in HANDSHAKE_PROTOCOL_VERSIONS else None

    def serve(self, request: Request) -> Awaitable[bytes] | None:
        """The answer line to ``request``, to be awaited, or ``None`` when the SDK must answer it."""
        version = self._version()
        if version is None:
            return None
        method, params = request.method, request.params
        if method == "tools/call":
            if params is None or not params.keys() <= CALL_PARAMS:
                return None
            name = params.get("name")
            if not isinstance(name, str) or self.ctx.tools.get(name) is None:
                return None
            arguments = params.get("arguments")
            return self._call(request.id, name, ABSENT if arguments is None else arguments)
        if params:
            return None
        if method == "ping":
            return _ready(answer(request.id, b"{}"))
        if method == "tools/list":
            return _ready(answer(request.id, self._listing(version)))
        return None

    async def _call(self, request_id: Any, name: str, arguments: Any) -> bytes:
        connections = self.connections
        assert connections is not None  # checked by serve, and nothing awaited since
        session = connections.for_key(None)
        result = await session.call(name, arguments)
        return answer(request_id, dumps_bytes(call_result(result, session.session_id)))

    def _listing(self, version: str) -> bytes:
        """``tools/list``'s result as the SDK writes it at ``version``: its dump, sieved by its result surface."""
        listing = self._listings.get(version)
        if listing is None:
            dumped = tool_listing(self.ctx).model_dump(by_alias=True, mode="json", exclude_none=True)
            listing = self._listings[version] = dumps_bytes(serialize_server_result("tools/list", version, dumped))
        return listing


def answer(request_id: Any, result: bytes) -> bytes:
    """A JSON-RPC response line around an encoded result, keys in the SDK's order."""
    return b'{"jsonrpc":"2.0","id":' + dumps_bytes(request_id) + b',"result":' + result + b"}\n"


async def _ready(data: bytes) -> bytes:
    return data
