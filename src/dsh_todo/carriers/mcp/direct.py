"""The stdio server's own answers: ``initialize``, ``ping``, ``tools/list`` and ``tools/call`` without the SDK.

Importing the Python MCP SDK and its models takes about a second, and ``codex exec`` sends its first model request
some 50 ms after spawning its servers: a server that is not ready by then is not in the model's tool list. So the
stdio server answers the handshake and the hot methods itself and imports nothing of the SDK for them; the SDK half
(:mod:`.fallback`) is started only for a message this module declines, and is told the handshake first (it replays
the client's own ``initialize``). Each answer is the bytes the SDK writes for the same request, keys in its order; a
differential test runs the same lines through both at every handshake version (``test_mcp_direct.py``).

What is answered here, once and for all the same way as the SDK would:

- ``initialize`` of the plain shape (``protocolVersion`` a string, ``capabilities`` an object of objects,
  ``clientInfo`` with string ``name`` and ``version``, nothing else), as the first request of the connection: the
  client's version when it is one of :data:`HANDSHAKE_VERSIONS`, else the latest. Anything else (a second
  ``initialize``, odd params, the session-less 2026 protocol, which never sends ``initialize``) is the SDK's;
- after it, ``tools/call`` whose params hold ``name`` (a tool the registry has), optionally ``arguments`` and
  ``_meta`` (nothing else); ``tools/list`` without a cursor; and ``ping`` (no params, or ``{}``) at any time.

The call runs on the connection's own :class:`~dsh_todo.carriers.mcp.calls.CallSession` (the server's
:class:`~dsh_todo.carriers.mcp.calls.Connections`, shared with the SDK half), and its answer is
:func:`~dsh_todo.carriers.mcp.calls.call_result` written with the canonical encoder. Cancellation, ordering and the
end of input are the transport's (:mod:`dsh_todo.carriers.mcp.wire`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Final

from dsh_todo.carriers.mcp.calls import ABSENT, Connections, call_result
from dsh_todo.carriers.mcp.wire import Request
from dsh_todo.jsonutil import dumps_bytes
from dsh_todo.tool_todo.description import TOOL_NAME
from dsh_todo.tool_todo.tool import CALL_TITLE

SERVER_NAME: Final = "dsh-todo"

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The handshake-era protocol versions the pinned SDK negotiates (``mcp_types.version``; a test holds them equal)."""

LATEST_VERSION: Final = HANDSHAKE_VERSIONS[-1]

CALL_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
"""The only params keys a ``tools/call`` answered here may have."""

INITIALIZE_PARAMS: Final = frozenset({"protocolVersion", "capabilities", "clientInfo"})
CLIENT_INFO: Final = frozenset({"name", "version", "title"})

REPLAYED_ID: Final = "dsh-todo/replayed-initialize"
"""The id under which the SDK half is told the handshake this module answered; its answer is nobody's."""

TOOL_PRESENTATION: Final[Mapping[str, tuple[str, Mapping[str, bool]]]] = {
    TOOL_NAME: (CALL_TITLE, {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
                             "openWorldHint": False}),
}
"""``title`` and behaviour hints per tool. Without them a client assumes the worst (destructive, open world) and may
ask a person to confirm every call. ``todo_write`` replaces the session's own plan and nothing else: it writes (not
read-only), destroys nothing a person made (the previous list is still in the log), the same list twice leaves the
same plan (idempotent), and it touches nothing outside the session (closed world)."""

SCHEMA_FIELDS: Final = ("properties", "required", "type")
"""A tool schema's keys the SDK's model declares, which it writes first, in this order; the others follow as given."""


def _schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    head = {key: schema[key] for key in SCHEMA_FIELDS if key in schema}
    return head | {key: value for key, value in schema.items() if key not in head}


def tool_entries(connections: Connections, *, structured: bool) -> list[dict[str, Any]]:
    """``tools/list``'s tools as wire JSON, keys in the order the SDK writes them. The output schema is offered
    only with ``structured`` (``--structured-output``), as is ``structuredContent`` (:func:`call_result`)."""
    tools = connections.ctx.tools
    entries = []
    for schema in tools.schemas():
        name = schema["name"]
        definition = tools.get(name)
        output = definition.output_schema if definition is not None and structured else None
        title, hints = TOOL_PRESENTATION.get(name, (None, None))
        entry: dict[str, Any] = {}
        if hints is not None:
            entry["annotations"] = dict(sorted(hints.items()))
        entry["description"] = schema["description"]
        entry["inputSchema"] = _schema(schema["parameters"])
        entry["name"] = name
        if output is not None:
            entry["outputSchema"] = _schema(output)
        if title is not None:
            entry["title"] = title
        entries.append(entry)
    return entries


