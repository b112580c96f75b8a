"""The board with 1,000 sessions of five kinds (DSH and four other coding agents): first paint, a change on screen,
the server's memory and its idle cost.

``--sessions`` (default 1,000) split evenly over DSH (stored logs under a root, one turn and a five-item plan each)
and the four agents Claude Code, Codex, Gemini CLI and opencode (one file per session in each agent's home, every
tenth a subagent of the one before it, every seventh with its turn still open). The agents' files are written in a
plain JSON stand-in read by the test suite's fixture reader (``tests/carriers/web/agent_fixtures.py``), not in each
agent's own format: this measures the board (the poller, the rows, the mux, the page), and each agent's reader
has its own tests. A reader that parses more costs more per *changed* file only: unchanged files are stat'ed,
never read again.

The server runs in a child process (``--serve``), as ``dsh-todo web --agents all`` would, so its memory is its own.
The run records:

- per page load (``--loads``, fresh Chromium contexts): first contentful paint and the first page of cards;
- change on screen: ``--changes`` times, one agent's file is rewritten with a new plan item, and the time until the
  page shows that item (the file's write to the text in the DOM, median and max);
- ``session.list`` right after start (every agent file read once) and after;
- the server's RSS after start, after the loads and after the changes (and its peak), and the CPU it spends in
  ``--idle`` seconds with nothing changing (the poller's stats).

Run: ``uv run python benchmarks/board_agents.py [--sessions N] [--loads N] [--changes N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.carriers.web.agent_fixtures import use_fixture_readers, write, write_session  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PAGE_CARDS = 48  # static/board.js
AGENTS = ("claude", "codex", "gemini", "opencode")
TOOLS = {"claude": "TodoWrite", "codex": "update_plan", "gemini": "write_todos", "opencode": "todowrite"}


def plan(number: int) -> list[tuple[str, str]]:
    done = number % 5
    return [(f"step {k} of task {number}", "completed" if k < done else "in_progress" if k == done else "pending")
            for k in range(5)]


def populate(scratch: Path, count: int) -> tuple[Path, dict[str, Path]]:
    from dsh_todo.standard import open_runtime

    per_kind = count // 5
    root = scratch / "sessions"
    writer = open_runtime(root, batch_delay_ms=5)
    for number in range(per_kind):
        session = writer.sessions.create(f"dsh-{number:04d}", cwd=f"/home/dev/project-{number % 7}")
        session.append("turn/start", {"turn": 1})
        session.append("user/message", {"content": [{"type": "text", "text": f"Task {number}"}],
                                        "source": {"kind": "user"}, "role": "user", "id": f"u{number}"},
                       surface_op="append")
        session.append("todo/write", {"todos": [{"content": c, "status": s} for c, s in plan(number)]})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    writer.session_persistence.flush()
    writer.dispose()
    homes = {agent: scratch / "homes" / agent for agent in AGENTS}
    base = time.time() - per_kind * 0.02  # interleaved with the DSH sessions' last writes
    for agent in AGENTS:
        for number in range(per_kind):
            steps = plan(number)
            facts: dict[str, Any] = {"project": f"/home/dev/project-{number % 7}", "title": f"{agent} task {number}",
                                     "turnOpen": number % 7 == 0, "updated": base + number * 0.02}
            if number % 10 == 1:
                facts["parent"] = f"{agent}-{number - 1:04d}"
            write_session(homes[agent], f"{agent}-{number:04d}",
                          [write(TOOLS[agent], *steps[:3]), write(TOOLS[agent], *steps)], **facts)
    return root, homes


def serve(root: Path, homes_json: str) -> None:
    """The child process: serve the root and the agents' homes until stdin closes; print the URL."""
    from dsh_todo.carriers.web.server import BackgroundServer
    from dsh_todo.standard import open_runtime

    homes = {agent: Path(path) for agent, path in json.loads(homes_json).items()}
    with use_fixture_readers():
        ctx = open_runtime(root, batch_delay_ms=5)
        server = BackgroundServer(ctx, agents=list(homes), agent_homes=homes)
        print(server.start().split("?", 1)[0], flush=True)
        sys.stdin.read()
        server.stop()
        ctx.dispose()


