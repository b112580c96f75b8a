"""One MCP connection's agent session, and the stdio server's own answers: a tool call as one step of a turn.

An MCP client is somebody else's agent loop, so this side sees no prompts and no model turns, only tool calls. To
keep the log in DSH's shape (and readable by ``dsh-todo plan``), each call is written as the agent loop writes one,
in a step of its own: ``step/start`` → ``assistant/message`` (the call, advertised) → ``tool/call`` (the raw argument
JSON) → ``todo/write`` → ``tool/result`` → ``step/end``. The turn around them is the connection's: its first call
writes ``turn/start``, and ``turn/end`` (``completed``) is written when the client goes away; a server that dies
instead leaves the turn open, and the next load closes it as ``interrupted`` (DSH's crash recovery).

Why one turn and not one per call: DSH's standing plan is the last ``todo/write`` with no later ``turn/start``, so a
call that opened a turn of its own cleared the plan before it ran, and a rejected call (which writes none) left the
client's plan blank in ``dsh-todo plan``, ``watch`` and the web page. Within one turn the plan changes only when a
call is accepted; a cancelled call gets its ``Error: tool call aborted`` result and ends its step, not the turn
(docs/decisions/0005). The turn and call rules themselves are :mod:`dsh_todo.harness.turns`'.

**The direct answers** (:class:`Direct`). Importing the Python MCP SDK and its models takes about a second, and
``codex exec`` sends its first model request some 50 ms after spawning its servers: a server that is not ready by
then is not in the model's tool list. So the stdio server answers the handshake and the hot methods itself and
imports nothing of the SDK for them; the SDK half (:mod:`.fallback`) is started only for a message :class:`Direct`
declines, and is told the handshake first (it replays the client's own ``initialize``). Each answer is the bytes the
SDK writes for the same request, keys in its order; a differential test runs the same lines through both at every
handshake version (``test_mcp_direct.py``). What is answered here, once and for all the same way as the SDK would:

- ``initialize`` of the plain shape (``protocolVersion`` a string, ``capabilities`` an object of objects,
  ``clientInfo`` with string ``name`` and ``version``, nothing else), as the first request of the connection: the
  client's version when it is one of :data:`HANDSHAKE_VERSIONS`, else the latest. Anything else (a second
  ``initialize``, odd params, the session-less 2026 protocol, which never sends ``initialize``) is the SDK's;
- after it, ``tools/call`` whose params hold ``name`` (a tool the registry has), optionally ``arguments`` and
  ``_meta`` (nothing else); ``tools/list`` without a cursor; and ``ping`` (no params, or ``{}``) at any time.

The call runs on the connection's own :class:`CallSession` (the server's :class:`Connections`, shared with the SDK
half), and its answer is :func:`call_result` written with the canonical encoder. Cancellation, ordering and the end
of input are the transport's (:mod:`dsh_todo.carriers.mcp.wire`). Why the two live in one module: a direct
``tools/call`` is the step this module writes, answered; apart, one call crossed two carrier modules on its way to
the disk (docs/decisions/0046).

No MCP import here: the SDK-facing half lives in :mod:`dsh_todo.carriers.mcp.server`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from dsh_todo.carriers.jsonrpc import raw_json
from dsh_todo.carriers.mcp.wire import Request
from dsh_todo.harness.agent import Agent
from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import SessionLogChangedError, SessionWriteError
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.session import Session
from dsh_todo.harness.tools.registry import ToolResult, error_result
from dsh_todo.harness.turns import Turns
from dsh_todo.ids import random_call_id, random_uuid
from dsh_todo.jsonutil import dumps_bytes
from dsh_todo.tool_todo.description import TOOL_NAME
from dsh_todo.tool_todo.tool import CALL_TITLE

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.contract import Batch, SessionPersistence

log = logging.getLogger("dsh_todo.mcp")

ABSENT: Any = object()
"""``arguments`` that the client left out (or sent as ``null``): logged as ``""`` and executed as ``{}``."""

SESSION_META_KEY: Final = "dsh-todo/sessionId"
"""``_meta`` key on every call result: the DSH session id its events were written to (``dsh-todo plan`` reads it)."""


KEEP_IN_MEMORY: Final = 500
"""Events a persisted MCP session holds in memory at least, twice as many at most (about 80 to 170 calls, of six
events each): the rest is durable in its log and read back from there by the rare reader that wants the whole log
(decision 0037)."""


class InMemoryBound:
    """Bounds the persisted MCP sessions of one server run in memory (:meth:`Session.bound`): one durability
    listener for all of them, which tells each session how far its log is stored."""

    def __init__(self, persistence: SessionPersistence, keep: int = KEEP_IN_MEMORY) -> None:
        self.persistence = persistence
        self.keep = keep
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._stop = persistence.on_written(self._written)

    def add(self, session: Session) -> None:
        persistence, session_id = self.persistence, session.id
        session.bound(self.keep, lambda start, stop: persistence.read(session_id).events[start:stop])
        self._sessions[session_id] = session

    def _written(self, session_id: str, batch: Batch) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.stored(batch.last_seq)

    def close(self) -> None:
        self._stop()


def call_result(result: ToolResult, session_id: str, *, structured: bool = False) -> dict[str, Any]:
    """The MCP ``CallToolResult`` for one answered call, as wire JSON data: the registry's text blocks, ``isError``
    and the session id under ``_meta``; with ``structured`` (``--structured-output``), the canonical value as
    ``structuredContent`` too (accepted calls only).

    Not by default: clients that see ``structuredContent`` (Codex, Claude Code) show the model that JSON instead of
    the text, and the text is the seed's Model Experience (one fixed line; the list stays in the call's arguments).

    Keys in the order the SDK's result surface writes them (``_meta``, ``content``, ``isError``,
    ``structuredContent``; ``text`` before ``type``), so the stdio server's direct answers are byte-identical to the
    SDK's (:class:`Direct`); the structured value may be the frozen canonical one (dict and list subclasses, which
    the canonical encoder writes as plain JSON)."""
    answer: dict[str, Any] = {"_meta": {SESSION_META_KEY: session_id},
                              "content": [{"text": block["text"], "type": "text"} for block in result.content],
                              "isError": result.is_error}
    if structured and not result.is_error and result.value is not None:
        answer["structuredContent"] = result.value
    return answer


def raw_argument_text(arguments: Any) -> str:
    """The argument string ``tool/call`` records: the client's JSON value, compact, or ``""`` when absent. Numbers
    JSON cannot carry losslessly are written as the client sent them (``1e400``), never as ``null``."""
    if arguments is ABSENT:
        return ""
    return raw_json(arguments)


class CallSession:
    """The agent session behind one MCP connection, created on its first call.

    Calls are serialised (one step at a time, in arrival order) so two concurrent requests can never interleave
    their events. With persistence mounted, every call is flushed before its result is returned, so what a client
    was told is already durable; :meth:`close` ends the turn and releases the writer lock.
    """

    def __init__(self, ctx: Context, *, cwd: str | None = None, session_id: str | None = None,
                 on_open: Callable[[CallSession], None] | None = None, bound: InMemoryBound | None = None) -> None:
        self.ctx = ctx
        self.on_open = on_open
        self.bound = bound
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.session_id = session_id or random_uuid()
        self._turns: Turns | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def session(self) -> Session | None:
        """The live session, or ``None`` before the first call."""
        return self._turns.session if self._turns is not None else None

    def _open(self) -> Turns:
        if self._turns is None:
            session = self.ctx.sessions.create(self.session_id, cwd=self.cwd)
            if self.bound is not None:
                self.bound.add(session)
            self._turns = Turns.of(self.ctx, Agent(self.session_id, session))
            if self.on_open is not None:
                self.on_open(self)
        return self._turns

    async def call(self, name: str, arguments: Any = ABSENT) -> ToolResult:
        """Run one call as the next step of the connection's turn; the result is exactly what the native
        ``ctx.tools.execute`` answers."""
        if self._closed:
            raise RuntimeError(f'MCP session "{self.session_id}" is closed')
        async with self._lock:
            call = ToolCallRequest(random_call_id("call_mcp_"), name, raw_argument_text(arguments))
            try:
                return await self._open().call_alone(call, arguments={} if arguments is ABSENT else arguments)
            except Exception as exc:  # the harness failed (not the tool: the registry answers those itself)
                # The client still gets one answer, the one the log holds (``Turns`` logged ``Error: <exc>`` and
                # closed the step), rather than a JSON-RPC error with code 0 and the exception's text.
                # A log that cannot be written is said once per episode (``repeat``: already said); one changed
                # by another process ends the session's writes, said as the front door's own line.
                if isinstance(exc, SessionWriteError) and exc.repeat:
                    log.debug("MCP call %s failed: %s: %s", call.id, type(exc).__name__, exc)
                elif isinstance(exc, SessionLogChangedError):
                    log.warning("dsh-todo mcp: %s", exc)
                else:
                    log.warning("MCP call %s failed: %s: %s", call.id, type(exc).__name__, exc)
                return error_result(str(exc) or type(exc).__name__)

    def close(self) -> None:
        """The client went away: end the turn, flush and let go of the session. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._turns is not None:
            self._turns.close()
            session = self._turns.session
            log.debug('MCP session "%s" closed: %d events logged, %d held in memory', session.id, session.seq,
                      session.held)


