"""``dsh-todo mcp --http`` lets go of a client's session when the client is done (issue 13 item 3).

Each MCP session (``Mcp-Session-Id``) holds a DSH session: its turn and its log's writer lock (an open file). It is
released on DELETE, when the session ends any other way, and after ``--idle-timeout`` seconds without a request; so
the log can be resumed elsewhere at once, and the server's file descriptors and memory stay flat however many
clients come and go. Everything here runs against a real subprocess on 127.0.0.1, with bounded loops.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import needs

needs.module("mcp")

from dsh_todo.harness.persistence import SessionLockedError
from dsh_todo.standard import open_runtime
from dsh_todo.testing import rpc_result, stop

CLIENTS = 300
"""Sequential clients in the fd test (``benchmarks/mcp_soak.py`` runs 2,000)."""

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOL = "2025-06-18"


@contextlib.contextmanager
def http_server(root: Path, cwd: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    env = dict(os.environ)
    env.pop("DSH_TODO_ROOT", None)
    process = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "mcp", "--http", "--port", "0", "--root",
                                str(root), *extra], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        url = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not url:
            line = process.stderr.readline()
            assert line, "the server exited before listening"
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:")
        yield process, url
    finally:
        stop(process)




class RawClient:
    """One handshake-era MCP client: initialize, calls, and (unless it vanishes) DELETE."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http, self.url = http, url
        init = self.http.post(url, headers=HEADERS, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        rpc_result(init)
        self.headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
                        "mcp-protocol-version": PROTOCOL}
        self.http.post(url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, *contents: str) -> str:
        """One ``todo_write`` call; the DSH session id it was written to."""
        todos = [{"content": content, "status": "in_progress"} for content in contents]
        result = rpc_result(self.http.post(self.url, headers=self.headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "todo_write", "arguments": {"todos": todos}}}))
        assert not result["isError"], result
        return str(result["_meta"]["dsh-todo/sessionId"])

    def delete(self) -> None:
        assert self.http.delete(self.url, headers=self.headers).status_code in (200, 204)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def resumable(root: Path, session_id: str) -> list[dict[str, Any]] | None:
    """The session's events if another process can take its writer lock now, else ``None``."""
    ctx = open_runtime(root)
    try:
        try:
            loaded = ctx.session_persistence.load(session_id)
        except SessionLockedError:
            return None
        events = [dict(event) for event in loaded.events]
        ctx.session_persistence.release(session_id)
        return events
    finally:
        ctx.dispose()


def last_turn_event(events: list[dict[str, Any]]) -> Any:
    """The data of the last turn boundary: a ``turn/end`` (the turn was closed, not recovered as interrupted)."""
    turn = [e for e in events if e["type"] in ("turn/start", "turn/end")][-1]
    assert turn["type"] == "turn/end", turn
    return turn["data"]


