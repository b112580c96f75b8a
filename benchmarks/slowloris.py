"""Idle connections against ``dsh-todo web`` and ``dsh-todo mcp --http``: how long an ordinary request waits.

Each server runs as a subprocess with its soft open-file limit at 1,024 (the usual default). Per sample, ``--idle``
fresh sockets to it on 127.0.0.1 are opened and kept (every other one sends half a request line, ``GET / HT``, and
nothing more), then one ordinary request is timed (``session.list`` for the web, ``initialize`` for MCP) on a new
connection; the idle sockets are closed after it. Also reported: the same request with no idle sockets, and the
bytes the server wrote to stderr. Target (issue 22): answered within a second at 1,100 idle sockets, one line in
the log per episode.

Run: ``uv run python benchmarks/slowloris.py [--idle 1100] [--samples 9]``. Bounded: every request has a 10 s
timeout (a request that gets no answer counts as 10 s), and the servers are stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from dsh_todo.testing import stop

FD_LIMIT = 1_024
TIMEOUT_S = 10.0
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "slowloris", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST = b'{"type":"client-request","rpcId":"r","method":"session.list","payload":{}}'


def _limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


@contextlib.contextmanager
def serving(kind: str, tmp: Path) -> Iterator[tuple[str, Path]]:
    err = tmp / f"{kind}.stderr"
    command = [sys.executable, "-m", "dsh_todo.cli", *(["mcp", "--http"] if kind == "mcp" else ["web"]),
               "--port", "0", "--root", str(tmp / "sessions")]
    env = {k: v for k, v in os.environ.items() if k != "DSH_TODO_ROOT"}
    with err.open("wb") as err_file:
        process = subprocess.Popen(command, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=err_file, preexec_fn=_limit_fds)
    try:
        url = ""
        deadline = time.monotonic() + 60
        while not url and time.monotonic() < deadline and process.poll() is None:
            if kind == "mcp":
                text = err.read_text(errors="replace")
                if "listening on " in text:
                    url = text.split("listening on ", 1)[1].split()[0]
                time.sleep(0.05)
            else:
                assert process.stdout is not None
                url = process.stdout.readline().decode().strip()
        if not url:
            raise RuntimeError(f"{kind} did not start: {err.read_text(errors='replace')[:500]}")
        yield url, err
    finally:
        stop(process)


def ordinary(kind: str, url: str) -> float:
    """Seconds until the answer (``TIMEOUT_S`` when none came)."""
    started = time.perf_counter()
    try:
        if kind == "mcp":
            response = httpx.post(url, json=INITIALIZE, headers=MCP_HEADERS, timeout=TIMEOUT_S)
        else:
            response = httpx.post(url + "api/session.list", content=LIST,
                                  headers={"Content-Type": "application/json"}, timeout=TIMEOUT_S)
        response.raise_for_status()
    except httpx.HTTPError:
        return TIMEOUT_S
    return time.perf_counter() - started


@contextlib.contextmanager
def idle(port: int, count: int) -> Iterator[None]:
    sockets: list[socket.socket] = []
    try:
        for index in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.connect(("127.0.0.1", port))
            sockets.append(sock)
            if index % 2:
                with contextlib.suppress(OSError):
                    sock.send(b"GET / HT")
        yield
    finally:
        for sock in sockets:
            sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=1_100)
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--settle", type=float, default=0.5,
                        help="seconds between opening the idle sockets and the request")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.idle + 500)), hard))
    for kind in ("web", "mcp"):
        with tempfile.TemporaryDirectory() as name, serving(kind, Path(name)) as (url, err):
            port = int(url.split(":")[2].split("/")[0])
            quiet = [ordinary(kind, url) for _ in range(args.samples)]
            loaded = []
            for _ in range(args.samples):
                with idle(port, args.idle):
                    time.sleep(args.settle)  # the server accepts what it will
                    loaded.append(ordinary(kind, url))
            log = err.read_bytes()
            print(f"{kind}: no idle sockets: median {statistics.median(quiet) * 1000:.1f} ms; "
                  f"{args.idle} idle sockets: median {statistics.median(loaded) * 1000:.1f} ms, "
                  f"max {max(loaded) * 1000:.1f} ms, unanswered {sum(t >= TIMEOUT_S for t in loaded)}/{args.samples}; "
                  f"stderr {len(log)} bytes, {log.count(b'Traceback')} tracebacks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
