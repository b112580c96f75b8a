"""``dsh-todo mcp --http``: the MCP server (:mod:`.server`) over streamable HTTP, served by uvicorn behind the
connection slots (:mod:`dsh_todo.carriers.connection_slots`) and the body check (:mod:`.bodies`).

Apart from :mod:`.server` because the stdio carrier starts the SDK's server for what its direct path declines
(:mod:`.fallback`) and needs neither uvicorn nor the HTTP body check for it; the stdio command opens this module only
when ``--http`` is given (:func:`run`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import sys
from functools import partial
from typing import Final

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings

from dsh_todo.carriers.connection_slots import ConnectionSlots, connection_cap
from dsh_todo.carriers.mcp.bodies import CheckedBodies
from dsh_todo.carriers.mcp.calls import Connections
from dsh_todo.carriers.mcp.server import build_server, check_sdk

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
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(16, min(10_000, (soft - 128) // 3))


async def serve_http(connections: Connections, *, version: str, structured: bool = False, host: str = "127.0.0.1",
                     port: int = 8765, idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp``; prints the URL once the socket answers.

    The socket is bound before uvicorn starts, so a busy port is a plain ``OSError`` for the caller to report. A
    session is released on DELETE and after ``idle_timeout`` seconds without a request (:meth:`Connections.release`).
    A request from a foreign ``Host`` or ``Origin`` is refused first (421, 403), whatever its body; a body that is
    not a JSON-RPC message gets the stdio server's one-line answer (:mod:`.bodies`).
    """
    log = logging.getLogger("dsh_todo.mcp")
    check_sdk()
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
    server = build_server(connections, version=version, structured=structured)
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


def run(connections: Connections, *, version: str, structured: bool, host: str, port: int,
        idle_timeout: float | None) -> None:
    """Serve until stopped (uvicorn stops on SIGINT and SIGTERM), on the event loop of :mod:`anyio`, as the SDK's
    streamable HTTP app expects; ``idle_timeout`` ``None`` is :data:`DEFAULT_IDLE_TIMEOUT`."""
    anyio.run(partial(serve_http, connections, version=version, structured=structured, host=host, port=port,
                      idle_timeout=DEFAULT_IDLE_TIMEOUT if idle_timeout is None else idle_timeout))