class Connections:
    """The agent sessions one server run hands out: the connection's own (stdio, session-less HTTP) and one per HTTP
    MCP session id. Owned by whoever serves (``serve_stdio``, ``serve_http``) and passed to the halves that answer
    (the direct path, the SDK's handlers), so both always see the same sessions."""

    def __init__(self, ctx: Context, cwd: str | None = None, *,
                 on_session: Callable[[CallSession], None] | None = None) -> None:
        self.ctx = ctx
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.on_session = on_session
        persistence = ctx.get("session_persistence")
        self.bound = InMemoryBound(persistence) if persistence is not None else None
        """A persisted session holds a bounded tail of its log in memory; one in memory only keeps it all."""
        self.default = self._new()
        self.by_id: dict[str, CallSession] = {}

    def _new(self) -> CallSession:
        return CallSession(self.ctx, cwd=self.cwd, on_open=self.on_session, bound=self.bound)

    def for_key(self, key: str | None) -> tuple[CallSession, bool]:
        """The session for one HTTP MCP session id (``None``: the connection's own), and whether this made it."""
        if key is None:
            return self.default, False
        session = self.by_id.get(key)
        if session is not None:
            return session, False
        session = self.by_id[key] = self._new()
        return session, True

    def release(self, key: str) -> None:
        """The MCP session ``key`` ended (DELETE, idle timeout, server stop): close its turn, let go of its log.
        Without this every session kept its writer lock (an open file) until the server stopped."""
        session = self.by_id.pop(key, None)
        if session is not None:
            session.close()

    def all(self) -> list[CallSession]:
        return [self.default, *self.by_id.values()]

    def close(self) -> None:
        try:
            for session in self.all():
                session.close()
        finally:
            if self.bound is not None:
                self.bound.close()


# The direct answers (the module's docstring) ---------------------------------------------------------------------

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
        self.tools = connections.ctx.tools
        """The registry, looked up once: a call's way to the disk does not pass through the context."""
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
            if not isinstance(name, str) or self.tools.get(name) is None:
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