def wait_for(predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def test_delete_releases_the_session_and_closes_its_turn(tmp_path: Path, cwd: Path) -> None:
    """Repro: after a client's DELETE its session kept its lock file open until the server stopped, so the log could
    not be resumed elsewhere, and its turn stayed open."""
    root = tmp_path / "sessions"
    with http_server(root, cwd) as (_process, url), httpx.Client(timeout=20) as http:
        client = RawClient(http, url)
        session_id = client.write("ship")
        assert resumable(root, session_id) is None  # held while the client is connected
        client.delete()
        events = wait_for(lambda: resumable(root, session_id), 10)
        assert events is not None, "the session is still held after DELETE"
        assert last_turn_event(events) == {"turn": 1, "reason": {"kind": "completed"}}


def test_a_client_that_vanishes_is_released_after_the_idle_timeout(tmp_path: Path, cwd: Path) -> None:
    """A client that never says goodbye (HTTP has no connection to lose): ``--idle-timeout`` later its session is
    released and its turn closed."""
    root = tmp_path / "sessions"
    with http_server(root, cwd, "--idle-timeout", "1") as (_process, url), httpx.Client(timeout=20) as http:
        session_id = RawClient(http, url).write("ship")
        events = wait_for(lambda: resumable(root, session_id), 15)
        assert events is not None, "the idle session is still held"
        assert last_turn_event(events) == {"turn": 1, "reason": {"kind": "completed"}}


def test_idle_timeout_must_be_a_positive_number(tmp_path: Path) -> None:
    for bad in ("0", "-1", "soon", "nan", "inf"):
        result = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "mcp", "--http", "--idle-timeout", bad,
                                 "--root", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, bad
        assert "--idle-timeout: a positive number of seconds" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_fds_stay_flat_over_hundreds_of_sequential_clients(tmp_path: Path, cwd: Path) -> None:
    """Repro: every client's session kept its lock file open, so at the default fd limit the server died after about
    1000 clients. Bounded: :data:`CLIENTS` clients, each connects, writes and DELETEs."""
    root = tmp_path / "sessions"
    with http_server(root, cwd) as (process, url), httpx.Client(timeout=20) as http:
        client = RawClient(http, url)  # warm up: imports, the first session, the connection pool
        client.write("warm up")
        client.delete()
        time.sleep(0.3)
        before = open_fds(process.pid)
        for index in range(CLIENTS):
            client = RawClient(http, url)
            client.write(f"task {index}")
            client.delete()
        after = wait_for(lambda: open_fds(process.pid) <= before + 4 and open_fds(process.pid), 10)
        assert process.poll() is None
        assert open_fds(process.pid) <= before + 4, f"{before} fds before, {open_fds(process.pid)} after {CLIENTS}"
        assert after


BAD_BODIES = [  # (body, the one-line JSON-RPC answer it gets, with HTTP 400)
    (b"{bad", {"id": None, "error": {"code": -32700,
                                     "message": "Parse error: Expecting property name enclosed in double quotes at "
                                                "column 2"}}),
    (b"\xff\xfe", {"id": None, "error": {"code": -32700, "message": "Parse error: not UTF-8 (byte 0)"}}),
    (b"[1, 2]", {"id": None, "error": {"code": -32600, "message": "Invalid Request: a message is a JSON object"}}),
    (b"{}", {"id": None, "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message"}}),
    (b'{"jsonrpc":"2.0","id":4,"method":7}',
     {"id": 4, "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 request"}}),
    (b'{"jsonrpc":"2.0","method":7}',
     {"id": None, "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message"}}),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":' + b"[" * 600 + b"]" * 600 + b"}",
     {"id": 5, "error": {"code": -32600, "message": "Invalid Request: JSON nested deeper than 512 levels"}}),
]


def test_a_body_that_is_no_message_gets_a_one_line_json_rpc_error(tmp_path: Path, cwd: Path) -> None:
    """Repro: ``{}`` or ``[1, 2]`` POSTed to ``/mcp`` got the SDK's pydantic report, 4 to 11 lines with links to
    pydantic's site (``Validation error: 11 validation errors for union[…]``), and text that is not JSON the JSON
    parser's own words: neither one line nor stable. Each bad body now gets the stdio server's answer, one line,
    with HTTP 400; the server goes on serving."""
    with http_server(tmp_path / "sessions", cwd) as (_process, url), httpx.Client(timeout=20) as http:
        for body, want in BAD_BODIES:
            response = http.post(url, content=body, headers=HEADERS)
            assert response.status_code == 400, body
            assert response.json() == {"jsonrpc": "2.0", **want}, body
        initialized = http.post(url, headers=HEADERS, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert initialized.status_code == 200
        assert http.post(url, content=b"{}", headers={"Content-Type": "text/plain"}).status_code == 400  # the SDK's


def test_an_sdk_that_moved_the_connection_refuses_to_serve_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one private name the HTTP server reads (``ServerSession._connection``, where a client's agent session is
    found): an SDK without it must stop the server at start-up with a message naming the SDK's version, never fall
    back to one session shared by every client."""
    from importlib import metadata

    from mcp.server.session import ServerSession

    from dsh_todo.carriers.mcp.server import check_sdk

    check_sdk()
    original = ServerSession.__init__

    def moved(self: ServerSession, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.__dict__["_conn"] = self.__dict__.pop("_connection")

    monkeypatch.setattr(ServerSession, "__init__", moved)
    with pytest.raises(RuntimeError, match=rf"installed mcp SDK \({re.escape(metadata.version('mcp'))}\)"):
        check_sdk()
