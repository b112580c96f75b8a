"""The MCP server: ``todo_write`` with our description and schema, answered by the native tool registry.

Built on the SDK's low-level :class:`mcp.server.lowlevel.Server` rather than ``MCPServer``: the high-level server
validates arguments against a pydantic model of its own and would answer a bad call before our registry could, with
different words. Here nothing stands between the client's JSON and ``ctx.tools.execute``, so every result text is
the native one, ``Error: invalid arguments: …`` included. Even arguments that are not an object (MCP's schema
forbids them, but a client can still send them) reach the registry: a small middleware takes the raw value before
the SDK's request validation and hands it to the handler (see :func:`_capture_raw_arguments`).

Each served connection owns one agent session (:class:`~dsh_todo.carriers.mcp.calls.CallSession`), created on the
first call with a fresh uuid and the server's working directory, and one turn in it: the first call opens it, each
call is a step of it, and it ends (``completed``) when the connection ends and the session is released: over stdio
when the client closes stdin. Over streamable HTTP the server's lifetime is the scope instead: each MCP session id
(``Mcp-Session-Id``, handshake-era clients) gets its own agent session and turn, and clients that speak the
session-less 2026 protocol share one; all of them end when the server stops.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from dsh_todo.carriers.mcp.calls import ABSENT, SESSION_META_KEY, CallSession, call_result
from dsh_todo.harness import Context
from dsh_todo.jsonutil import dumps, loads
from dsh_todo.tool_todo import CALL_TITLE
from dsh_todo.tool_todo.description import TOOL_NAME

if TYPE_CHECKING:
    from dsh_todo.carriers.mcp.direct import Direct
    from dsh_todo.runtime import Storage

__all__ = ["SERVER_NAME", "SESSION_META_KEY", "Connections", "build_server", "main", "sdk_connection", "serve_http",
           "serve_stdio", "tool_listing"]

SERVER_NAME: Final = "dsh-todo"

_NOT_CAPTURED: Final[Any] = object()
_RAW_ARGUMENTS: contextvars.ContextVar[Any] = contextvars.ContextVar("dsh_todo_mcp_raw_arguments")


def _version() -> str:
    try:
        return metadata.version("dsh-todo")
    except metadata.PackageNotFoundError:
        return "0"


class Connections:
    """The lifespan state of one server run: the agent sessions it has handed out."""

    def __init__(self, ctx: Context, cwd: str | None = None) -> None:
        self.ctx = ctx
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.default = CallSession(ctx, cwd=self.cwd)
        self.by_id: dict[str, CallSession] = {}

    def for_key(self, key: str | None, on_new: Callable[[], None] | None = None) -> CallSession:
        """The session for one HTTP MCP session id, or the connection's own one (stdio, session-less HTTP);
        ``on_new`` runs when this call created it."""
        if key is None:
            return self.default
        session = self.by_id.get(key)
        if session is None:
            session = self.by_id[key] = CallSession(self.ctx, cwd=self.cwd)
            if on_new is not None:
                on_new()
        return session

    def release(self, key: str) -> None:
        """The MCP session ``key`` ended (DELETE, idle timeout, server stop): close its turn, let go of its log.
        Without this every session kept its writer lock (an open file) until the server stopped."""
        session = self.by_id.pop(key, None)
        if session is not None:
            session.close()

    def all(self) -> list[CallSession]:
        return [self.default, *self.by_id.values()]

    def close(self) -> None:
        for session in self.all():
            session.close()


async def _capture_raw_arguments(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Keep ``tools/call`` arguments exactly as the client sent them, before the SDK validates the request.

    The SDK's params model types ``arguments`` as an object and would refuse anything else with a protocol error;
    the native registry answers such a call with ``Error: invalid arguments: "arguments" must be an object``, and
    that is the answer a client must get. So a non-object value is taken out of the params (which then validate)
    and handed to the handler through a context variable, as is every other value, untouched.
    """
    params = ctx.params
    if ctx.method != "tools/call" or not isinstance(params, Mapping):
        return await call_next(ctx)
    raw = params.get("arguments")
    token = _RAW_ARGUMENTS.set(ABSENT if raw is None else raw)
    try:
        if raw is not None and not isinstance(raw, dict):
            ctx = dataclasses.replace(ctx, params={k: v for k, v in params.items() if k != "arguments"})
        return await call_next(ctx)
    finally:
        _RAW_ARGUMENTS.reset(token)


