"""Who may talk to the page's server, and what every response tells the browser (USERS.md #7: plans are untrusted).

- **Loopback by default.** Bound to a loopback address with no token, the server answers only requests whose
  ``Host`` is a loopback name, which defeats DNS rebinding (a hostile page re-pointing its own name at 127.0.0.1).
- **A token anywhere else.** Bound to any other address, a token is required at start-up, and every request must
  carry it: ``Authorization: Bearer <token>``, the ``token`` query parameter (the printed URL has it), or the cookie
  the page receives when it is opened with that URL (``HttpOnly``, ``SameSite=Strict``), which lets the page's own
  ``fetch`` and ``EventSource`` calls through without handling the token in script.
- **Cross-origin writes refused.** A ``POST`` whose ``Origin`` is not this server is refused, and API bodies must be
  ``application/json`` (which a cross-site form cannot send without a preflight this server never grants).
- **Headers.** A strict Content-Security-Policy (scripts and styles only from this server, no inline code, no
  frames), ``nosniff``, no referrer. The client renders model text only as text; the policy is a second wall.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Final
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dsh_todo.carriers.web.protocol import error_response

CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
              "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

SECURITY_HEADERS: Final = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
)

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
MIN_TOKEN_CHARS: Final = 16
TOKEN_CHARS: Final = re.compile(rf"[A-Za-z0-9._~+/=-]{{{MIN_TOKEN_CHARS},512}}")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def binding_problem(host: str, token: str | None) -> str | None:
    """Why ``host``/``token`` may not be served, or ``None`` when they may."""
    if token is not None:
        if not TOKEN_CHARS.fullmatch(token):
            return (f"the token must be at least {MIN_TOKEN_CHARS} characters from A-Z a-z 0-9 . _ ~ + / = - "
                    "(for example: python -c \"import secrets; print(secrets.token_urlsafe())\")")
        return None
    if not is_loopback(host):
        return (f"binding {host} exposes the sessions beyond this machine; pass --token T (every request must then "
                "carry it), or bind 127.0.0.1")
    return None


def cookie_name(port: int) -> str:
    """Per port, so two servers on one host do not overwrite each other's cookie."""
    return f"dsh_todo_token_{port}"


def _host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """ASGI wrapper enforcing the rules above for every HTTP request."""

    def __init__(self, app: ASGIApp, *, token: str | None, port: int) -> None:
        self.app = app
        self.token = token.encode() if token is not None else None
        self.port = port
        self.cookie = cookie_name(port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        path: str = scope["path"]
        api = path.startswith("/api/")
        set_cookie = False
        if self.token is None:
            if not is_loopback(_host_name(headers.get("host", ""))):
                await _refuse(send, 403, api, "forbidden-host",
                              "this server answers loopback host names only (127.0.0.1, localhost, [::1])")
                return
        else:
            presented, from_query = self._presented(scope, headers)
            if presented is None or not hmac.compare_digest(presented, self.token):
                await _refuse(send, 401, api, "unauthorized",
                              "this server needs its access token: open the URL it printed (…/?token=…)")
                return
            set_cookie = from_query and not api
        if scope["method"] == "POST":
            origin = headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1].lower() != headers.get("host", "").lower():
                await _refuse(send, 403, api, "forbidden-origin", "cross-origin requests are not accepted")
                return
            content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if api and content_type != "application/json":
                await _refuse(send, 415, api, "unsupported-media-type", "request bodies must be application/json")
                return
        extra: list[tuple[bytes, bytes]] = list(SECURITY_HEADERS)
        if api:
            extra.append((b"cache-control", b"no-store"))
        if set_cookie and self.token is not None:
            extra.append((b"set-cookie", f"{self.cookie}={self.token.decode()}; Path=/; HttpOnly; "
                                         "SameSite=Strict".encode()))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *(h for h in extra if h[0] not in present)]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _presented(self, scope: Scope, headers: dict[str, str]) -> tuple[bytes | None, bool]:
        """The token the request carries and whether it came in the query string."""
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return auth[7:].strip().encode(), False
        query = scope.get("query_string", b"").decode("latin-1")
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == "token":
                return value.encode(), True
        cookie_header = headers.get("cookie")
        if cookie_header:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(cookie_header)
            except Exception:
                return None, False
            morsel = jar.get(self.cookie)
            if morsel is not None:
                return morsel.value.encode(), False
        return None, False


async def _refuse(send: Send, status: int, api: bool, code: str, message: str) -> None:
    if api:
        body = error_response(None, code, message)
        content_type = b"application/json"
    else:
        body = f"{status}: {message}\n".encode()
        content_type = b"text/plain; charset=utf-8"
    headers: Iterable[tuple[bytes, bytes]] = [(b"content-type", content_type),
                                              (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": body})
