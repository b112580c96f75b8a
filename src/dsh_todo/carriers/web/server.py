"""Running the page's server: on a background thread beside an agent, or as ``dsh-todo web``.

:func:`serve_in_background` serves a context that is already booted, live sessions included: the agent keeps
appending on its own thread and the page sees each event as it is committed. The socket is bound before the
function returns, so the URL it gives is answering by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import uvicorn

from dsh_todo.carriers.connection_slots import ConnectionSlots, connection_cap
from dsh_todo.carriers.stopping import STOPPING
from dsh_todo.carriers.web.app import IDLE_MINUTES, WebApp
from dsh_todo.carriers.web.security import binding_problem
from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import ListenError
from dsh_todo.standard import open_storage

if TYPE_CHECKING:
    from dsh_todo.runtime import Storage, Telemetry

log = logging.getLogger("dsh_todo.web")

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on ``host:port`` (``port`` 0 picks a free one)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def url_for(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    url = f"http://{shown}:{port}/"
    return f"{url}?token={quote(token, safe='')}" if token is not None else url


class BackgroundServer:
    """A uvicorn server on its own thread and event loop."""

    def __init__(self, ctx: Context, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 agents: Sequence[str] = (), agent_homes: Mapping[str, Path] | None = None,
                 idle_minutes: float = IDLE_MINUTES) -> None:
        problem = binding_problem(host, token)
        if problem is not None:
            raise ValueError(problem)
        self.host = host
        self.token = token
        self._sock = bind(host, port)
        self.port: int = self._sock.getsockname()[1]
        try:
            self.app = WebApp(ctx, token=token, port=self.port, agents=agents, agent_homes=agent_homes,
                              idle_minutes=idle_minutes)
        except BaseException:
            self._sock.close()
            raise
        # Each connection may hold a second descriptor for a while (a log being read for it): two apiece.
        self.slots = ConnectionSlots(connection_cap(fds_each=2), label="dsh-todo web", log=log)
        config = self.slots.config(self.app.asgi, log_config=None, access_log=False, lifespan="on",
                                   timeout_graceful_shutdown=3, log_level="warning")
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        return url_for(self.host, self.port, self.token)

    def start(self) -> str:
        self._thread = threading.Thread(target=self._run, name=f"dsh-todo-web:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the web server did not start: {self._error or 'timed out'}")
            time.sleep(0.005)
        return self.url

    async def _serve(self) -> None:
        self.slots.install(asyncio.get_running_loop())
        await self.server.serve(sockets=[self._sock])

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start() or stop()
            self._error = exc
            log.exception("the web server stopped with an error")

    def stop(self) -> None:
        """End every stream, stop the server and wait for its thread. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        hub, loop = self.app.hub, self.app.loop
        if hub is not None and loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(hub.close)
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
            if self._thread.is_alive():
                self.server.force_exit = True
                self._thread.join(STOP_TIMEOUT_S)
        self._sock.close()


def serve_in_background(ctx: Context, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                        agents: Sequence[str] = (), agent_homes: Mapping[str, Path] | None = None,
                        idle_minutes: float = IDLE_MINUTES) -> tuple[str, Callable[[], None]]:
    """Serve the page for ``ctx`` (live sessions and, with persistence, the root) on a thread: ``(url, stop)``;
    ``agents`` adds those coding agents' sessions (read from ``agent_homes`` or their default homes)."""
    server = BackgroundServer(ctx, host=host, port=port, token=token, agents=agents, agent_homes=agent_homes,
                              idle_minutes=idle_minutes)
    return server.start(), server.stop


def run_web(storage: Storage, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
            out: Any = None, err: Any = None, telemetry: Telemetry = "disabled", agents: Sequence[str] = (),
            agent_homes: Mapping[str, Path] | None = None, idle_minutes: float = IDLE_MINUTES) -> int:
    """``dsh-todo web``: serve the sessions in ``storage`` (and the chosen ``agents``' sessions) until interrupted;
    print the URL once it answers."""
    out = out or sys.stdout
    err = err or sys.stderr
    problem = binding_problem(host, token)
    if problem is not None:
        print(f"dsh-todo web: {problem}", file=err)
        return 2
    STOPPING.install()  # SIGTERM and SIGHUP stop it as Ctrl-C does, once, until the process is gone
    try:
        # a storage that cannot be opened is the caller's one-line error (cli.main)
        ctx = open_storage(storage, telemetry=telemetry)
        try:
            try:
                server = BackgroundServer(ctx, host=host, port=port, token=token, agents=agents,
                                          agent_homes=agent_homes, idle_minutes=idle_minutes)
            except OSError as exc:
                print(f"dsh-todo web: {ListenError(host, port, exc)}", file=err)
                return 2
            done = threading.Event()
            STOPPING.serve(done.set)
            try:
                url = server.start()
                print(url, file=out, flush=True)
                print(f"dsh-todo web: serving the {storage.describe()} (Ctrl+C to stop)", file=err, flush=True)
                while not done.wait(0.5):
                    pass
            finally:
                server.stop()
        finally:
            ctx.dispose()
    finally:
        STOPPING.done()
    return 0