def sdk_connection(ctx: ServerRequestContext[Connections, Any]) -> Connection | None:
    """The SDK connection serving the request. The low-level handler context does not expose it (the high-level
    ``Context.connection`` does), so it is read off the request's session proxy; the tests pin this."""
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def _session_key(ctx: ServerRequestContext[Connections, Any]) -> str | None:
    """The MCP session the request belongs to: the id of the transport session serving it (stateful streamable
    HTTP), ``None`` over stdio and for session-less (2026) requests, which have one connection per request."""
    connection = sdk_connection(ctx)
    key = connection.session_id if connection is not None else None
    return key if isinstance(key, str) and key else None


def _release_with_connection(ctx: ServerRequestContext[Connections, Any], key: str) -> None:
    """Release the DSH session ``key`` when its SDK connection ends: a stateful HTTP session's connection outlives
    its requests, and the SDK unwinds its exit stack whichever way it ends (DELETE, idle timeout, server stop)."""
    connection = sdk_connection(ctx)
    if connection is not None:
        connection.exit_stack.callback(ctx.lifespan_context.release, key)


def _plain(value: Any) -> Any:
    """A frozen canonical value as plain JSON data (lists and dicts the SDK can serialise)."""
    return loads(dumps(value))


TOOL_PRESENTATION: Final[Mapping[str, tuple[str, types.ToolAnnotations]]] = {
    TOOL_NAME: (CALL_TITLE, types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                                  open_world_hint=False)),
}
"""``title`` and behaviour hints per tool. Without them a client assumes the worst (destructive, open world) and may
ask a person to confirm every call. ``todo_write`` replaces the session's own plan and nothing else: it writes (not
read-only), destroys nothing a person made (the previous list is still in the log), the same list twice leaves the
same plan (idempotent), and it touches nothing outside the session (closed world)."""


def tool_listing(ctx: Context) -> types.ListToolsResult:
    """``tools/list``'s answer: every tool on ``ctx.tools`` with its title and hints (the composition mounts
    ``todo_write``)."""
    listing = []
    for schema in ctx.tools.schemas():
        definition = ctx.tools.get(schema["name"])
        output = definition.output_schema if definition is not None else None
        title, hints = TOOL_PRESENTATION.get(schema["name"], (None, None))
        listing.append(types.Tool(name=schema["name"], title=title, description=schema["description"],
                                  input_schema=_plain(schema["parameters"]),
                                  output_schema=_plain(output) if output is not None else None,
                                  annotations=hints))
    return types.ListToolsResult(tools=listing)


