"""The web carrier's application: the page, its static files, two RPC endpoints and the SSE mux.

Routes (all behind :class:`~dsh_todo.carriers.web.security.Guard`):

- ``GET /`` — the page: the board of every session (``/?session=<id>`` opens that session);
- ``GET /static/…`` — its script, styles and labels (plain files, no build step);
- ``POST /api/session.history`` — a history page in the ``client-request`` / ``server-response`` envelopes;
- ``POST /api/session.list`` — the sessions this server can show (live ones first, then the persistence root), each
  with its title, last write, state and plan (:mod:`.rows`);
- ``GET /api/events.mux`` — Server-Sent Events (see :mod:`.mux`), for one session, several (``sessionId`` repeated:
  the board), or every live one; with ``agents=1``, also every change of another coding agent's session.

With ``agents`` chosen (``--agents``), the list and the mux include those agents' sessions, read from their homes
(``agent_homes`` names a home to read instead of an agent's default) by :class:`~.agents.AgentWatch`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dsh_todo.carriers.web.agents import AgentWatch
from dsh_todo.carriers.web.frames import Subscriber
from dsh_todo.carriers.web.history import HistorySource, history_page
from dsh_todo.carriers.web.mux import Hub
from dsh_todo.carriers.web.protocol import (
    DEFAULT_MAX_MESSAGES,
    MAX_BODY_BYTES,
    MAX_MAX_MESSAGES,
    RpcError,
    error_response,
    int_field,
    int_param,
    ok_response,
    parse_request,
    session_id_of,
    too_large,
)
from dsh_todo.carriers.web.security import Guard
from dsh_todo.harness.context import Context

log = logging.getLogger("dsh_todo.web")

STATIC_DIR = Path(__file__).resolve().parent / "static"
PING_SECONDS = 15
MAX_WATCHED = 64
"""Sessions one mux connection may watch."""
IDLE_MINUTES = 10.0
"""A card says "idle" when its session has had an item in progress and no write for this long (``idle_minutes``)."""
PAGE_WORKERS = 2
"""History pages built at once (each a pass over its log, on a thread of its own pool): more requests wait their
turn there instead of taking every thread of asyncio's default pool, which the session list and the followers use."""

JSON = "application/json"


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with ``payload-too-large`` as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


Handler = Callable[[Request], Awaitable[Response]]


