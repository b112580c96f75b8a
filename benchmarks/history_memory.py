"""What a history page and ``dsh-todo events`` cost on a long log: peak memory over the idle process, and time.

A raw log of ``--turns`` turns (15 events each: messages, a chunk row, the call, the plan, the result; 40,000
turns are 600,000 events, about 95 MB) is written with the tests' generator (``tests/long_logs.py``). Then:

- ``dsh-todo web`` serves it; after a warm-up page of a one-event session its RSS is the idle size; one tail page
  (default ``maxMessages``), then four tail pages at once, are timed, with the peak RSS (VmHWM) after each;
- ``dsh-todo events LOG > /dev/null`` is timed with its own peak, against the same on a one-turn log.

Target (issue 22): a page and ``events`` within 64 MB of idle, whatever the log's size.

Run: ``uv run python benchmarks/history_memory.py [--turns 40000]``. Bounded: every request has a 300 s timeout,
and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's root: the tests' generator

from tests.long_logs import SESSION_ID, long_log

from dsh_todo.standard import open_runtime
from dsh_todo.testing import memory_kb, stop

_HWM = ("import atexit, sys\n"
        "atexit.register(lambda: print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).strip(),"
        " file=sys.stderr))\n"
        "from dsh_todo.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def tail_page(url: str, session_id: str) -> float:
    body = json.dumps({"type": "client-request", "rpcId": "r", "method": "session.history",
                       "payload": {"sessionId": session_id}}).encode()
    request = urllib.request.Request(url + "api/session.history", data=body,
                                     headers={"content-type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        assert "projections" in json.loads(response.read())["result"]["value"]
    return time.perf_counter() - started


def events_run(log: Path) -> tuple[float, int]:
    """Seconds and peak kB of ``dsh-todo events LOG > /dev/null``."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _HWM, "events", str(log)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=300, check=True)
    return time.perf_counter() - started, int(proc.stderr.splitlines()[-1].split()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        root = Path(name) / "sessions"
        log = long_log(root, args.turns)
        short = long_log(Path(name) / "short", 1)
        ctx = open_runtime(root)
        ctx.sessions.create("small", cwd="/small").append("turn/start", {"turn": 1})
        ctx.dispose()
        print(f"log: {log.stat().st_size / 1e6:.1f} MB, {args.turns * 15:,} events", flush=True)
        server = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "web", "--port", "0", "--root", str(root)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                  text=True)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            tail_page(url, "small")
            time.sleep(0.3)
            idle = memory_kb(server.pid)
            one = tail_page(url, SESSION_ID)
            peak_one = memory_kb(server.pid, "VmHWM")
            with ThreadPoolExecutor(4) as pool:
                started = time.perf_counter()
                times = list(pool.map(lambda _: tail_page(url, SESSION_ID), range(4)))
                wall = time.perf_counter() - started
            peak_four = memory_kb(server.pid, "VmHWM")
        finally:
            stop(server)
        print(f"web: idle {idle / 1024:.1f} MiB; one tail page {one:.2f} s, peak {peak_one / 1024:.1f} MiB "
              f"(+{(peak_one - idle) / 1024:.1f}); four at once {wall:.2f} s "
              f"(each {min(times):.2f}–{max(times):.2f} s), "
              f"peak {peak_four / 1024:.1f} MiB (+{(peak_four - idle) / 1024:.1f})", flush=True)
        short_s, short_kb = events_run(short)
        long_s, long_kb = events_run(log)
        print(f"events: one turn {short_s:.2f} s, peak {short_kb / 1024:.1f} MiB; the long log {long_s:.2f} s, "
              f"peak {long_kb / 1024:.1f} MiB (+{(long_kb - short_kb) / 1024:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
