"""The ACP agent: ``initialize``, ``session/new``, ``session/prompt``, ``session/cancel`` and ``session/load``.

Every ACP session is one DSH agent session, persisted in DSH's JSONL layout under the configured root (the ACP
session id is the DSH session id, so ``dsh-todo plan`` reads what an editor saw). The turn boundary is the user's:
a ``session/prompt`` is one turn of the :class:`~dsh_todo.harness.agent_loop.AgentLoop`, so the plan stands through
every call of the prompt (a rejected call changes nothing) and the next prompt's ``turn/start`` clears it, as in
DSH. The loop flushes each call before it goes on, so an update the client receives (read off the log as it grows,
:mod:`dsh_todo.carriers.acp.updates`) is already durable; ``session/load`` replays a stored session through the very
same mapping and re-emits its standing plan.

Cancellation follows the loop's own checkpoints: ``session/cancel`` flips the turn's abort signal, a tool call not
yet dispatched answers ``Error: tool call aborted before dispatch``, and the turn ends ``aborted`` (stop reason
``cancelled``). A model request already in flight is awaited first; the loop has no way to interrupt it. A prompt
whose task is cancelled outright (the connection went away) still answers its running call and ends ``aborted``.

The SDK runs every request in a task of its own, at once, so a ``session/prompt`` sent right after a
``session/load`` (a client reading its requests from a file cannot wait for the answer) would find the session not
loaded yet. Requests naming a session are therefore taken in the order they arrive: a load holds the session's
:class:`asyncio.Lock` until it is answered, and a prompt takes it to find and claim the session (not for its
whole turn: a second prompt meanwhile is refused, as before). The SDK starts the tasks in arrival order, and each
reaches the lock before its first suspension, so the lock's queue is the arrival order.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final, cast

from acp.core import run_agent
from acp.exceptions import RequestError
from acp.interfaces import Agent as AcpAgent
from acp.interfaces import Client
from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionNotification,
)

from dsh_todo.carriers.acp.lines import CHUNK, LineTransport
from dsh_todo.carriers.acp.stdio import stdio_streams
from dsh_todo.carriers.acp.updates import Update, UpdateFeed
from dsh_todo.carriers.stopping import STOPPING
from dsh_todo.harness.agent import Agent
from dsh_todo.harness.agent_loop import DEFAULT_SYSTEM, AgentLoop, TurnOutcome
from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import SessionLogError, SessionNotFoundError
from dsh_todo.harness.llm import Model, ModelError, describe, make_model
from dsh_todo.harness.persistence.contract import SESSION_PERSISTENCE
from dsh_todo.harness.session import SESSIONS, Session
from dsh_todo.harness.tools.registry import TOOLS, AbortSignal
from dsh_todo.ids import random_uuid
from dsh_todo.standard import open_storage

if TYPE_CHECKING:
    from dsh_todo.runtime import Storage, Telemetry

log = logging.getLogger("dsh_todo.acp")

AGENT_NAME: Final = "dsh-todo"


def _version() -> str:
    try:
        return metadata.version("dsh-todo")
    except metadata.PackageNotFoundError:
        return "0"


def prompt_text(blocks: Sequence[Any]) -> str:
    """The user's prompt as the loop's text: text blocks verbatim, embedded text resources and links by content."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            text = getattr(block.resource, "text", None)
            if isinstance(text, str):
                parts.append(text)
        elif kind == "resource_link":
            parts.append(block.uri)
    return "\n".join(parts)


def stop_reason(outcome: TurnOutcome, signal: AbortSignal) -> str:
    """The ACP stop reason for a finished turn; a model failure is not a stop reason but an error."""
    kind = outcome.reason.get("kind")
    if kind == "aborted" or signal.aborted:
        return "cancelled"
    if kind == "max-tokens":
        return "max_tokens"
    if kind == "error":
        error = outcome.reason.get("error", {})
        if error.get("name") == "MaxStepsError":
            return "max_turn_requests"
        raise RequestError.internal_error({"details": str(error.get("message", "the turn failed"))})
    return "end_turn"


