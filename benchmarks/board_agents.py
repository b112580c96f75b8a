"""The board with 1,000 sessions of five kinds (DSH and four other coding agents): first paint, a change on screen,
the server's memory and its idle cost.

``--sessions`` (default 1,000) split evenly over DSH (stored logs under a root, one turn and a five-item plan each)
and the four agents Claude Code, Codex, Gemini CLI and opencode, each written in that agent's OWN format, read by its
real reader: every session is a copy of the files the pinned CLI wrote in the suite's saved run
(``tests/fixtures/agent-plans/<agent>-<version>/``, the same as the board's tests read) with its ids, its project and
its plan's texts made its own — a Claude Code transcript (``TodoWrite``), a Codex rollout (``update_plan``), a Gemini
CLI chat (``write_todos``), and for opencode rows in ONE SQLite store holding all its sessions (``session``,
``message``, ``part``, ``todo``; WAL mode, with a writer connection kept open as opencode keeps one). Every tenth
session of an agent is a subagent of the one before it, written where that agent writes one (Claude Code's
``subagents`` folder, Codex's spawned-thread rollout, Gemini CLI's chat under its parent's folder, opencode's
``parent_id``).

The server runs in a child process (``--serve``), as ``dsh-todo web --agents all`` would, so its memory is its own.
The run records:

- per page load (``--loads``, fresh Chromium contexts): first contentful paint and the first page of cards;
- change on screen: ``--changes`` times, round the four agents, one session's plan item is renamed in its agent's
  format — its files written again whole (a temporary file renamed over it, so the reader reads it all again, the
  dearest case: an append is read on from where the last read ended), or for opencode its ``todo`` rows and
  ``time_updated`` changed in one transaction of the open writer — and the time until the page shows that item (the
  write to the text in the DOM, median and max);
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
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.carriers.web.agent_fixtures import REAL_HOMES  # noqa: E402

from board import CHROMIUM_ARGS, PAGE_CARDS, list_once  # noqa: E402  (beside this script)

AGENTS = ("claude", "codex", "gemini", "opencode")
FILE_AGENTS = ("claude", "codex", "gemini")

CLAUDE_MAIN, CLAUDE_SUB = "dae93792-d946-4018-8bd9-43cedd786c3b", "a0971d554bb514d87"
CODEX_MAIN, CODEX_SUB = "01a249d7-c122-77e2-9066-cfa59a513547", "01a249d7-c1d6-78d0-9b24-b2b8027b04a6"
GEMINI_MAIN, GEMINI_SUB = "ef5e5846-aa2f-477d-9169-af826a016186", "0b87159c-5f83-4ebe-ba36-339c8f9ebe58"
OPENCODE_MAIN, OPENCODE_SUB = "ses_db6288be3ffetQBij5NFdY90vd", "ses_db6286e56fferwqUWz8KY5sh3H"
CODEX_DAY = "sessions/2026/12/06/rollout-2026-12-06T05-33-26-"
TEMPLATES: dict[str, tuple[list[str], list[str]]] = {
    "claude": ([f"projects/-home-dev-project/{CLAUDE_MAIN}.jsonl"],
               [f"projects/-home-dev-project/{CLAUDE_MAIN}/subagents/agent-{CLAUDE_SUB}.jsonl",
                f"projects/-home-dev-project/{CLAUDE_MAIN}/subagents/agent-{CLAUDE_SUB}.meta.json"]),
    "codex": ([f"{CODEX_DAY}{CODEX_MAIN}.jsonl"], [f"{CODEX_DAY}{CODEX_SUB}.jsonl"]),
    "gemini": (["tmp/project/.project_root", "tmp/project/chats/session-2026-12-06T05-32-ef5e5846.jsonl"],
               [f"tmp/project/chats/{GEMINI_MAIN}/{GEMINI_SUB}.jsonl"]),
}
"""Each file agent's saved files of a top-level session and of its subagent, relative to its home."""
TEXTS = ("Reproduce the bug", "Fix the parser", "Run the tests", "Report the result", "Read the bug report",
         "Open the docs", "Note the gaps", "Fix the bug", "Check the tests", "Check the docs", "Plan the fix")
"""The saved runs' plan items and titles, numbered per session so that no two cards read alike."""
CHANGED = "Fix the parser"
"""The item a change renames (in every agent's top-level plan)."""


