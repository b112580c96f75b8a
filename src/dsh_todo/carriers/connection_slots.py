"""A fixed number of connection slots for an HTTP server, each held only by a connection that is asking something.

uvicorn gives a connection no deadline until its first response (its keep-alive timer starts then, and any byte
received stops it), and accepts as many connections as the process has file descriptors. So clients that connect
and send nothing, or half a request line, held every descriptor: past the fd limit no one else got in, and asyncio
wrote a traceback (``socket.accept() out of system resource``) each time it retried accepting. ``dsh-todo web`` and
``dsh-todo mcp --http`` both serve through :class:`ConnectionSlots` (decision 0019):

- **A deadline for every request.** A connection must complete a request (its head, and its body when it declares
  one) within :data:`REQUEST_TIMEOUT_S` of being opened or of its last response, or it is closed. A request being
  answered (a history page being built, an event stream) has no deadline.
- **A cap below the fd limit.** At most ``cap`` connections are open. When another arrives at the cap, the open
  connection that has waited longest without a request in progress is closed to make room, so a new client always
  gets in ahead of the idle ones; when every open connection is being answered, the newcomer is answered 503.
- **Said once.** The first time an episode crowds the cap, one line says so (the episode ends when half the slots
  are free again); asyncio's accept failures, should the fds run out anyway, are one line per episode too.

The request's progress is seen from the ASGI side (the application is called once a request's head is complete,
and reads its body and sends its response through us); the connection is found there through a context variable
that the protocol sets while uvicorn's protocol handles the bytes it receives, since uvicorn starts the request's
task there and a task inherits its creator's context.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import resource
from typing import TYPE_CHECKING, Any, Final

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
    from uvicorn.server import ServerState

REQUEST_TIMEOUT_S: Final = 5.0
"""Seconds a connection has to complete a request (uvicorn's own keep-alive timeout is 5 s too). A real client
sends its request at once; an idle browser socket (a preconnect) is closed like any other and reopened on need."""

FD_RESERVE: Final = 128
"""Descriptors kept for everything but connections: the listener, the event loop, stdio, logs being read, locks."""

_SERVING: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar("dsh_todo_connection", default=None)

_BUSY_TEXT: Final = b"503: every connection is being answered; try again\n"
_BUSY: Final = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT))


def fd_limit() -> int | None:
    """The process's soft limit on open files (``None``: unlimited or unknown)."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft


def connection_cap(fds_each: int = 1, held: int = 0) -> int:
    """How many connections fit under the open-file limit when each may cost ``fds_each`` descriptors and ``held``
    more are the server's own (beside :data:`FD_RESERVE`)."""
    soft = fd_limit()
    if soft is None:
        return 10_000
    return max(16, min(10_000, (soft - FD_RESERVE - held) // fds_each))


class ConnectionSlots:
    """The slots of one server: its :meth:`protocol` for uvicorn's ``http`` option, and :meth:`app` around its
    application (see the module's docstring)."""

    def __init__(self, cap: int, *, label: str, log: logging.Logger,
                 timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.cap = max(1, cap)
        self.label = label
        self.log = log
        self.timeout = timeout
        self.open: set[_Connection] = set()
        self.waiting: dict[_Connection, None] = {}
        """Open connections with no request in progress, longest waiting first."""
        self.crowded = False
        self.accept_failing = False

    # -- wiring ---------------------------------------------------------------------------------------------

    def config(self, app: ASGIApp, **options: Any) -> uvicorn.Config:
        """A uvicorn configuration serving ``app`` through these slots (``options`` are uvicorn's own)."""
        return uvicorn.Config(self.app(app), http=self.protocol(), backlog=self.backlog, **options)

    @property
    def backlog(self) -> int:
        """The listen backlog, which asyncio also takes as how many connections it accepts at one wake-up, before
        any of them reaches :meth:`admit`: a few such bursts are open at once beyond the cap, so they are kept to a
        quarter of it (uvicorn's 2,048 took every descriptor in one wake-up: ``EMFILE`` and a second's pause)."""
        return max(8, min(128, self.cap // 4))

    def protocol(self) -> type[asyncio.Protocol]:
        """An HTTP protocol class for uvicorn's ``http`` option: uvicorn's own, held to these slots."""
        slots = self

        class Protocol(_Connection):
            _slots = slots

        return Protocol

    def app(self, app: ASGIApp) -> ASGIApp:
        """``app`` with its requests' progress reported to the slots of the connections serving them."""

        async def tracked(scope: Scope, receive: Receive, send: Send) -> None:
            connection = _SERVING.get()
            if connection is None or scope["type"] != "http":
                await app(scope, receive, send)
                return
            headers = dict(scope["headers"])
            if headers.get(b"content-length", b"0") in (b"", b"0") and b"transfer-encoding" not in headers:
                self.busy(connection)  # no body to wait for: the request is complete

            async def receive_tracked() -> Message:
                message = await receive()
                if message["type"] == "http.request" and not message.get("more_body", False):
                    self.busy(connection)
                return message

            async def send_tracked(message: Message) -> None:
                if message["type"] == "http.response.start":
                    self.busy(connection)  # answered before its body was read: a refusal, the body unwanted
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body", False):
                    self.wait(connection)

            await app(scope, receive_tracked, send_tracked)

        return tracked

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Say asyncio's accept failures once per episode on ``loop`` instead of a traceback per retry."""
        previous = loop.get_exception_handler()

        def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if context.get("message") == "socket.accept() out of system resource":
                if not self.accept_failing:
                    self.accept_failing = True
                    error = context.get("exception")
                    self.log.error("%s: cannot accept connections: %s (open-file limit %s); retrying every second",
                                   self.label, getattr(error, "strerror", None) or error, fd_limit() or "none")
                return
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handle)

    # -- the slots ------------------------------------------------------------------------------------------

    def admit(self, connection: _Connection) -> bool:
        """Give ``connection`` a slot, closing the longest-waiting idle one at the cap; ``False`` when every slot
        is serving a request."""
        self.accept_failing = False
        if len(self.open) >= self.cap:
            victim = next(iter(self.waiting), None)
            if not self.crowded:
                self.crowded = True
                self.log.warning("%s: %d connections open, the most the open-file limit allows; closing the ones "
                                 "that wait longest without a request to let new ones in", self.label, self.cap)
            if victim is None:
                return False
            self.leave(victim)
            victim.close()
        self.open.add(connection)
        self.wait(connection)
        return True

    def wait(self, connection: _Connection) -> None:
        """``connection`` has no request in progress: it has :attr:`timeout` seconds to complete one (none, when the
        client has shut down its sending side: it is closed now, its answer sent)."""
        if connection not in self.open:
            return
        if connection.half_closed:
            connection.close()
            return
        self.waiting.pop(connection, None)
        self.waiting[connection] = None
        connection.arm(self.timeout)

    def busy(self, connection: _Connection) -> None:
        """``connection``'s request is complete: it is being answered, with no deadline."""
        if connection in self.waiting:
            del self.waiting[connection]
            connection.disarm()

    def leave(self, connection: _Connection) -> None:
        self.open.discard(connection)
        self.waiting.pop(connection, None)
        connection.disarm()
        if self.crowded and len(self.open) <= self.cap // 2:
            self.crowded = False


class _Connection(asyncio.Protocol):
    """uvicorn's HTTP protocol for one connection, admitted to and held by the slots (:attr:`_slots`)."""

    _slots: ConnectionSlots

    def __init__(self, config: uvicorn.Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.inner = H11Protocol(config, server_state, app_state, _loop)
        self.loop = _loop or asyncio.get_event_loop()
        self.transport: asyncio.BaseTransport | None = None
        self.admitted = False
        self.timer: asyncio.TimerHandle | None = None
        self.half_closed = False
        """The client sent a whole request, then shut down its sending side: close once it is answered."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if not self._slots.admit(self):
            if isinstance(transport, asyncio.WriteTransport):
                transport.write(_BUSY)
            transport.close()
            return
        self.admitted = True
        self.inner.connection_made(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        token = _SERVING.set(self)  # the request task uvicorn starts here inherits it
        try:
            self.inner.data_received(data)
        finally:
            _SERVING.reset(token)

    def eof_received(self) -> bool:
        """The client shut down its sending side. With its request complete it may still read (HTTP allows the
        half-close): the connection stays open for the answer and closes once it is sent (:meth:`ConnectionSlots.wait`).
        Otherwise nothing more can come; returning ``False`` lets asyncio close the connection. uvicorn's own protocol
        returns ``None`` either way, so a half-closed client got nothing."""
        if not self.admitted:
            return False
        self.inner.eof_received()
        self.half_closed = self.inner.conn.their_state is h11.DONE and self.inner.conn.our_state is not h11.DONE
        return self.half_closed

    def connection_lost(self, exc: Exception | None) -> None:
        self._slots.leave(self)
        if self.admitted:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.admitted:
            self.inner.resume_writing()

    def arm(self, timeout: float) -> None:
        self.disarm()
        self.timer = self.loop.call_later(timeout, self.close)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
