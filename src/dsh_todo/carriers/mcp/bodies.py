"""The HTTP MCP server's request bodies, judged by the same rules as the stdio server's lines before the SDK sees them.

The SDK's streamable HTTP transport answers a body that is not a JSON-RPC message with pydantic's report: 4 to 11
lines naming every member of its message union, with links to pydantic's site (``Validation error: 11 validation
errors for union[…]`` for ``{}``), and text that is not JSON with its JSON parser's words. Neither is one line, nor
stable across versions. :class:`CheckedBodies` sits in front of the SDK's app: a JSON ``POST`` body is read (at most
:data:`~dsh_todo.carriers.mcp.wire.MAX_LINE` bytes, the SDK's own limit) and judged as the stdio transport judges a
line (:mod:`dsh_todo.carriers.jsonrpc`'s rules, then the SDK's models): what they refuse gets the stdio server's
answer, one line of JSON-RPC, with HTTP 400; what they take is replayed to the SDK unchanged, as is every other
request (a larger body, which the SDK answers 413; another method; another content type).

Who is asking is judged before what they sent: the SDK checks ``Host`` and ``Origin`` (DNS rebinding) only in its
transport, after this middleware has read and judged the body, so a foreign request with a bad body was answered
400. With ``security`` (the settings the SDK's transport is given), every request's ``Host`` and ``Origin`` are
checked first by the SDK's own check (:class:`~mcp.server.transport_security.TransportSecurityMiddleware`), and a
foreign one gets its 421 or 403 without a byte of its body read (the MCP specification: validate ``Origin`` on every
connection).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.message import SessionMessage
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dsh_todo.carriers import jsonrpc
from dsh_todo.carriers.mcp.fallback import validated
from dsh_todo.carriers.mcp.wire import MAX_LINE, error_line

NO_MESSAGE: Final = jsonrpc.Refusal(None, jsonrpc.INVALID_REQUEST, jsonrpc.NOT_A_MESSAGE)
"""The answer to a body the stdio server would leave unanswered (an invalid notification, a response-like object):
over HTTP every request gets a response."""


class CheckedBodies:
    """ASGI middleware: a refused JSON body is answered here (see the module's docstring)."""

    def __init__(self, app: ASGIApp, *, limit: int = MAX_LINE,
                 security: TransportSecuritySettings | None = None) -> None:
        self.app = app
        self.limit = limit
        self.security = None if security is None else TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.security is not None:
            foreign = await self.security.validate_request(Request(scope), is_post=False)  # Host and Origin only
            if foreign is not None:
                await foreign(scope, receive, send)
                return
        if scope["type"] != "http" or scope["method"] != "POST" or not _json(Headers(scope=scope)):
            await self.app(scope, receive, send)
            return
        read: deque[Message] = deque()
        body = bytearray()
        complete = False
        while len(body) <= self.limit:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                complete = True
                break
        if complete and len(body) <= self.limit:
            answer = refusal(bytes(body))
            if answer is not None:
                await Response(answer, status_code=400, media_type="application/json")(scope, receive, send)
                return

        async def replay() -> Message:
            return read.popleft() if read else await receive()

        await self.app(scope, replay, send)


def refusal(body: bytes) -> bytes | None:
    """The answer to ``body`` when the stdio server's rules refuse it as a line, else ``None`` (the SDK's to serve).
    A blank body is the SDK's too (its own parse error)."""
    checked = jsonrpc.check(body, max_line=MAX_LINE)
    if checked is None:
        return None
    judged = checked if isinstance(checked, jsonrpc.Refusal) else validated(checked)
    if isinstance(judged, SessionMessage):
        return None
    return error_line(*(judged or NO_MESSAGE))


def _json(headers: Headers) -> bool:
    """Whether the request says its body is JSON, as the SDK checks it (any ``application/json`` part)."""
    kind = headers.get("content-type", "")
    return any(part.strip() == "application/json" for part in kind.split(";")[0].split(","))
