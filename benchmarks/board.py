"""The board with 1,000 sessions under the root: how soon the page paints, how soon its cards are there, how much
memory the page holds, and what one ``session.list`` costs the server.

A root of ``--sessions`` (default 1,000) stored sessions, each one turn with a user message and a five-item plan,
spread over seven projects, every tenth still held by its writer (a second runtime in this process: those are
``live`` and the board watches them). A separate runtime serves the root, as ``dsh-todo web --root`` does. Each of
``--loads`` page loads opens ``/`` in a fresh Chromium context (Debian's Chromium through Playwright) and records:

- first contentful paint (``performance`` paint entries) and the time until the first page of cards is in the DOM;
- the page's JS heap (``Performance.getMetrics`` over CDP, after a collection) and its DOM node count;
- the ``session.list`` answer's size, and its server time (measured from the client, median of ``--loads``).

Bounded: nothing waits without a deadline; the whole run takes well under a minute with the defaults. Medians are
quoted; the machine may be shared.

Run: ``uv run python benchmarks/board.py [--sessions N] [--loads N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from dsh_todo.carriers.web.server import BackgroundServer
from dsh_todo.harness import Context
from dsh_todo.standard import open_runtime

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PAGE_CARDS = 48  # static/board.js


def populate(ctx: Context, count: int) -> None:
    """``count`` sessions as agents leave them: one turn each, a plan; every tenth still held by its writer."""
    for number in range(count):
        session = ctx.sessions.create(f"agent-{number:04d}", cwd=f"/home/dev/project-{number % 7}")
        session.append("turn/start", {"turn": 1})
        session.append("user/message", {"content": [{"type": "text", "text": f"Task {number}: refactor module "
                                                     f"{number % 13} and update its tests"}],
                                        "source": {"kind": "user"}, "role": "user", "id": f"u{number}"},
                       surface_op="append")
        done = number % 5
        session.append("todo/write", {"todos": [
            {"content": f"step {k} of task {number}",
             "status": "completed" if k < done else "in_progress" if k == done else "pending"} for k in range(5)]})
        if number % 10:
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    ctx.session_persistence.flush()
    for session in ctx.sessions.list():
        if session.events[-1]["type"] == "turn/end":
            ctx.sessions.close(session.id)


def list_once(base: str) -> tuple[float, int, int]:
    """One ``session.list``: its time (ms), its size, how many rows (``board_agents.py`` asks it too)."""
    body = json.dumps({"type": "client-request", "rpcId": "b", "method": "session.list", "payload": {}}).encode()
    request = urllib.request.Request(base + "api/session.list", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        data = response.read()
    return (time.perf_counter() - start) * 1000, len(data), len(json.loads(data)["result"]["value"]["sessions"])


def load(browser: Any, base: str) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        start = time.perf_counter()
        page.goto(base, wait_until="commit", timeout=60_000)
        page.wait_for_function(f"() => document.querySelectorAll('[data-testid=card]').length >= {PAGE_CARDS}",
                               timeout=60_000)
        cards_ms = (time.perf_counter() - start) * 1000
        paint = page.evaluate("""() => {
            const entry = performance.getEntriesByName('first-contentful-paint')[0];
            return entry ? entry.startTime : -1; }""")
        cdp.send("HeapProfiler.collectGarbage")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return {"paint": paint, "cards": cards_ms, "heap": metrics["JSHeapUsedSize"] / 2**20,
                "nodes": metrics["Nodes"]}
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("board: Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="dsh-todo-board-bench-") as scratch:
        root = Path(scratch) / "sessions"
        writer = open_runtime(root, batch_delay_ms=5)
        started = time.perf_counter()
        populate(writer, args.sessions)
        print(f"{args.sessions} sessions written in {time.perf_counter() - started:.1f} s "
              f"({platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.1f})")
        server_ctx = open_runtime(root, batch_delay_ms=5)
        server = BackgroundServer(server_ctx)
        try:
            base = server.start().split("?", 1)[0]
            cold_ms, size, _rows = list_once(base)
            warm = [list_once(base)[0] for _ in range(args.loads)]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
                try:
                    loads = [load(browser, base) for _ in range(args.loads)]
                finally:
                    browser.close()
        finally:
            server.stop()
            server_ctx.dispose()
            writer.dispose()

    def median(key: str) -> float:
        return statistics.median(sample[key] for sample in loads)

    print(f"session.list: {size / 1024:.0f} KiB; first (summaries read) {cold_ms:.0f} ms, "
          f"then median {statistics.median(warm):.0f} ms (n={len(warm)})")
    print(f"page, median of {len(loads)} loads: first contentful paint {median('paint'):.0f} ms, "
          f"first {PAGE_CARDS} cards {median('cards'):.0f} ms, JS heap {median('heap'):.1f} MiB, "
          f"DOM nodes {median('nodes'):.0f}")
    for sample in loads:
        print("  " + "  ".join(f"{key} {value:.1f}" for key, value in sample.items()))


if __name__ == "__main__":
    main()
