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
when input ends (:mod:`.stdio`, which answers the handshake and the hot methods without this module and starts it
only for what it declines: :mod:`.fallback`). Over streamable HTTP the server's lifetime is the scope instead: each
MCP session id (``Mcp-Session-Id``, handshake-era clients) gets its own agent session and turn, and clients that
speak the session-less 2026 protocol share one; all of them end when the server stops.
"""

from __future__ import annotations

import contextvars
import dataclasses
import types as pytypes
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any, Final

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError

from dsh_todo.carriers.mcp.calls import ABSENT, LATEST_VERSION, SERVER_NAME, Connections, call_result, tool_entries

__all__ = ["SERVER_NAME", "build_server", "check_sdk", "sdk_connection", "tool_listing"]


_NOT_CAPTURED: Final[Any] = object()
_RAW_ARGUMENTS: contextvars.ContextVar[Any] = contextvars.ContextVar("dsh_todo_mcp_raw_arguments")


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


def sdk_connection(ctx: ServerRequestContext[Connections, Any]) -> Connection:
    """The SDK connection serving an HTTP request: its transport session id names the client's agent session, and
    its exit stack releases that session whichever way the connection ends. The low-level handler context does not
    expose it (the high-level ``Context.connection`` does), so it is read off the request's session proxy, the one
    private name this carrier reads; :func:`check_sdk` makes a server refuse to start when it is gone."""
    connection = getattr(ctx.session, "_connection", None)
    if not isinstance(connection, Connection):
        raise RuntimeError(_sdk_changed())
    return connection


def _sdk_changed() -> str:
    return (f"the installed mcp SDK ({metadata.version('mcp')}) no longer keeps a request's connection where "
            "dsh-todo reads it (ServerSession._connection); dsh-todo supports mcp>=2.3,<2.4")


def check_sdk() -> None:
    """Refuse to serve HTTP on an SDK whose request sessions do not keep their connection under the name
    :func:`sdk_connection` reads: every client would silently share one agent session instead of getting its own."""
    probe = object.__new__(ServerSession)
    connection = pytypes.SimpleNamespace(protocol_version=LATEST_VERSION)
    try:
        ServerSession.__init__(probe, None, connection)  # type: ignore[arg-type]
    except Exception as exc:
        raise RuntimeError(_sdk_changed()) from exc
    if getattr(probe, "_connection", None) is not connection:
        raise RuntimeError(_sdk_changed())


def _http_session(request: ServerRequestContext[Connections, Any]) -> tuple[str | None, Connection | None]:
    """The MCP session an HTTP request belongs to: the id of the transport session serving it (stateful streamable
    HTTP) and its connection; ``(None, None)`` for session-less (2026) requests and over stdio (``request.request``,
    the HTTP request, is ``None`` there), which have the server's one agent session."""
    if request.request is None:
        return None, None
    connection = sdk_connection(request)
    key = connection.session_id
    return (key, connection) if isinstance(key, str) and key else (None, None)


def tool_listing(connections: Connections, *, structured: bool) -> types.ListToolsResult:
    """``tools/list``'s answer as the SDK's model, built from the same entries the direct path writes."""
    return types.ListToolsResult(tools=[types.Tool.model_validate(entry, by_name=False)
                                        for entry in tool_entries(connections, structured=structured)])


def build_server(connections: Connections, *, version: str, structured: bool = False,
                 own: bool = False) -> Server[Connections]:
    """A low-level MCP server exposing every tool on ``connections.ctx.tools``, on the sessions of ``connections``.
    Whoever serves owns them and closes them; with ``own`` (a server the SDK's in-memory ``Client`` runs), the
    server's lifespan closes them when it ends."""
    ctx = connections.ctx
    listing = tool_listing(connections, structured=structured)

    @asynccontextmanager
    async def lifespan(_server: Server[Connections]) -> AsyncIterator[Connections]:
        try:
            yield connections
        finally:
            if own:
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
        key, connection = _http_session(request)
        session, made = connections.for_key(key)
        if made and connection is not None and key is not None:
            connection.exit_stack.callback(connections.release, key)
        result = await session.call(params.name, arguments)
        return types.CallToolResult.model_validate(call_result(result, session.session_id, structured=structured),
                                                   by_name=False)

    server: Server[Connections] = Server(SERVER_NAME, version=version, lifespan=lifespan,
                                         on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(_capture_raw_arguments)
    return server
