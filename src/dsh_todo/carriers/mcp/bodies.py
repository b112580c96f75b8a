"""The HTTP MCP server's request bodies, judged by the same rules as the stdio server's lines before the SDK sees them.

The SDK's streamable HTTP transport answers a body that is not a JSON-RPC message with pydantic's report: 4 to 11
lines naming every member of its message union, with links to pydantic's site (``Validation error: 11 validation
errors for union[…]`` for ``{}``), and text that is not JSON with its JSON parser's words. Neither is one line, nor
stable across versions. :class:`CheckedBodies` sits in front of the SDK's app: a JSON ``POST`` body is read (at most
:data:`~dsh_todo.carriers.mcp.wire.MAX_LINE` bytes, the SDK's own limit) and judged as the stdio transport judges a
line (:mod:`dsh_todo.carriers.jsonrpc`'s rules, then the SDK's models): what they refuse gets the stdio server's
answer, one line of JSON-RPC, with HTTP 400; what they take is replayed to the SDK unchanged, as is every other
request (a larger body, which the SDK answers 413; another method; another content type).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from mcp.shared.message import SessionMessage
from starlette.datastructures import Headers
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

    def __init__(self, app: ASGIApp, *, limit: int = MAX_LINE) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
