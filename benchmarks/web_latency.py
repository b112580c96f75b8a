"""How long a plan takes to reach the page: ``session.append`` → SSE frame → DOM.

1. **append → SSE frame at a loopback client.** A live session in this process, the web server on its background
   thread (as ``serve_in_background`` runs it), and a plain HTTP client reading ``/api/events.mux``. Each sample
   appends one ``todo/write`` and times the arrival of its ``session/event`` frame and of the ``session/projection``
   frame that follows it. Target: p99 < 10 ms.
2. **append → DOM update in Chromium.** The same server and Debian's Chromium (headless, through Playwright) showing the
   session. Each sample arms a ``MutationObserver`` that notes the time the strip's progress label becomes the new
   plan's, appends, and reads that time back. Target: < 100 ms.

Run: ``uv run python benchmarks/web_latency.py [--samples N] [--dom-samples N]``. Times are wall-clock on this
machine, which may be shared: read p50 as the typical cost and p99 as the tail under whatever load there was.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import statistics
import time
from typing import Any

from dsh_todo.carriers.terminal import STRIP_SEPARATOR, progress_label
from dsh_todo.carriers.web.server import serve_in_background
from dsh_todo.standard import open_runtime

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
STATUSES = ("completed", "in_progress", "pending")


def plan(i: int) -> list[dict[str, str]]:
    """Four items whose counts change from one sample to the next (so the label always changes)."""
    done = i % 4
    return [{"content": f"step {k} of sample {i}", "status": "completed" if k < done else
             ("in_progress" if k == done else "pending")} for k in range(4)]


def label(todos: list[dict[str, str]]) -> str:
    return progress_label(todos, STRIP_SEPARATOR)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(name: str, values: list[float], target: str) -> str:
    return (f"  {name:<40} p50 {statistics.median(values):7.3f} ms   p99 {percentile(values, 99):7.3f} ms   "
            f"max {max(values):7.3f} ms   (n={len(values)}, target {target})")


class Stream:
    def __init__(self, host: str, path: str) -> None:
        self.conn = http.client.HTTPConnection(host, timeout=30)
        self.conn.request("GET", path)
        self.response = self.conn.getresponse()

    def payload(self) -> dict[str, Any]:
        while True:
            line = self.response.readline()
            if not line:
                raise EOFError("stream ended")
            if line.startswith(b"data: "):
                payload: dict[str, Any] = json.loads(line[6:])["payload"]
                return payload


def bench_sse(samples: int, warmup: int = 50) -> tuple[list[float], list[float]]:
    ctx = open_runtime(None)
    url, stop = serve_in_background(ctx)
    session = ctx.sessions.create("bench")
    session.append("turn/start", {"turn": 1})
    stream = Stream(url.split("//", 1)[1].rstrip("/"), "/api/events.mux?sessionId=bench")
    event_ms: list[float] = []
    projection_ms: list[float] = []
    try:
        assert stream.payload()["type"] == "session/subscribed"
        for i in range(warmup + samples):
            todos = plan(i)
            start = time.perf_counter_ns()
            event = session.append("todo/write", {"todos": todos})
            first = stream.payload()
            got_event = time.perf_counter_ns()
            second = stream.payload()
            got_projection = time.perf_counter_ns()
            assert first["type"] == "session/event" and first["event"]["seq"] == event["seq"], first
            assert second["type"] == "session/projection" and second["seq"] == event["seq"], second
            if i >= warmup:
                event_ms.append((got_event - start) / 1e6)
                projection_ms.append((got_projection - start) / 1e6)
    finally:
        stream.conn.close()
        stop()
        ctx.dispose()
    return event_ms, projection_ms


ARM = """expected => {
  window.__seen = new Promise(resolve => {
    const dock = document.getElementById('dock');
    const check = () => {
      const node = dock.querySelector('[data-testid=todo-progress]');
      if (node && node.textContent === expected) {
        observer.disconnect();
        resolve(performance.timeOrigin + performance.now());
        return true;
      }
      return false;
    };
    const observer = new MutationObserver(check);
    observer.observe(dock, {subtree: true, childList: true, characterData: true});
  });
}"""


def bench_dom(samples: int, warmup: int = 10) -> list[float] | str:
    executable = shutil.which("chromium")
    if executable is None:
        return "skipped: no chromium on PATH (apt-get install -y chromium)"
    from playwright.sync_api import sync_playwright

    ctx = open_runtime(None)
    url, stop = serve_in_background(ctx)
    session = ctx.sessions.create("dom")
    session.append("turn/start", {"turn": 1})
    results: list[float] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(locale="en-US")
            page.goto(url + "?session=dom")
            page.wait_for_selector("body[data-stream=open]")
            for i in range(warmup + samples):
                todos = plan(i + 1)
                page.evaluate(ARM, label(todos))
                start_ms = time.time_ns() / 1e6
                session.append("todo/write", {"todos": todos})
                seen_ms: float = page.evaluate("() => window.__seen")
                if i >= warmup:
                    results.append(seen_ms - start_ms)
            browser.close()
    finally:
        stop()
        ctx.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--dom-samples", type=int, default=300)
    args = parser.parse_args()
    print(f"web latency on {platform.machine()} x{os.cpu_count()} ({platform.python_implementation()} "
          f"{platform.python_version()}, {platform.system()})")
    event_ms, projection_ms = bench_sse(args.samples)
    print(summary("append -> SSE session/event frame", event_ms, "p99 < 10 ms"))
    print(summary("append -> SSE session/projection frame", projection_ms, "p99 < 10 ms"))
    dom = bench_dom(args.dom_samples)
    if isinstance(dom, str):
        print(f"  append -> DOM update in Chromium: {dom}")
    else:
        print(summary("append -> DOM update in Chromium", dom, "< 100 ms"))


if __name__ == "__main__":
    main()
