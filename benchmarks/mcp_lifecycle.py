"""How fast ``dsh-todo mcp`` is ready after its spawn, and how fast it is gone after a signal (issue 21).

For each run, interleaved: a bare interpreter that echoes one line (``python -c``: the floor of any Python server),
then ``dsh-todo mcp`` spawned as a client spawns it: the time until ``initialize`` is answered, until the first
``tools/call`` is answered, and, after one of SIGTERM, SIGINT, SIGHUP or the end of stdin, until the process has
exited (its turn ended ``completed``, its log flushed). Medians over the runs; wall-clock times on this machine, so
run it on a quiet one and read the ratio to the floor.

    uv run python benchmarks/mcp_lifecycle.py --runs 15
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INITIALIZE = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
              b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n')
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
CALL = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"todo_write","arguments":'
        b'{"todos":[{"content":"a","status":"in_progress"}]}}}\n')
ECHO = "import sys\nfor line in sys.stdin.buffer:\n    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()\n"
ENDINGS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGHUP": signal.SIGHUP, "end of stdin": None}


def read_line(process: subprocess.Popen[bytes], timeout: float = 30.0) -> bytes:
    assert process.stdout is not None
    fd = process.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError("no answer")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise EOFError("stdout closed")
        data += chunk
    return data


def floor() -> float:
    """Spawn to the first echoed line of a bare interpreter."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(b"{}\n")
    process.stdin.flush()
    read_line(process)
    elapsed = time.perf_counter() - start
    process.stdin.close()
    process.wait(30)
    return elapsed


def served(root: Path, ending: int | None) -> tuple[float, float, float]:
    """Spawn to ``initialize``'s answer, spawn to the first call's answer, ending to exit; in seconds."""
    env = {k: v for k, v in os.environ.items() if k != "DSH_TODO_ROOT"}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "mcp", "--root", str(root)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdin is not None
    process.stdin.write(INITIALIZE)
    process.stdin.flush()
    read_line(process)
    ready = time.perf_counter() - start
    process.stdin.write(INITIALIZED + CALL)
    process.stdin.flush()
    read_line(process)
    called = time.perf_counter() - start
    stopping = time.perf_counter()
    if ending is None:
        process.stdin.close()
    else:
        process.send_signal(ending)
    code = process.wait(30)
    gone = time.perf_counter() - stopping
    if code != 0:
        raise RuntimeError(f"exit {code}")
    if process.stdin and not process.stdin.closed:
        process.stdin.close()
    return ready, called, gone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    floors: list[float] = []
    ready: list[float] = []
    called: list[float] = []
    gone: dict[str, list[float]] = {name: [] for name in ENDINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for name, ending in ENDINGS.items():
                floors.append(floor())
                r, c, g = served(Path(tmp) / f"{run}-{len(ready)}", ending)
                ready.append(r)
                called.append(c)
                gone[name].append(g)
    bare = statistics.median(floors)
    print(f"load {os.getloadavg()[0]:.2f}, {len(ready)} spawns")
    print(f"bare interpreter, spawn to an echoed line: {bare * 1000:.1f} ms")
    print(f"spawn to initialize answered:  {statistics.median(ready) * 1000:.1f} ms "
          f"({statistics.median(ready) / bare:.1f}x the bare interpreter)")
    print(f"spawn to first tools/call answered: {statistics.median(called) * 1000:.1f} ms "
          f"({statistics.median(called) / bare:.1f}x)")
    for name, times in gone.items():
        print(f"{name} to exit 0: median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