def build_server(ctx: Context, *, cwd: str | None = None, direct: Direct | None = None) -> Server[Connections]:
    """A low-level MCP server exposing every tool on ``ctx.tools``.

    ``direct`` (stdio only) is told the server's :class:`Connections` for as long as they live and the SDK's
    connection that serves the handshake, so it can answer the hot methods itself once the SDK has accepted
    ``initialize`` (:mod:`dsh_todo.carriers.mcp.direct`)."""
    listing = tool_listing(ctx)

    @asynccontextmanager
    async def lifespan(_server: Server[Connections]) -> AsyncIterator[Connections]:
        connections = Connections(ctx, cwd)
        if direct is not None:
            direct.connections = connections
        try:
            yield connections
        finally:
            if direct is not None:
                direct.connections = None
            connections.close()

    async def list_tools(_ctx: ServerRequestContext[Connections, Any],
                         _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    async def call_tool(request: ServerRequestContext[Connections, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        if ctx.tools.get(params.name) is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f'unknown tool "{params.name}"')
        arguments = _RAW_ARGUMENTS.get(_NOT_CAPTURED)
        if arguments is _NOT_CAPTURED:
            arguments = ABSENT if params.arguments is None else params.arguments
        key = _session_key(request)
        session = request.lifespan_context.for_key(
            key, on_new=None if key is None else partial(_release_with_connection, request, key))
        result = await session.call(params.name, arguments)
        return types.CallToolResult.model_validate(call_result(result, session.session_id), by_name=False)

    server: Server[Connections] = Server(SERVER_NAME, version=_version(), lifespan=lifespan,
                                         on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(_capture_raw_arguments)
    if direct is not None:
        server.middleware.append(direct.watch)
    return server


async def serve_stdio(ctx: Context, *, cwd: str | None = None) -> None:
    """Serve one client over stdin/stdout until it closes stdin; its session is flushed and released then.

    The transport is ours (:mod:`dsh_todo.carriers.mcp.wire`), not the SDK's: it answers every request, including
    lines the SDK's reader would drop unanswered, and after the handshake it lets :mod:`.direct` answer the plain
    ``tools/call``, ``ping`` and ``tools/list`` requests without the SDK's dispatch (docs/decisions/0013)."""
    from dsh_todo.carriers.mcp.direct import Direct
    from dsh_todo.carriers.mcp.wire import stdio_transport

    direct = Direct(ctx)
    server = build_server(ctx, cwd=cwd, direct=direct)
    async with stdio_transport(direct=direct) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


DEFAULT_IDLE_TIMEOUT: Final = 600.0
"""Seconds without a request after which an HTTP MCP session is released (``--idle-timeout``). HTTP has no
connection to lose, so this is how a client that vanished without its DELETE is noticed; long enough for a model
that thinks for minutes between calls, short enough that a log held by a dead client is free again soon."""


LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")
"""The hosts for which the server answers loopback ``Host`` and ``Origin`` names only (as the SDK does)."""


def max_sessions() -> int:
    """How many HTTP MCP sessions may be open at once: each holds two file descriptors (its log's lock and, once it
    has written, its log, kept open for appending: decision 0016), a third for its client's connection, and some
    memory, so the bound follows the fd limit. Past it a new client gets the SDK's 503 ``Too many open sessions``
    and the server keeps serving the others, instead of dying of ``EMFILE``."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(16, min(10_000, (soft - 128) // 3))


async def serve_http(ctx: Context, *, host: str = "127.0.0.1", port: int = 8765, cwd: str | None = None,
                     idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp``; prints the URL once the socket answers.

    The socket is bound before uvicorn starts, so a busy port is a plain ``OSError`` for the caller to report. A
    session is released on DELETE and after ``idle_timeout`` seconds without a request (:meth:`Connections.release`).
    A request from a foreign ``Host`` or ``Origin`` is refused first (421, 403), whatever its body; a body that is
    not a JSON-RPC message gets the stdio server's one-line answer (:mod:`.bodies`).
    """
    import asyncio
    import logging
    import socket

    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from dsh_todo.carriers.connection_slots import ConnectionSlots, connection_cap
    from dsh_todo.carriers.mcp.bodies import CheckedBodies

    log = logging.getLogger("dsh_todo.mcp")

    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
    except OSError:
        listener.close()
        raise
    security = None
    if host in LOOPBACK_HOSTS:  # the SDK's own settings for a loopback host, given to it and to the body check
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                             allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                                             allowed_origins=["http://127.0.0.1:*", "http://localhost:*",
                                                              "http://[::1]:*"])
    server = build_server(ctx, cwd=cwd)
    app = server.streamable_http_app(host=host, session_idle_timeout=idle_timeout, max_sessions=max_sessions(),
                                     transport_security=security)
    # Connections take what the sessions leave of the fd limit: two apiece at most, max_sessions() of them.
    slots = ConnectionSlots(connection_cap(held=2 * max_sessions()), label="dsh-todo mcp", log=log)
    web = uvicorn.Server(slots.config(CheckedBodies(app, security=security), log_level="warning", lifespan="on"))
    slots.install(asyncio.get_running_loop())
    async with anyio.create_task_group() as group:
        group.start_soon(partial(web.serve, sockets=[listener]))
        while not web.started:
            if web.should_exit:
                return
            await anyio.sleep(0.02)
        bound = listener.getsockname()[1]
        print(f"dsh-todo mcp: listening on http://{host}:{bound}/mcp", file=sys.stderr, flush=True)


def main(*, storage: Storage, allow_parallel: bool = True, http: bool = False,
         host: str = "127.0.0.1", port: int = 8765, idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> int:
    """``dsh-todo mcp``: boot the standard composition persisted to ``storage`` and serve until the client leaves."""
    from dsh_todo.runtime import open_storage

    ctx = open_storage(storage, allow_parallel=allow_parallel)
    print(f"dsh-todo mcp: serving {', '.join(ctx.tools.names()) or 'no tools'} "
          f"(allowParallelInProgress: {str(allow_parallel).lower()}), {storage.describe()}",
          file=sys.stderr, flush=True)
    try:
        if http:
            anyio.run(partial(serve_http, ctx, host=host, port=port, idle_timeout=idle_timeout))
        else:
            anyio.run(partial(serve_stdio, ctx))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        if not http:
            raise
        print(f"dsh-todo mcp: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    finally:
        ctx.dispose()
    return 0