class TodoAgent:
    """An ACP agent over a booted context (tools, sessions and, for ``session/load``, persistence)."""

    def __init__(self, ctx: Context, model: Model, *, system: str | None = DEFAULT_SYSTEM,
                 max_steps: int = 50) -> None:
        self.ctx = ctx
        self.loop = AgentLoop(ctx[TOOLS], model, system=system, max_steps=max_steps,
                              persistence=ctx.get(SESSION_PERSISTENCE))
        self._client: Client | None = None
        self._agents: dict[str, Agent] = {}
        self._feeds: dict[str, UpdateFeed] = {}
        self._running: dict[str, AbortSignal] = {}
        self._order: dict[str, asyncio.Lock] = {}

    # -- connection -----------------------------------------------------------------------------------------

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def _send(self, session_id: str, update: Update) -> None:
        """Send ``update``; to a client that is gone, nothing (it cannot hear it, and the work goes on)."""
        if self._client is None:
            return
        model = SessionNotification.model_validate({"sessionId": session_id, "update": update})
        try:
            await self._client.session_update(session_id=session_id, update=model.update)
        except ConnectionError:
            log.debug("session/update to a closed connection dropped")

    # -- protocol methods -----------------------------------------------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=min(protocol_version, PROTOCOL_VERSION),
                                  agent_capabilities=AgentCapabilities(
                                      load_session=True, prompt_capabilities=PromptCapabilities(embedded_context=True)),
                                  agent_info=Implementation(name=AGENT_NAME, title="dsh-todo", version=_version()))

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        session_id = random_uuid()
        session = self.ctx[SESSIONS].create(session_id, cwd=cwd)
        self._adopt(session, UpdateFeed(self.ctx[TOOLS]))
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: Any = None, **kwargs: Any) -> LoadSessionResponse:
        async with self._in_order(session_id):
            return await self._load(session_id)

    async def _load(self, session_id: str) -> LoadSessionResponse:
        if session_id in self._running:
            raise RequestError.invalid_request({"details": f'session "{session_id}" has a prompt running'})
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        if persistence is None:
            raise RequestError.invalid_request({"details": "this agent runs without persistence"})
        try:
            session = persistence.load(session_id)
        except SessionNotFoundError:
            raise RequestError.resource_not_found(session_id) from None
        except (SessionLogError, ValueError) as exc:
            raise RequestError.internal_error({"details": str(exc)}) from None
        feed = UpdateFeed(self.ctx[TOOLS], history=True)
        for update in feed.replay(session.events):
            await self._send(session_id, update)
        feed.history = False
        self._adopt(session, feed)
        return LoadSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        async with self._in_order(session_id):  # after a load of this session sent before
            agent = self._agents.get(session_id)
            if agent is None:
                raise RequestError.invalid_params({"sessionId": session_id, "details": "unknown session"})
            if session_id in self._running:
                raise RequestError.invalid_request({"details": f'session "{session_id}" already has a prompt running'})
            signal = AbortSignal()
            self._running[session_id] = signal
        feed = self._feeds[session_id]
        queue: asyncio.Queue[Update | None] = asyncio.Queue()

        def listen(session: Session, event: Mapping[str, Any]) -> None:
            if session is agent.session:
                for update in feed.feed(event):
                    queue.put_nowait(update)

        stop_listening = self.ctx[SESSIONS].listen(listen)
        sender = asyncio.create_task(self._drain(session_id, queue))
        try:
            outcome = await self.loop.run_turn(agent, prompt_text(prompt), signal=signal)
        finally:
            stop_listening()
            queue.put_nowait(None)
            await sender
            del self._running[session_id]
        return PromptResponse(stop_reason=stop_reason(outcome, signal))  # type: ignore[arg-type]

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        signal = self._running.get(session_id)
        if signal is not None:
            signal.abort("user")

    # -- internals ------------------------------------------------------------------------------------------

    def _in_order(self, session_id: str) -> asyncio.Lock:
        """The lock that keeps the requests naming ``session_id`` in arrival order (see the module's docstring)."""
        return self._order.setdefault(session_id, asyncio.Lock())

    def _adopt(self, session: Session, feed: UpdateFeed) -> None:
        self._agents[session.id] = Agent(session.id, session)
        self._feeds[session.id] = feed

    async def _drain(self, session_id: str, queue: asyncio.Queue[Update | None]) -> None:
        """Send the turn's updates in log order; a client that went away does not stop the turn."""
        while (update := await queue.get()) is not None:
            try:
                await self._send(session_id, update)
            except Exception as exc:
                log.warning("session/update to the client failed: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))


async def serve_stdio(ctx: Context, model: Model) -> None:
    """Serve one ACP client over stdin/stdout until stdin ends, whatever they are (pipes, ttys, files, /dev/null:
    :mod:`dsh_todo.carriers.acp.stdio`), every line read by :class:`~dsh_todo.carriers.acp.lines.LineTransport`."""
    task = asyncio.current_task()
    assert task is not None
    STOPPING.serve(task.cancel)  # a stop signal ends the connection as a client that left does
    reader, writer = await stdio_streams(limit=4 * CHUNK)  # read in chunks: the limit only bounds what is buffered
    # TodoAgent implements the methods it supports; the SDK's router answers "method not found" for the rest. Our
    # transport reads the lines (dsh_todo.carriers.acp.lines): what is not a JSON-RPC message is answered there.
    await run_agent(cast(AcpAgent, TodoAgent(ctx, model)), input_stream=LineTransport(reader, writer))


def main(*, storage: Storage, script: str | None = None, model: str | None = None, wire: str | None = None,
         allow_parallel: bool = True, telemetry: Telemetry = "disabled") -> int:
    """``dsh-todo acp``: pick the model, boot the standard composition persisted to ``storage``, serve stdio."""
    try:
        llm = make_model(script, model, wire)
    except ModelError as exc:
        print(f"dsh-todo acp: {exc}", file=sys.stderr)
        return 2
    STOPPING.install()
    try:
        ctx = open_storage(storage, allow_parallel=allow_parallel, telemetry=telemetry)
        print(f"dsh-todo acp: model {describe(llm)}, tools {', '.join(ctx[TOOLS].names()) or 'none'} "
              f"(allowParallelInProgress: {str(allow_parallel).lower()}), {storage.describe()}",
              file=sys.stderr, flush=True)
        try:
            asyncio.run(serve_stdio(ctx, llm))
        except asyncio.CancelledError:
            if not STOPPING.requested:
                raise
        finally:
            ctx.dispose()
    finally:
        STOPPING.done()
    return 0