def rpc(handler: Handler) -> Handler:
    """Turn :class:`RpcError` (and anything unexpected) into the error envelope."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except RpcError as exc:
            return Response(exc.body(), status_code=exc.status, media_type=JSON)
        except Exception:
            log.exception("%s failed", request.url.path)
            return Response(error_response(None, "internal", "internal server error"), status_code=500,
                            media_type=JSON)

    return wrapped


class WebApp:
    """One booted context served over HTTP. ``asgi`` is what a server runs; ``hub`` exists while it runs."""

    def __init__(self, ctx: Context, *, token: str | None = None, port: int = 0,
                 max_body: int = MAX_BODY_BYTES, agents: Sequence[str] = (),
                 agent_homes: Mapping[str, Path] | None = None, idle_minutes: float = IDLE_MINUTES) -> None:
        self.ctx = ctx
        self.agents = AgentWatch(agents, agent_homes) if agents else None
        self.idle_minutes = idle_minutes
        self.source = HistorySource(ctx, self.agents)
        self.max_body = max_body
        self.hub: Hub | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pages = ThreadPoolExecutor(PAGE_WORKERS, thread_name_prefix="dsh-todo-web-pages")
        routes = [
            Route("/", self.index, methods=["GET"]),
            Route("/api/session.history", rpc(self.history), methods=["POST"]),
            Route("/api/session.list", rpc(self.session_list), methods=["POST"]),
            Route("/api/events.mux", rpc(self.events_mux), methods=["GET"]),
            Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
        ]
        self.starlette = Starlette(routes=routes, lifespan=self._lifespan)
        self.asgi = Guard(self.starlette, token=token, port=port)

    @asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        self.loop = asyncio.get_running_loop()
        hub = Hub(self.source, self.loop)
        hub.start()
        self.hub = hub
        if self.agents is not None:
            self.agents.on_change = hub.agents_changed
            self.agents.start()
        try:
            yield
        finally:
            if self.agents is not None:
                self.agents.stop()
            hub.close()
            self.pages.shutdown(wait=False, cancel_futures=True)

    # -- routes ---------------------------------------------------------------------------------------------

    async def index(self, _request: Request) -> Response:
        html = (STATIC_DIR / "index.html").read_bytes()
        return Response(html, media_type="text/html; charset=utf-8", headers={"cache-control": "no-cache"})

    async def history(self, request: Request) -> Response:
        rpc_id, payload = parse_request(await read_body(request, self.max_body), "session.history")
        try:
            session_id = session_id_of(payload.get("sessionId"), rpc_id=rpc_id)
            before = int_field(payload, "beforeSeq", minimum=0, rpc_id=rpc_id)
            max_messages = int_field(payload, "maxMessages", minimum=1, maximum=MAX_MAX_MESSAGES, rpc_id=rpc_id)
        except RpcError as exc:
            exc.rpc_id = rpc_id
            raise
        limit = DEFAULT_MAX_MESSAGES if max_messages is None else max_messages

        def build() -> bytes:
            return ok_response(rpc_id, history_page(self.source, session_id, before=before, max_messages=limit))

        try:
            body = await asyncio.get_running_loop().run_in_executor(self.pages, build)
        except RpcError as exc:
            exc.rpc_id = rpc_id
            raise
        return Response(body, media_type=JSON)

    async def session_list(self, request: Request) -> Response:
        rpc_id, _payload = parse_request(await read_body(request, self.max_body), "session.list")
        try:
            rows = await asyncio.to_thread(self.source.list_rows)
        except RpcError as exc:
            exc.rpc_id = rpc_id
            raise
        value: dict[str, Any] = {"sessions": rows, "idleAfterMs": int(self.idle_minutes * 60_000)}
        if self.agents is not None:
            value["agents"] = self.agents.agents
        return Response(ok_response(rpc_id, value), media_type=JSON)

    async def events_mux(self, request: Request) -> Response:
        raw_ids = request.query_params.getlist("sessionId")
        agents = request.query_params.get("agents") == "1"
        if len(raw_ids) > 1 or agents:
            return self._watch_many(raw_ids, request.query_params.getlist("afterSeq"), agents=agents)
        raw_id = request.query_params.get("sessionId")
        session_id = None if raw_id is None else session_id_of(raw_id)
        after_seq = int_param(request.query_params.get("afterSeq"), "afterSeq", minimum=-1)
        if after_seq is not None and session_id is None:
            raise RpcError("invalid-request", "afterSeq needs a sessionId")
        last_event_id = int_param(request.headers.get("last-event-id"), "Last-Event-ID", minimum=-1)
        if last_event_id is not None and session_id is not None:  # a reconnection: resume after what it has
            after_seq = last_event_id if after_seq is None else max(after_seq, last_event_id)
        hub = self.hub
        if hub is None:
            raise RpcError("unavailable", "the server is starting or stopping", status=503)
        subscriber = Subscriber(session_id)
        stream: Any = hub.stream(subscriber, after_seq)
        return EventSourceResponse(stream, ping=PING_SECONDS, sep="\n")

    def _watch_many(self, raw_ids: list[str], raw_afters: list[str], *, agents: bool = False) -> Response:
        """``?sessionId=a&sessionId=b…`` (at most :data:`MAX_WATCHED`), each with its ``afterSeq`` in the same order
        (all or none): one connection for the board's sessions, since a browser opens only a few per server; with
        ``agents=1`` (any number of ids, none included) it also carries the other agents' changes."""
        if len(raw_ids) > MAX_WATCHED:
            raise RpcError("invalid-request", f"a connection watches at most {MAX_WATCHED} sessions")
        ids = [session_id_of(raw) for raw in raw_ids]
        if len(set(ids)) != len(ids):
            raise RpcError("invalid-request", "each sessionId may be named once")
        if raw_afters and len(raw_afters) != len(ids):
            raise RpcError("invalid-request", "afterSeq must be given once per sessionId, or not at all")
        afters = [int_param(raw, "afterSeq", minimum=-1) for raw in raw_afters] or [None] * len(ids)
        hub = self.hub
        if hub is None:
            raise RpcError("unavailable", "the server is starting or stopping", status=503)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        subscribers = [Subscriber(session_id, queue=queue) for session_id in ids]
        watcher = Subscriber(None, queue=queue) if agents else None
        stream: Any = hub.stream_many(subscribers, afters, watcher)
        return EventSourceResponse(stream, ping=PING_SECONDS, sep="\n")
