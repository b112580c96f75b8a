"""Regenerate the README's picture of the board (``docs/board.png``) from sessions played with the demo's script.

    uv run python scripts/board_screenshot.py [--out docs/board.png] [--width 1280 --height 720]

Every session is the demo's task (``dsh_todo.demo``: the same prompts and scripted replies) driven through the real
agent loop into a fresh root, stopped at a different point, so the board shows each state it can: one agent still
working (its writer holds the lock: live, two tasks in parallel), one whose process went away mid-turn
(interrupted), one whose turn was cancelled (aborted), and the whole demo (ended, its plan cleared by the second
turn). A second runtime serves that root, as ``dsh-todo web --root`` would, and Debian's Chromium (through
Playwright) takes the picture. Nothing here is drawn by hand: if the page or the demo changes, so does the picture.

Beside them, other coding agents' sessions (``--agents``), each read by that agent's own reader from the files the
pinned CLI wrote in the suite's saved runs (``tests/fixtures/agent-plans/<agent>-<version>/``): Claude Code's
``TodoWrite`` transcript and its subagent's, Codex's rollouts (its spawned thread's too), Gemini CLI's chats and
opencode's SQLite store, so the picture shows four agents' real plans, each subagent folded under its parent.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_todo.carriers.web.server import BackgroundServer
from dsh_todo.demo import PROMPTS, demo_replies, play
from dsh_todo.harness import Agent, Context
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.llm import ModelReply, ModelRequest, ScriptedModel
from dsh_todo.harness.tools.registry import AbortSignal
from dsh_todo.standard import open_runtime

REPO = Path(__file__).resolve().parent.parent
MAX_BYTES = 200_000
AGENT_FIXTURES = REPO / "tests" / "fixtures" / "agent-plans"


REAL_HOMES = {
    "claude": AGENT_FIXTURES / "claude-2.1.332" / "todowrite",
    "codex": AGENT_FIXTURES / "codex-0.171.0",
    "gemini": AGENT_FIXTURES / "gemini-0.61.0",
    "opencode": AGENT_FIXTURES / "opencode-1.18.33",
}
"""The saved runs the picture reads (the same as the board's tests, ``tests/carriers/web/agent_fixtures.py``)."""


class Paused(ScriptedModel):
    """The demo's model, which stops answering after ``replies`` replies (the turn stays open: an agent at work),
    or aborts the turn then when given a signal."""

    def __init__(self, replies: Sequence[ModelReply], count: int, signal: AbortSignal | None = None) -> None:
        super().__init__(list(replies), model="demo-script")
        self.count = count
        self.signal = signal
        self.waiting = asyncio.Event()
        """Set once it has stopped answering."""

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self.count == 0:
            if self.signal is not None:
                self.signal.abort()
            else:
                self.waiting.set()
                await asyncio.Event().wait()
        self.count -= 1
        return await super().complete(request)


async def play_sessions(ctx: Context) -> list[asyncio.Task[Any]]:
    """Write the board's sessions; returns the turns still running (the live and the interrupted agent)."""
    whole = ctx.sessions.create("demo-rate-limits", cwd="/home/dev/shop-api")
    await play(ctx, whole)
    ctx.sessions.close(whole.id)

    aborted = ctx.sessions.create("demo-cancelled", cwd="/home/dev/billing")
    signal = AbortSignal()
    await AgentLoop(ctx.tools, Paused(demo_replies(), 2, signal)).run_turn(Agent("demo", aborted), PROMPTS[0],
                                                                           signal=signal)
    ctx.sessions.close(aborted.id)

    running: list[asyncio.Task[Any]] = []
    for session_id, cwd, count in (("demo-crashed", "/home/dev/billing", 5), ("demo-live", "/home/dev/shop-api", 4)):
        session = ctx.sessions.create(session_id, cwd=cwd)
        model = Paused(demo_replies(), count)
        loop = AgentLoop(ctx.tools, model, persistence=ctx.session_persistence)
        running.append(asyncio.create_task(loop.run_turn(Agent("demo", session), PROMPTS[0])))
        await model.waiting.wait()
    ctx.session_persistence.flush()
    ctx.session_persistence.release("demo-crashed")  # its writer is gone, its turn left open
    return running


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "board.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=600)
    parser.add_argument("--locale", default="en-US")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium")
    if chromium is None:
        print("board_screenshot: Chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory(prefix="dsh-todo-board-") as scratch:
        root = Path(scratch) / "sessions"
        writer = open_runtime(root, batch_delay_ms=5)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        running = asyncio.run_coroutine_threadsafe(play_sessions(writer), loop).result(timeout=60)
        reader = open_runtime(root, batch_delay_ms=5)
        homes = {agent: home for agent, home in REAL_HOMES.items() if home.is_dir()}
        server = BackgroundServer(reader, agents=list(homes), agent_homes=homes)
        try:
            url = server.start()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                                     args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": args.width, "height": args.height}, locale=args.locale,
                                        color_scheme="light")
                page.goto(url)
                expect(page.locator('[data-testid=card][data-agent="dsh"]')).to_have_count(4, timeout=15_000)
                page.wait_for_function("""() => new Set([...document.querySelectorAll(
                    '[data-testid=card] > header [data-testid=card-agent]')].map((n) => n.dataset.agent)).size >= 4""",
                                       timeout=15_000)
                opened = page.locator("[data-testid=card-children] > summary")
                for index in range(opened.count()):
                    opened.nth(index).click()
                page.screenshot(path=str(args.out), animations="disabled")
                browser.close()
        finally:
            server.stop()
            reader.dispose()
            for task in running:
                loop.call_soon_threadsafe(task.cancel)
            writer.dispose()
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
    size = args.out.stat().st_size
    print(f"wrote {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out} ({size} bytes)")
    if size > MAX_BYTES:
        print(f"board_screenshot: {size} bytes is over the {MAX_BYTES}-byte budget", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
