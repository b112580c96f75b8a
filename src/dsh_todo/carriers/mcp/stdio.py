"""``dsh-todo mcp``: one client over stdin/stdout (or many over HTTP), each connection one agent session.

This module owns the connection: the :class:`~dsh_todo.carriers.mcp.calls.Connections` (the agent sessions), the direct
path that answers the handshake and the hot methods (:class:`~dsh_todo.carriers.mcp.calls.Direct`), the transport
(:mod:`.wire`) and the SDK half, started only when a message needs it (:mod:`.fallback`). It imports no SDK, so
``initialize`` is answered within tens of milliseconds of the spawn: clients such as ``codex exec`` list a server's
tools for the model about 50 ms after starting it, and a server still importing the SDK then is missing from the model's
tools.

The connection ends when input does or at the first SIGTERM, SIGINT or SIGHUP (what clients send their servers:
Codex closes stdin and sends SIGTERM at once, Gemini CLI sends SIGTERM with stdin open, Claude Code SIGINT then
SIGTERM 100 ms later; a terminal's Ctrl-C is SIGINT): calls in progress finish and are answered, the turn ends
``completed``, the log is flushed and its lock let go, and the process exits 0. Later signals change nothing.
Codex then SIGKILLs the process it started, 12 to 14 ms after its SIGTERM: that process is a stand-in
(:func:`leave_to_stand_in`), so the kill never cuts the turn short.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from functools import partial
from typing import TYPE_CHECKING, BinaryIO

from dsh_todo import __version__
from dsh_todo.carriers.mcp.calls import CallSession, Connections, Direct
from dsh_todo.carriers.mcp.wire import Emit, Fallback, serve_lines
from dsh_todo.carriers.stopping import STOP_SIGNALS, STOPPING
from dsh_todo.harness.errors import ListenError, SessionLogChangedError
from dsh_todo.quoting import safe, shell_path, shell_word
from dsh_todo.standard import open_storage

if TYPE_CHECKING:
    from dsh_todo.runtime import Storage, Telemetry

__all__ = ["leave_to_stand_in", "main", "serve_stdio"]


async def serve_stdio(connections: Connections, *, version: str, structured: bool = False,
                      stop: asyncio.Event | None = None, stdin: BinaryIO | None = None, stdout_fd: int | None = None,
                      direct: Direct | None = None) -> None:
    """Serve one client on stdin/stdout (or ``stdin`` and ``stdout_fd``) until its input ends or ``stop`` is set (by
    default: at a stop signal, :mod:`dsh_todo.carriers.stopping`); every request is answered. Closing
    ``connections`` (the turn ``completed``, the log flushed, the lock let go) is the caller's. ``direct``: the
    direct path to use (tests count what it answers, or decline everything)."""
    if direct is None:
        direct = Direct(connections, server_version=version, structured=structured)

    async def start_fallback(emit: Emit) -> Fallback:
        from dsh_todo.carriers.mcp.fallback import SdkHalf  # the SDK (about a second): only when a message needs it

        return await SdkHalf.start(direct, emit)

    if stop is None:
        stop = asyncio.Event()
        STOPPING.serve(stop.set)
    await serve_lines(direct, start_fallback, stdin=stdin, stdout_fd=stdout_fd, stop=stop)


def leave_to_stand_in() -> None:
    """Leave the process the client started to a stand-in: fork; the child returns and serves, this process only
    passes the stop signals on to it and exits with its status.

    Why: ``codex exec`` ends its servers with SIGTERM to their process group and stdin closed, then, 12 to 14 ms
    later, SIGKILL to the process it started. The server writes ``turn/end`` within 2 ms of the SIGTERM, but on a
    busy machine it may get no CPU before the SIGKILL, and the turn was left to be closed ``interrupted`` (1 run of
    4 with both cores busy). The SIGKILL now ends the stand-in, which holds nothing; the server gets the SIGTERM
    (the group's, and the one passed on) and ends its turn ``completed``. ``uv run`` had done the same by being that
    parent. Called after the boot (a boot error stays the one process's) and before any thread starts (a fork
    copies only the calling one: with others, there is no stand-in)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return
    child = os.fork()
    if child == 0:
        return

    def pass_on(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone: nothing to stop
            os.kill(child, signum)

    for number in STOP_SIGNALS:
        signal.signal(number, pass_on)
    blank = os.open(os.devnull, os.O_RDWR)  # the pipes are the child's alone: its exit is the client's end of file
    os.dup2(blank, 0)
    os.dup2(blank, 1)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def server_version() -> str:
    return __version__


def main(*, storage: Storage, allow_parallel: bool = True, http: bool = False, structured: bool = False,
         host: str = "127.0.0.1", port: int = 8765, idle_timeout: float | None = None,
         telemetry: Telemetry = "disabled") -> int:
    """``dsh-todo mcp``: boot the standard composition persisted to ``storage`` and serve until the client leaves
    (stdio) or the server is stopped (HTTP). Over stdio, in the process's own command
    (:attr:`~dsh_todo.carriers.stopping.Stopping.own_process`), it serves behind a stand-in
    (:func:`leave_to_stand_in`); never in a caller's process (a fork there would run the rest of the caller twice).
    ``telemetry`` on starts the exporter's threads at the boot, so the process that was started serves itself: a
    fork would leave those threads behind."""
    if not http:
        STOPPING.install()
    ctx = open_storage(storage, allow_parallel=allow_parallel, telemetry=telemetry)
    if STOPPING.own_process and not http:
        leave_to_stand_in()
    print(f"dsh-todo mcp: serving {', '.join(ctx.tools.names()) or 'no tools'} "
          f"(allowParallelInProgress: {str(allow_parallel).lower()}), {storage.describe()}",
          file=sys.stderr, flush=True)
    # Over stdio the one session is announced; over HTTP a line per client would grow stderr without bound (and block
    # the server once a pipe nobody reads is full).
    connections = Connections(ctx, on_session=None if http else partial(_announce, storage))
    lost = False
    version = server_version()
    try:
        if http:
            # uvicorn stops on SIGINT and SIGTERM; SIGHUP (a closed terminal) stops it the same way
            from dsh_todo.carriers.mcp import streamable_http  # uvicorn and the SDK: only with --http

            signal.signal(signal.SIGHUP, lambda *_: signal.raise_signal(signal.SIGTERM))
            streamable_http.run(connections, version=version, structured=structured, host=host, port=port,
                                idle_timeout=idle_timeout)
        else:
            asyncio.run(serve_stdio(connections, version=version, structured=structured))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        if not http:
            raise
        print(f"dsh-todo mcp: {ListenError(host, port, exc)}", file=sys.stderr)
        return 2
    finally:
        try:
            connections.close()
        except SessionLogChangedError as exc:
            if not exc.repeat:
                raise
            lost = True  # said when it happened (the call that met it): the exit code alone says it again
        finally:
            ctx.dispose()
            if not http:
                STOPPING.done()
    return 1 if lost else 0


def _announce(storage: Storage, session: CallSession) -> None:
    """Say once, on stderr, where a connection's session is and the command that shows it: MCP clients show their
    models the tool's text, not the result's ``_meta``, so this line is how a person finds the session."""
    where = f"--root {shell_path(os.path.abspath(storage.root))} " if storage.root is not None else ""
    print(f"dsh-todo mcp: session {safe(session.session_id)} ({storage.describe()}); "
          f"show its plan: dsh-todo plan {where}{shell_word(session.session_id)}", file=sys.stderr, flush=True)