def list_once(base: str) -> tuple[float, int, int]:
    """One ``session.list``: its time (ms), its size, how many rows."""
    body = json.dumps({"type": "client-request", "rpcId": "b", "method": "session.list", "payload": {}}).encode()
    request = urllib.request.Request(base + "api/session.list", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        data = response.read()
    return (time.perf_counter() - start) * 1000, len(data), len(json.loads(data)["result"]["value"]["sessions"])


def memory(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def cpu_seconds(pid: int) -> float:
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def load(browser: Any, base: str) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        start = time.perf_counter()
        page.goto(base, wait_until="commit", timeout=60_000)
        page.wait_for_function(f"() => document.querySelectorAll('[data-testid=card]').length >= {PAGE_CARDS}",
                               timeout=60_000)
        cards_ms = (time.perf_counter() - start) * 1000
        paint = page.evaluate("""() => {
            const entry = performance.getEntriesByName('first-contentful-paint')[0];
            return entry ? entry.startTime : -1; }""")
        agents = page.evaluate("() => document.querySelectorAll('[data-testid=card-agent]').length")
        return {"paint": paint, "cards": cards_ms, "agentCards": agents}
    finally:
        context.close()


def changes(browser: Any, base: str, homes: dict[str, Path], count: int) -> list[float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(base, timeout=60_000)
        page.wait_for_function(f"() => document.querySelectorAll('[data-testid=card]').length >= {PAGE_CARDS}",
                               timeout=60_000)
        time.sleep(1.0)  # the board's connection opens after its first list
        samples = []
        for number in range(count):
            agent = AGENTS[number % len(AGENTS)]
            marker = f"change {number} at {time.time():.3f}"
            started = time.perf_counter()
            write_session(homes[agent], f"{agent}-{number:04d}", [write(TOOLS[agent], (marker, "in_progress"))],
                          project="/home/dev/changed", title=f"{agent} changed {number}", turnOpen=True)
            page.wait_for_function("text => document.getElementById('board').innerText.includes(text)", arg=marker,
                                   timeout=10_000, polling=10)
            samples.append((time.perf_counter() - started) * 1000)
            time.sleep(0.2)
        return samples
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--serve", nargs=2, metavar=("ROOT", "HOMES_JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), args.serve[1])
        return
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("board_agents: Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="dsh-todo-board-agents-") as scratch:
        started = time.perf_counter()
        root, homes = populate(Path(scratch), args.sessions)
        print(f"{args.sessions} sessions (5 kinds) written in {time.perf_counter() - started:.1f} s "
              f"({platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.1f})")
        child = subprocess.Popen([sys.executable, __file__, "--serve", str(root),
                                  json.dumps({agent: str(path) for agent, path in homes.items()})],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            base = child.stdout.readline().strip()
            first_ms, size, rows = list_once(base)  # waits for the first reading of every agent's file
            warm_ms = statistics.median(list_once(base)[0] for _ in range(3))
            mem_start = memory(child.pid)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
                try:
                    loads = [load(browser, base) for _ in range(args.loads)]
                    mem_loads = memory(child.pid)
                    latencies = changes(browser, base, homes, args.changes)
                    mem_changes = memory(child.pid)
                finally:
                    browser.close()
            cpu_before = cpu_seconds(child.pid)
            time.sleep(args.idle)
            idle_share = (cpu_seconds(child.pid) - cpu_before) / args.idle
        finally:
            if child.stdin is not None:
                child.stdin.close()
            child.wait(30)

    def median(key: str) -> float:
        return statistics.median(sample[key] for sample in loads)

    print(f"session.list: {rows} rows, {size / 1024:.0f} KiB; first after start {first_ms:.0f} ms (every file "
          f"read), then median {warm_ms:.0f} ms")
    print(f"page, median of {len(loads)} loads: first contentful paint {median('paint'):.0f} ms, "
          f"first {PAGE_CARDS} cards {median('cards'):.0f} ms "
          f"({median('agentCards'):.0f} agent badges among them, subagents' included)")
    print(f"change on screen (file written -> text on the page), n={len(latencies)}: median "
          f"{statistics.median(latencies):.0f} ms, max {max(latencies):.0f} ms")
    print(f"server RSS: {mem_start['VmRSS']:.0f} MiB after start, {mem_loads['VmRSS']:.0f} MiB after the loads, "
          f"{mem_changes['VmRSS']:.0f} MiB after the changes (peak {mem_changes['VmHWM']:.0f} MiB); idle CPU "
          f"{100 * idle_share:.1f}% of one core over {args.idle:.0f} s")
    for sample in loads:
        print("  " + "  ".join(f"{key} {value:.1f}" for key, value in sample.items()))


if __name__ == "__main__":
    main()