def ids(agent: str, number: int) -> tuple[str, str]:
    """The ids of session ``number`` of ``agent`` as a top-level session and as a subagent, shaped as the agent's."""
    if agent == "claude":
        return f"{number:08x}-d946-4018-8bd9-43cedd786c3b", f"a{number:016x}"
    if agent == "codex":
        return f"01a249d7-c122-77e2-9066-{number:012x}", f"01a249d7-c1d6-78d0-9b24-{number:012x}"
    return f"{number:08x}-aa2f-477d-9169-af826a016186", f"{number:08x}-5f83-4ebe-ba36-339c8f9ebe58"


def swaps(agent: str, number: int, changed: str | None = None) -> list[tuple[str, str]]:
    """What to replace in a saved file (its text and its path) to make it session ``number``'s: a subagent
    (every tenth) under session ``number - 1``; ``changed`` renames :data:`CHANGED`."""
    main, sub = {"claude": (CLAUDE_MAIN, CLAUDE_SUB), "codex": (CODEX_MAIN, CODEX_SUB),
                 "gemini": (GEMINI_MAIN, GEMINI_SUB)}[agent]
    parent = number - 1 if number % 10 == 1 else number
    project = (parent // 10) % 7
    found = [(main, ids(agent, parent)[0]), (sub, ids(agent, number)[1])]
    if agent == "gemini":  # its file name holds the first 8 characters of the id
        found += [(main[:8], ids(agent, parent)[0][:8]), ("tmp/project/", f"tmp/project-{project}/")]
    texts = [(text, f"{text} #{number}") for text in TEXTS]
    if changed is not None:
        texts = [(CHANGED, changed), *texts]
    return [*found, *texts, ("/home/dev/", f"/home/dev/p{project}/"), ("-home-dev-", f"-home-dev-p{project}-")]


def write_files(agent: str, home: Path, number: int, at: float, changed: str | None = None) -> None:
    """Write session ``number`` of a file agent under ``home`` from its saved run; every file a temporary one
    renamed over the last (as a reader may see it mid-way), its mtime ``at``."""
    source = REAL_HOMES[agent]
    for relative in TEMPLATES[agent][1 if number % 10 == 1 else 0]:
        text, path = (source / relative).read_text(encoding="utf-8"), relative
        for old, new in swaps(agent, number, changed):
            text, path = text.replace(old, new), path.replace(old, new)
        target = home / path
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.parent / f".{target.name}.tmp"
        temporary.write_text(text, encoding="utf-8")
        os.utime(temporary, (at, at))
        temporary.replace(target)


def opencode_id(number: int) -> str:
    return f"ses_{number:012x}benchAgentPlans"


def opencode_store(home: Path, count: int, base: float) -> sqlite3.Connection:
    """opencode's store with ``count`` sessions, each a copy of the saved run's rows (the main session's, or every
    tenth its subagent's under the one before), in WAL mode; returns the writer connection, left open."""
    home.mkdir(parents=True, exist_ok=True)
    store = home / "opencode.db"
    shutil.copyfile(REAL_HOMES["opencode"] / "opencode.db", store)
    db = sqlite3.connect(store, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")

    def columns(table: str) -> list[str]:
        return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]

    def copy(table: str, template: str, changes: dict[str, str], key: str = "session_id") -> None:
        names = columns(table)
        chosen = ", ".join(changes.get(name, name) for name in names)
        db.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT {chosen} FROM {table} WHERE {key} = ?",
                   (template,))

    def texts(column: str, number: int) -> str:
        for text in TEXTS:
            column = f"replace({column}, '{text}', '{text} #{number}')"
        return column

    db.execute("BEGIN")
    for number in range(count):
        template = OPENCODE_SUB if number % 10 == 1 else OPENCODE_MAIN
        new, parent = opencode_id(number), opencode_id(number - 1) if number % 10 == 1 else None
        project = ((number - 1 if number % 10 == 1 else number) // 10) % 7
        suffix = f"'_{number}'"
        copy("session", template, {"id": f"'{new}'", "parent_id": "NULL" if parent is None else f"'{parent}'",
                                   "slug": f"slug || {suffix}", "title": texts("title", number),
                                   "directory": f"replace(directory, '/home/dev/', '/home/dev/p{project}/')",
                                   "time_updated": str(int((base + number * 0.02) * 1000))}, key="id")
        copy("message", template, {"id": f"id || {suffix}", "session_id": f"'{new}'"})
        copy("part", template, {"id": f"id || {suffix}", "message_id": f"message_id || {suffix}",
                                "session_id": f"'{new}'", "data": texts("data", number)})
        copy("todo", template, {"session_id": f"'{new}'", "content": texts("content", number)})
    for template in (OPENCODE_SUB, OPENCODE_MAIN):
        for table in ("todo", "part", "message"):
            db.execute(f"DELETE FROM {table} WHERE session_id = ?", (template,))
        db.execute("DELETE FROM session WHERE id = ?", (template,))
    db.execute("COMMIT")
    return db


def opencode_change(db: sqlite3.Connection, number: int, changed: str) -> None:
    """Rename session ``number``'s :data:`CHANGED` item in opencode's store, as its next write would leave it."""
    now = int(time.time() * 1000)
    session = opencode_id(number)
    db.execute("BEGIN")
    db.execute("UPDATE todo SET content = ?, time_updated = ? WHERE session_id = ? AND content LIKE ?",
               (changed, now, session, f"{CHANGED} #%"))
    db.execute("UPDATE session SET time_updated = ? WHERE id = ?", (now, session))
    db.execute("COMMIT")


def populate(scratch: Path, count: int) -> tuple[Path, dict[str, Path], sqlite3.Connection]:
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
    for agent in FILE_AGENTS:
        for number in range(per_kind):
            write_files(agent, homes[agent], number, base + number * 0.02)
    store = opencode_store(homes["opencode"], per_kind, base)
    return root, homes, store


def plan(number: int) -> list[tuple[str, str]]:
    done = number % 5
    return [(f"step {k} of task {number}", "completed" if k < done else "in_progress" if k == done else "pending")
            for k in range(5)]


def serve(root: Path, homes_json: str) -> None:
    """The child process: serve the root and the agents' homes until stdin closes; print the URL."""
    from dsh_todo.carriers.web.server import BackgroundServer
    from dsh_todo.standard import open_runtime

    homes = {agent: Path(path) for agent, path in json.loads(homes_json).items()}
    ctx = open_runtime(root, batch_delay_ms=5)
    server = BackgroundServer(ctx, agents=list(homes), agent_homes=homes)
    print(server.start().split("?", 1)[0], flush=True)
    sys.stdin.read()
    server.stop()
    ctx.dispose()


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


def changes(browser: Any, base: str, homes: dict[str, Path], store: sqlite3.Connection, per_kind: int,
            count: int) -> list[float]:
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
            session = (number * 10) % per_kind  # a top-level session (its plan holds the item renamed)
            marker = f"change {number} at {time.time():.3f}"
            started = time.perf_counter()
            if agent == "opencode":
                opencode_change(store, session, marker)
            else:
                write_files(agent, homes[agent], session, time.time(), changed=marker)
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
        root, homes, store = populate(Path(scratch), args.sessions)
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
                    latencies = changes(browser, base, homes, store, args.sessions // 5, args.changes)
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
            store.close()

    def median(key: str) -> float:
        return statistics.median(sample[key] for sample in loads)

    print(f"session.list: {rows} rows, {size / 1024:.0f} KiB; first after start {first_ms:.0f} ms (every file "
          f"read), then median {warm_ms:.0f} ms")
    print(f"page, median of {len(loads)} loads: first contentful paint {median('paint'):.0f} ms, "
          f"first {PAGE_CARDS} cards {median('cards'):.0f} ms "
          f"({median('agentCards'):.0f} agent badges among them, subagents' included)")
    print(f"change on screen (file written -> text on the page), n={len(latencies)}: median "
          f"{statistics.median(latencies):.0f} ms, max {max(latencies):.0f} ms")
    for index, agent in enumerate(AGENTS):
        mine = latencies[index::len(AGENTS)]
        print(f"  {agent}: " + " ".join(f"{sample:.0f}" for sample in mine) + " ms")
    print(f"server RSS: {mem_start['VmRSS']:.0f} MiB after start, {mem_loads['VmRSS']:.0f} MiB after the loads, "
          f"{mem_changes['VmRSS']:.0f} MiB after the changes (peak {mem_changes['VmHWM']:.0f} MiB); idle CPU "
          f"{100 * idle_share:.1f}% of one core over {args.idle:.0f} s")
    for sample in loads:
        print("  " + "  ".join(f"{key} {value:.1f}" for key, value in sample.items()))


if __name__ == "__main__":
    main()
