"""A long ``dsh-todo mcp`` stdio session: its memory must stay flat however many calls one connection makes.

One stdio connection is one session and one turn; every ``todo_write`` call appends five events (``step/start``,
``tool/call``, ``todo/write``, ``tool/result``, ``step/end``). A server that kept the whole log in memory grew with
every call, about 5 MiB per 1,000 calls, for as long as the client stayed connected (days, for an editor's agent).
This drives one connection the way a client does (newline-delimited JSON-RPC on the pipes: ``initialize``,
``notifications/initialized``, then ``--calls`` sequential calls, each answered before the next is sent) and reports
the serving process's RSS after warm-up and at each ``--every`` calls, with the growth per 1,000 calls after warm-up.
Target: growth per 1,000 calls near 0 (allocator noise), whatever ``--calls`` is.

Run: ``uv run python benchmarks/mcp_memory.py [--calls 10000] [--every 1000] [--telemetry full]``. Bounded: it stops
after ``--calls`` calls or ``--deadline`` seconds, and the server is stopped at the end (end of input, then kill).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dsh_todo.testing import memory_kb

PROTOCOL = "2025-06-18"
WARM_UP = 200


def serving_pid(process: subprocess.Popen[bytes]) -> int:
    """The process that serves: over stdio the started one leaves the work to a forked stand-in child (when it can)."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    for _ in range(100):
        found = children.read_text().split() if children.exists() else []
        if found:
            return int(found[0])
        time.sleep(0.02)
    return process.pid


class Client:
    """One MCP client on the server's pipes: a request is one line, its answer one line."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin, self.stdout = process.stdin, process.stdout
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        answer = json.loads(self.stdout.readline())
        if "result" not in answer:
            raise RuntimeError(f"{method}: {answer}")
        return answer["result"]

    def call(self, index: int) -> None:
        result = self.request("tools/call", {"name": "todo_write", "arguments": {"todos": [
            {"content": f"call {index}: read the file", "status": "completed"},
            {"content": f"call {index}: write the change", "status": "in_progress"},
            {"content": "run the tests", "status": "pending"}]}})
        if result.get("isError"):
            raise RuntimeError(f"call {index}: {result}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=1_000, help="report RSS after this many calls")
    parser.add_argument("--telemetry", default="disabled", help="the server's --telemetry (a collector is not needed)")
    parser.add_argument("--deadline", type=float, default=1800.0, help="stop the calls after this many seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("DSH_TODO_ROOT", "OTEL_EXPORTER_OTLP_ENDPOINT")}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens: spans are dropped
        server = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "mcp", "--root", str(Path(tmp) / "sessions"),
                                   "--telemetry", args.telemetry], cwd=tmp, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            client = Client(server)
            client.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                          "clientInfo": {"name": "memory", "version": "1"}})
            client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            pid = serving_pid(server)
            for index in range(WARM_UP):
                client.call(index)
            base = memory_kb(pid)
            started = time.monotonic()
            print(f"after {WARM_UP} warm-up calls: {base / 1024:.1f} MiB RSS")
            done = 0
            while done < args.calls and time.monotonic() - started < args.deadline:
                client.call(WARM_UP + done)
                done += 1
                if done % args.every == 0:
                    rss = memory_kb(pid)
                    print(f"{done:>7} calls: {rss / 1024:7.1f} MiB RSS, {(rss - base) / 1024 * 1000 / done:+.2f} MiB "
                          f"per 1,000 calls ({done / (time.monotonic() - started):.0f} calls/s)", flush=True)
            peak = memory_kb(pid, "VmHWM")
            print(f"{done} calls: peak {peak / 1024:.1f} MiB")
        finally:
            if server.stdin is not None:
                server.stdin.close()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
