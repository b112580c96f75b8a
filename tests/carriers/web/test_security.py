"""Who may talk to the server (loopback by default, a token elsewhere) and what every answer tells the browser."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.carriers.web.security import CSP, binding_problem, is_loopback
from dsh_todo.carriers.web.server import BackgroundServer, serve_in_background
from dsh_todo.standard import open_runtime
from tests.carriers.web.conftest import Web, _serve

TOKEN = "s3cret-token-0123456789"


def request(host: str, method: str, path: str, *, headers: dict[str, str] | None = None,
            body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, timeout=20)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


HISTORY = json.dumps({"type": "client-request", "rpcId": "r", "method": "session.history",
                      "payload": {"sessionId": "s"}}).encode()
JSON_HEADERS = {"content-type": "application/json"}


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Web]:
    """Served on loopback but with a token: every request must carry it."""
    yield from _serve(tmp_path, token=TOKEN)


def test_loopback_is_the_default_and_anything_else_needs_a_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.8.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.com")
    assert binding_problem("127.0.0.1", None) is None
    problem = binding_problem("0.0.0.0", None)
    assert problem is not None and "--token" in problem
    assert binding_problem("0.0.0.0", TOKEN) is None
    short = binding_problem("0.0.0.0", "short")
    assert short is not None and "at least 16" in short
    ctx = open_runtime(None)
    try:
        with pytest.raises(ValueError, match="--token"):
            serve_in_background(ctx, host="0.0.0.0")
    finally:
        ctx.dispose()


def test_every_answer_carries_the_security_headers(web: Web) -> None:
    for method, path, body in [("GET", "/", None), ("GET", "/static/app.js", None),
                               ("POST", "/api/session.history", HISTORY)]:
        status, headers, _ = request(web.host, method, path, body=body, headers=JSON_HEADERS)
        assert status in (200, 404), path
        assert headers["content-security-policy"] == CSP
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP


def test_a_loopback_server_refuses_foreign_host_names(web: Web) -> None:
    status, _, body = request(web.host, "GET", "/", headers={"host": "attacker.example:80"})
    assert status == 403 and b"loopback host names only" in body
    status, _, body = request(web.host, "POST", "/api/session.history", body=HISTORY,
                              headers={**JSON_HEADERS, "host": "rebind.attacker.example"})
    assert status == 403 and json.loads(body)["result"]["error"]["code"] == "forbidden-host"
    for host in ("localhost:1", f"127.0.0.1:{web.server.port}", "[::1]:9"):
        assert request(web.host, "GET", "/", headers={"host": host})[0] == 200, host


def test_cross_origin_posts_are_refused(web: Web) -> None:
    status, _, body = request(web.host, "POST", "/api/session.history", body=HISTORY,
                              headers={**JSON_HEADERS, "origin": "http://attacker.example"})
    assert status == 403 and json.loads(body)["result"]["error"]["code"] == "forbidden-origin"
    status, _, _ = request(web.host, "POST", "/api/session.history", body=HISTORY,
                           headers={**JSON_HEADERS, "origin": f"http://{web.host}"})
    assert status == 404  # allowed through; the session simply does not exist


def test_with_a_token_every_request_must_carry_it(guarded: Web) -> None:
    host = guarded.host
    for method, path, body in [("GET", "/", None), ("GET", "/static/app.js", None),
                               ("GET", "/api/events.mux", None), ("POST", "/api/session.history", HISTORY)]:
        status, _, answer = request(host, method, path, body=body, headers=JSON_HEADERS)
        assert status == 401, path
        if path.startswith("/api/"):
            assert json.loads(answer)["result"]["error"]["code"] == "unauthorized"
    bad = request(host, "GET", "/", headers={"authorization": "Bearer wrong-token-0123456789"})
    assert bad[0] == 401
    ok: Any = request(host, "POST", "/api/session.history", body=HISTORY,
                      headers={**JSON_HEADERS, "authorization": f"Bearer {TOKEN}"})
    assert ok[0] == 404  # authorized; the session does not exist
    status, headers, _ = request(host, "GET", f"/?token={TOKEN}")
    assert status == 200
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"dsh_todo_token_{guarded.server.port}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    name_value = cookie.split(";", 1)[0]
    assert request(host, "GET", "/static/app.js", headers={"cookie": name_value})[0] == 200
    assert request(host, "GET", "/", headers={"host": "anything.example", "cookie": name_value})[0] == 200


def test_the_printed_url_carries_the_token(tmp_path: Path) -> None:
    ctx = open_runtime(tmp_path)
    server = BackgroundServer(ctx, token=TOKEN)
    try:
        url = server.start()
        assert url == f"http://127.0.0.1:{server.port}/?token={TOKEN}"
    finally:
        server.stop()
        ctx.dispose()


def test_a_browser_opened_with_the_printed_url_works_and_forgets_the_token(guarded: Web, new_page: Any) -> None:
    from playwright.sync_api import expect

    from tests.carriers.web.conftest import build_fixture_session

    build_fixture_session(guarded.ctx)
    page = new_page("en-US")
    page.goto(guarded.url(f"/?session=fx-alpha&token={TOKEN}"))
    expect(page.locator("body")).to_have_attribute("data-stream", "open")  # fetch and EventSource via the cookie
    expect(page.get_by_test_id("todo-progress")).to_have_text(
        "1 completed\u2002·\u20022 in progress\u2002·\u20021 pending")
    expect(page).to_have_url(guarded.url("/?session=fx-alpha"))
    stranger = new_page("en-US")
    response = stranger.goto(guarded.url("/?session=fx-alpha"))
    assert response is not None and response.status == 401
