"""``dsh-todo mcp --http`` judges who is asking before what they sent (issue 22 item 7).

The MCP specification requires a server to validate ``Origin`` on every connection (and a loopback server answers
loopback ``Host`` names only: DNS rebinding). A foreign request is answered 421 (its ``Host``) or 403 (its
``Origin``) whatever its body, and its body is never read. Real subprocess, raw sockets on 127.0.0.1, deadlines.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests import needs

needs.module("mcp")

from tests.carriers.mcp.test_mcp_http_sessions import HEADERS, http_server

BODIES = [b"{}", b"{bad", b"[1, 2]", b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', b""]
CONTENT_TYPES = ["application/json", "text/plain"]


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def test_a_foreign_host_or_origin_is_refused_before_its_body_is_judged(tmp_path: Path, cwd: Path) -> None:
    """Repro: ``POST /mcp`` with ``Host: evil.example`` and body ``{}`` was read, parsed and answered 400
    (``Invalid Request: not a JSON-RPC 2.0 message``); with ``Origin: http://evil.example``, the same. Now: 421
    ``Invalid Host header`` and 403 ``Invalid Origin header``, the SDK's own answers, for every body and content
    type."""
    with http_server(tmp_path / "sessions", cwd) as (_process, url), httpx.Client(timeout=20) as http:
        port = urlsplit(url).port
        for body in BODIES:
            for kind in CONTENT_TYPES:
                headers = {**HEADERS, "Content-Type": kind}
                foreign_host = http.post(url, content=body, headers={**headers, "Host": "evil.example"})
                assert (foreign_host.status_code, foreign_host.text) == (421, "Invalid Host header"), (body, kind)
                foreign_origin = http.post(url, content=body, headers={
                    **headers, "Host": f"127.0.0.1:{port}", "Origin": "http://evil.example"})
                assert (foreign_origin.status_code, foreign_origin.text) == (403, "Invalid Origin header"), (body,
                                                                                                            kind)
        # The server's own clients are still judged by their bodies (decision 0018).
        own = http.post(url, content=b"{}", headers={**HEADERS, "Origin": f"http://127.0.0.1:{port}"})
        assert own.status_code == 400
        assert own.json()["error"]["message"] == "Invalid Request: not a JSON-RPC 2.0 message"


def test_a_foreign_request_is_answered_without_waiting_for_its_body(tmp_path: Path, cwd: Path) -> None:
    """Repro: a foreign request declaring a 1 MB JSON body and sending none was left waiting for it (the body is
    read before the Host is looked at). Now its 421 comes at once, before any body byte is sent."""
    with http_server(tmp_path / "sessions", cwd) as (_process, url):
        port = urlsplit(url).port
        assert port is not None
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n"
                         b"Accept: application/json, text/event-stream\r\nContent-Length: 1000000\r\n\r\n")
            sock.settimeout(5)
            started = time.monotonic()
            try:
                head = sock.recv(4096)
            except TimeoutError:
                head = b""
            assert head.startswith(b"HTTP/1.1 421 "), (head, time.monotonic() - started)