def initialize_result(version: str, server_version: str) -> dict[str, Any]:
    """The SDK's ``initialize`` result for this server (tools only, no instructions)."""
    return {"capabilities": {"tools": {"listChanged": False}}, "protocolVersion": version,
            "serverInfo": {"name": SERVER_NAME, "version": server_version}}


def negotiated(requested: str) -> str:
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_VERSION


def plain_initialize(params: Mapping[str, Any] | None) -> bool:
    """Whether ``initialize`` params are of the shape answered here (the SDK validates anything else)."""
    if params is None or not params.keys() <= INITIALIZE_PARAMS:
        return False
    capabilities, info = params.get("capabilities"), params.get("clientInfo")
    return (isinstance(params.get("protocolVersion"), str) and isinstance(capabilities, dict)
            and all(isinstance(value, dict) for value in capabilities.values())
            and isinstance(info, dict) and info.keys() <= CLIENT_INFO and {"name", "version"} <= info.keys()
            and all(isinstance(value, str) for value in info.values()))


class Direct:
    """Answers the handshake and the hot requests of one stdio connection (see the module's docstring)."""

    def __init__(self, connections: Connections, *, server_version: str, structured: bool = False) -> None:
        self.connections = connections
        self.server_version = server_version
        self.structured = structured
        self.version: str | None = None
        """The negotiated protocol version, once this module answered ``initialize``."""
        self.handshake: dict[str, Any] | None = None
        """The client's ``initialize`` params, for the SDK half's replay."""
        self.initialized = False
        """Whether the client sent ``notifications/initialized`` (replayed too)."""
        self.declined_handshake = False
        """The SDK answered ``initialize`` (or something before it): from then on every request is the SDK's."""
        self._listing: bytes | None = None

    def serve(self, request: Request) -> Awaitable[bytes] | None:
        """The answer line to ``request``, to be awaited, or ``None`` when the SDK must answer it."""
        method, params = request.method, request.params
        if self.declined_handshake:
            return None
        if method == "ping":
            return None if params else _ready(answer(request.id, b"{}"))
        if method == "initialize":
            if self.version is not None or not plain_initialize(params):
                self.declined_handshake = self.version is None
                return None
            assert params is not None
            self.handshake = params
            self.version = negotiated(params["protocolVersion"])
            return _ready(answer(request.id, dumps_bytes(initialize_result(self.version, self.server_version))))
        if self.version is None:
            self.declined_handshake = True  # the SDK gates (or serves, in the 2026 protocol) what comes first
            return None
        if method == "tools/call":
            if params is None or not params.keys() <= CALL_PARAMS or not isinstance(params.get("_meta", {}), dict):
                return None
            name = params.get("name")
            if not isinstance(name, str) or self.connections.ctx.tools.get(name) is None:
                return None
            arguments = params.get("arguments")
            return self._call(request.id, name, ABSENT if arguments is None else arguments)
        if params:
            return None
        if method == "tools/list":
            return _ready(answer(request.id, self.listing()))
        return None

    def notify(self, method: str) -> None:
        """A notification arrived (handed to the SDK half too, once it runs)."""
        if method == "notifications/initialized" and self.version is not None:
            self.initialized = True

    def replay(self) -> list[dict[str, Any]]:
        """What the SDK half must be told before anything else: the handshake answered here, if one was."""
        if self.handshake is None:
            return []
        messages: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": REPLAYED_ID, "method": "initialize", "params": self.handshake}]
        if self.initialized:
            messages.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return messages

    async def _call(self, request_id: Any, name: str, arguments: Any) -> bytes:
        session, _ = self.connections.for_key(None)
        result = await session.call(name, arguments)
        return answer(request_id, dumps_bytes(call_result(result, session.session_id, structured=self.structured)))

    def listing(self) -> bytes:
        """``tools/list``'s result, encoded once."""
        if self._listing is None:
            tools = tool_entries(self.connections, structured=self.structured)
            self._listing = dumps_bytes({"tools": tools})
        return self._listing


def answer(request_id: Any, result: bytes) -> bytes:
    """A JSON-RPC response line around an encoded result, keys in the SDK's order."""
    return b'{"jsonrpc":"2.0","id":' + dumps_bytes(request_id) + b',"result":' + result + b"}\n"


async def _ready(data: bytes) -> bytes:
    return data
