"""Fixtures for the web carrier: a booted runtime served on a thread, plain HTTP helpers, and Debian's Chromium.

Browser tests skip (with the reason) only when no ``chromium`` is on PATH; ``playwright install`` is never used.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dsh_todo.carriers.web.server import BackgroundServer
from dsh_todo.harness import Context, Session
from dsh_todo.harness.llm import ModelReply, ToolCallRequest
from dsh_todo.standard import open_runtime
from dsh_todo.testing import reply, scripted_turn, todo_call
from tests import needs
from tests.conftest import REPO_ROOT

ARTIFACTS = REPO_ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


# -- sessions -----------------------------------------------------------------------------------------------------


def raw_call(call_id: str, arguments: str, name: str = "todo_write") -> ToolCallRequest:
    return ToolCallRequest(call_id, name, arguments)


T = TypeVar("T")


def run_async(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion on a fresh thread: Playwright's sync API keeps a loop running on this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result(timeout=60)


def run_turn(ctx: Context, session: Session, prompt: str, replies: Sequence[ModelReply]) -> None:
    """One real agent-loop turn with a scripted model (must consume every reply), off Playwright's loop."""
    run_async(lambda: scripted_turn(ctx, session, prompt, replies, agent_id="web-test"))


PARALLEL_PLAN = (("梳理需求", "completed"), ("实现 fixture 样本", "in_progress"), ("跑后台构建", "in_progress"),
                 ("浏览器验收", "pending"))


def build_fixture_session(ctx: Context, session_id: str = "fx-alpha") -> Session:
    """SPEC §9.3's fixture: one turn whose plan has two parallel in_progress items."""
    session = ctx.sessions.create(session_id, cwd="/fixture/project")
    run_turn(ctx, session, "实现 fixture 样本并跑后台构建", [
        reply("先列计划。", todo_call("call_00_fixture", *PARALLEL_PLAN)),
        reply("计划已记录，两项并行进行中。"),
    ])
    return session


# -- the server ---------------------------------------------------------------------------------------------------


@dataclass
class Web:
    ctx: Context
    root: Path
    server: BackgroundServer
    base: str
    extra_ctxs: list[Context] = field(default_factory=list)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def url(self, path: str = "/") -> str:
        return self.base + path.lstrip("/")

    def post(self, path: str, body: Any, *, headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
        data = raw if raw is not None else json.dumps(body).encode()
        request = urllib.request.Request(self.url(path), data=data, method="POST",
                                         headers={"content-type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def history(self, session_id: Any, **payload: Any) -> tuple[int, dict[str, Any]]:
        return self.post("/api/session.history", {"type": "client-request", "rpcId": "rpc-1",
                                                  "method": "session.history",
                                                  "payload": {"sessionId": session_id, **payload}})

    def open_stream(self, query: str = "", headers: dict[str, str] | None = None) -> SseReader:
        return SseReader(self.host, "/api/events.mux" + query, headers=headers)

    def other_process(self) -> Context:
        """A second runtime over the same root, standing in for another process writing logs."""
        ctx = open_runtime(self.root, batch_delay_ms=5)
        self.extra_ctxs.append(ctx)
        return ctx


class SseReader:
    """A blocking SSE client over one HTTP connection: messages as raw text blocks."""

    def __init__(self, host: str, path: str, timeout: float = 20.0, headers: dict[str, str] | None = None) -> None:
        self.conn = http.client.HTTPConnection(host, timeout=timeout)
        self.conn.request("GET", path, headers={"accept": "text/event-stream", **(headers or {})})
        self.response = self.conn.getresponse()

    def message(self) -> str:
        """The next message: its lines up to the blank line, without the final newline."""
        lines: list[str] = []
        while True:
            line = self.response.readline()
            if not line:
                raise EOFError("the stream ended")
            text = line.decode("utf-8")
            if text == "\n":
                if lines:
                    return "".join(lines)[:-1]
                continue
            lines.append(text)

    def frame(self) -> dict[str, Any]:
        """The next ``data:`` message's envelope, skipping comments (pings)."""
        while True:
            message = self.message()
            if message.startswith("data: "):
                envelope: dict[str, Any] = json.loads(message[len("data: "):])
                return envelope

    def payloads_until(self, predicate: Callable[[dict[str, Any]], bool], limit: int = 200) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        for _ in range(limit):
            payload = self.frame()["payload"]
            seen.append(payload)
            if predicate(payload):
                return seen
        raise AssertionError(f"no matching frame in {limit}: {seen}")

    def close(self) -> None:
        self.conn.close()


def _serve(tmp_path: Path, **kwargs: Any) -> Iterator[Web]:
    root = tmp_path / "sessions"
    ctx = open_runtime(root, batch_delay_ms=5)
    ctx.session_persistence.backend.follow_interval = 0.05
    server = BackgroundServer(ctx, **kwargs)
    web = Web(ctx, root, server, "")
    try:
        url = server.start()
        web.base = url.split("?", 1)[0]
        yield web
    finally:
        server.stop()
        for other in web.extra_ctxs:
            other.dispose()
        ctx.dispose()


@pytest.fixture
def web(tmp_path: Path) -> Iterator[Web]:
    """A runtime with persistence under a temporary root, served on 127.0.0.1 with no token."""
    yield from _serve(tmp_path)


# -- the browser --------------------------------------------------------------------------------------------------


def chromium_path() -> str | None:
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per module of browser tests. Playwright's sync API marks its event loop as running on this thread
    for as long as it is open, so ``asyncio.run`` fails here meanwhile: tests beside browser tests use
    :func:`run_async`, and the browser closes when its module ends. (Package-scoped, it stayed open through every
    later module of this package: ``pytest test_page.py test_cli.py`` failed ``demo --web`` with "asyncio.run() cannot
    be called from a running event loop".)"""
    executable = chromium_path()
    if executable is None:
        needs.unavailable("Chromium is not installed (apt-get install -y chromium); browser tests need it")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=15_000)  # generous: the machine may be loaded; expectations return as soon as met
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def new_page(browser: Any) -> Iterator[Callable[..., Any]]:
    """``new_page(locale="en-US", **context_options)``: a page in a fresh context; closed after the test.

    The test fails if a page threw an uncaught error or logged one (a refused resource, such as a 404 a test asked
    for, is the only console error allowed).
    """
    contexts: list[Any] = []
    errors: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(f"console: {message.text}")

    def factory(locale: str = "en-US", **options: Any) -> Any:
        context = browser.new_context(locale=locale, **options)
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
        page.on("console", on_console)
        return page

    yield factory
    for context in contexts:
        context.close()
    assert errors == []


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
