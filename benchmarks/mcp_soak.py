"""Soak ``dsh-todo mcp --http`` with sequential clients: its file descriptors and memory must stay flat.

Each client is a handshake-era MCP client over plain HTTP on 127.0.0.1: ``initialize``, ``notifications/
initialized``, one ``todo_write`` call, ``DELETE``. Every client's session is a DSH session with its own log and
writer lock, so a server that kept released sessions would grow one fd per client (and die at the fd limit, about
1,000 clients at the default 1024). Target: fds after == fds before (a few of slack for the HTTP pool), peak RSS
within a few MB of the RSS after warm-up.

Run: ``uv run python benchmarks/mcp_soak.py [--clients 2000]``. Bounded: the loop stops after ``--clients`` clients
or ``--deadline`` seconds, and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from dsh_todo.testing import memory_kb, open_fds, rpc_result, stop

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOL = "2025-06-18"






def one_client(http: httpx.Client, url: str, index: int) -> None:
    init = http.post(url, headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}})
    rpc_result(init)
    headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    answer = rpc_result(http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "todo_write", "arguments": {"todos": [
            {"content": f"client {index}: read", "status": "completed"},
            {"content": f"client {index}: write", "status": "in_progress"}]}}}))
    if answer.get("isError"):
        raise RuntimeError(f"client {index}: {answer}")
    http.delete(url, headers=headers).raise_for_status()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--deadline", type=float, default=900.0, help="stop the loop after this many seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "DSH_TODO_ROOT"}
        server = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "mcp", "--http", "--port", "0", "--root",
                                   str(Path(tmp) / "sessions")], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert server.stderr is not None
            url = ""
            while not url:
                line = server.stderr.readline()
                if not line:
                    raise SystemExit("the server exited before listening")
                if "listening on " in line:
                    url = line.split("listening on ", 1)[1].strip()
            with httpx.Client(timeout=30) as http:
                for warm in range(20):
                    one_client(http, url, -1 - warm)
                time.sleep(0.5)
                fds_before, rss_before = open_fds(server.pid), memory_kb(server.pid, "VmRSS")
                started = time.monotonic()
                peak_rss, peak_fds, done = rss_before, fds_before, 0
                for index in range(args.clients):
                    if time.monotonic() - started > args.deadline:
                        break
                    one_client(http, url, index)
                    done += 1
                    if index % 50 == 0:
                        peak_rss = max(peak_rss, memory_kb(server.pid, "VmRSS"))
                        peak_fds = max(peak_fds, open_fds(server.pid))
                elapsed = time.monotonic() - started
                time.sleep(0.5)
                fds_after, rss_after = open_fds(server.pid), memory_kb(server.pid, "VmRSS")
                hwm = memory_kb(server.pid, "VmHWM")
            alive = server.poll() is None
        finally:
            stop(server, timeout=30)
    print(f"clients: {done} sequential in {elapsed:.1f} s ({done / elapsed:.0f}/s), server alive: {alive}")
    print(f"open fds: {fds_before} before, {fds_after} after (peak sampled {peak_fds})")
    print(f"RSS: {rss_before / 1024:.1f} MiB after warm-up, {rss_after / 1024:.1f} MiB after, "
          f"peak {max(peak_rss, hwm) / 1024:.1f} MiB (VmHWM)")
    return 0 if alive and fds_after <= fds_before + 4 else 1


if __name__ == "__main__":
    raise SystemExit(main())
