"""SIGPIPE: filters a person pipes into ``head`` stop quietly; servers never die of a client that hung up (issue 13).

Every server here is driven on 127.0.0.1 only, with a bounded number of clients and a deadline, and is stopped by the
test itself.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.turns import Turns
from dsh_todo.jsonutil import dumps
from dsh_todo.standard import open_runtime
from dsh_todo.testing import stop

SIGPIPE_BIT = 1 << (signal.SIGPIPE - 1)
HANGUPS = 60
"""Clients that hang up mid-stream per server: the issue's server died after about 40."""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsh_todo.cli", *args]


def ignores_sigpipe(pid: int) -> bool:
    """Whether the process ``pid`` ignores SIGPIPE (``SigIgn`` in ``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & SIGPIPE_BIT)
    raise AssertionError("no SigIgn line")


@contextlib.contextmanager
def running(argv: list[str], cwd: Path, *, ready: str, stream: str = "stderr") -> Iterator[tuple[
        subprocess.Popen[str], str]]:
    """Start a server and wait (bounded) for the line that says it serves; yields the process and that line."""
    process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        pipe = process.stderr if stream == "stderr" else process.stdout
        assert pipe is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(pipe.readline, "")), daemon=True)
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline:
            line = pipe.readline()
            if not line or ready in line:
                break
        assert ready in line, f"{argv[3:]} did not start: {line!r}"
        reader.start()
        yield process, line
    finally:
        stop(process)


def write_steadily(root: Path, session_id: str, stop_at: threading.Event, ready: threading.Event) -> threading.Thread:
    """Another agent, appending to ``session_id`` under ``root`` until told to stop (bounded); ``ready`` is set once
    the session has a history long enough that replaying it to a client takes many writes."""

    def run() -> None:
        import asyncio

        ctx = open_runtime(root)
        try:
            session = ctx.sessions.create(session_id, cwd="/project")
            turns = Turns.of(ctx, Agent(session_id, session))
            count = 0
            while not stop_at.is_set() and count < 5000:
                count += 1
                call = ToolCallRequest(f"call_{count}", "todo_write",
                                       dumps({"todos": [{"content": f"step {count} " + "x" * 200,
                                                         "status": "in_progress"}]}))
                asyncio.run(turns.call_alone(call))
                if count >= 300:
                    ready.set()
                    time.sleep(0.005)
            turns.close()
        finally:
            ctx.dispose()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def hang_up_mid_stream(process: subprocess.Popen[str], port: int, request: bytes, count: int) -> None:
    """``count`` clients, one after another: each sends ``request``, reads the first bytes of the answer and closes
    its end while the server is still writing. Stops early when the server is gone."""
    for _ in range(count):
        if process.poll() is not None:
            return
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(request)
                sock.recv(512)
                sock.shutdown(socket.SHUT_RDWR)  # the rest of the stream is left unread: the server meets a reset
        except OSError:
            if process.wait(5) is not None:
                return  # the server died under this client: the caller's assertion says how
            raise
        time.sleep(0.01)


def test_web_survives_sse_clients_that_hang_up_mid_stream(tmp_path: Path) -> None:
    """Repro (issue 13 item 1): ``dsh-todo web`` while a session streams; about 40 SSE clients that closed normally
    killed it with -13, because ``main`` had reset SIGPIPE to the default for every subcommand."""
    root = tmp_path / "sessions"
    done, ready = threading.Event(), threading.Event()
    writer = write_steadily(root, "streaming", done, ready)
    try:
        assert ready.wait(60)
        with running(cli("web", "--root", str(root), "--port", "0"), tmp_path, ready="http://", stream="stdout") as (
                process, url):
            assert ignores_sigpipe(process.pid)
            port = int(url.strip().rstrip("/").rsplit(":", 1)[1])
            request = (f"GET /api/events.mux?sessionId=streaming HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                       "Accept: text/event-stream\r\n\r\n").encode()
            hang_up_mid_stream(process, port, request, HANGUPS)
            time.sleep(0.5)
            assert process.poll() is None, f"dsh-todo web died: {process.returncode}"
    finally:
        done.set()
        writer.join(30)


def test_mcp_http_survives_clients_that_hang_up_mid_request(tmp_path: Path) -> None:
    """The same for ``dsh-todo mcp --http``: clients that hang up before reading their answer."""
    with running(cli("mcp", "--http", "--port", "0", "--root", str(tmp_path / "sessions")), tmp_path,
                 ready="listening on") as (process, line):
        assert ignores_sigpipe(process.pid)
        port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        body = dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}}}).encode()
        request = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                   f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        hang_up_mid_stream(process, port, request + body, HANGUPS)
        time.sleep(0.5)
        assert process.poll() is None, f"dsh-todo mcp --http died: {process.returncode}"


@pytest.mark.parametrize("argv,ready", [
    (["mcp"], "dsh-todo mcp: serving"),
    (["acp", "--script", "SCRIPT"], "dsh-todo acp: model"),
    (["demo", "--web", "--pace", "5"], "watch it live"),
], ids=["mcp-stdio", "acp", "demo-web"])
def test_every_server_ignores_sigpipe(tmp_path: Path, argv: list[str], ready: str) -> None:
    """A server writes to sockets and pipes whose reader may go away at any moment: it must get ``EPIPE`` (and
    handle it), not be killed."""
    script = tmp_path / "script.json"
    script.write_text('[{"text": "done"}]')
    argv = [str(script) if arg == "SCRIPT" else arg for arg in argv]
    stream = "stdout" if argv[0] == "demo" else "stderr"
    with running(cli(*argv, "--root", str(tmp_path / "sessions")), tmp_path, ready=ready, stream=stream) as (
            process, _line):
        assert ignores_sigpipe(process.pid)


def test_events_piped_into_head_stops_quietly(tmp_path: Path) -> None:
    """``dsh-todo events LOG | head -1``: the reader goes away after one line; the filter stops without a word."""
    root = tmp_path / "sessions"
    ctx = open_runtime(root)
    try:
        session = ctx.sessions.create("long", cwd="/project")
        turns = Turns.of(ctx, Agent("long", session))
        import asyncio

        for index in range(400):
            call = ToolCallRequest(f"call_{index}", "todo_write",
                                   dumps({"todos": [{"content": f"step {index} " + "x" * 400, "status": "pending"}]}))
            asyncio.run(turns.call_alone(call))
        log = ctx.session_persistence.locate("long")
        turns.close()
    finally:
        ctx.dispose()
    assert log is not None
    result = subprocess.run(f"{sys.executable} -m dsh_todo.cli events '{log}' | head -1", shell=True,
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.stdout.startswith("{")
    assert result.stdout.count("\n") == 1
    assert result.stderr == ""
