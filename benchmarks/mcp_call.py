"""One durable call against one durable MCP ``tools/call``, on the same persisted runtime, with the ratio.

- **durable call**: ``ctx.tools.execute("todo_write", <10 items>, agent)`` on a persisted session, then
  ``session_persistence.flush`` (acknowledged = fsynced): one ``todo/write`` event, one fsync.
- **MCP call over stdio**: ``dsh-todo mcp --root …`` as a subprocess, as an MCP host runs it, driven by a minimal
  client that writes one ``tools/call`` line and reads its answer line (the real server path: our line transport
  reading stdin on the event loop, the direct answer once the SDK has accepted ``initialize`` (decision 0013), the
  carrier, the flush). The call is a step of the connection's turn (``step/start``, ``tool/call``, ``todo/write``,
  ``tool/result``, ``step/end``), flushed before it is answered.
- **MCP call in process**: the SDK's own client against ``build_server`` over in-memory streams (this adds the
  Python SDK client's work, e.g. validating the result against the tool's output schema with ``jsonschema``).
- ``CallSession.call`` alone: the carrier's turn writing without the SDK, to show which part is the SDK's.
- **The stdio transport alone**: the same server whose direct ``tools/call`` answers every call after the first with
  the first one's answer (``CACHED_CODE``): reading, parsing, dispatching and writing a call, without the carrier.
- **The server a user would write instead**: the SDK's high-level ``MCPServer`` (FastMCP in mcp 1.x) with a
  ``todo_write(todos: list[TodoItem]) -> str`` tool that appends the list as one JSON line and fsyncs it, over stdio,
  driven by the same client (``PEER_CODE``); it validates with pydantic and answers the counts line.
- **Floors**, timed beside them: appending and fsyncing as many bytes as one stdio call appends (measured on its
  log during the warm-up), and a line's round trip through a Python process that only echoes it. Their sum is what
  the stdio call would cost if our code took no time: the part of the ratio the disk and the pipes impose.

Each sample times a run of calls on a warm session (its log already exists, so the one-off creation of the file is
not counted) and reports µs per call; samples of the kinds are interleaved so machine load hits them alike. The
fsyncs per in-process call are counted too (``os.fsync`` wrapped), as a check on the shape, not a timing. On a
shared disk an fsync's own time swings by 10× between minutes, so also read the CPU lines: the same calls with
``os.fsync`` stubbed out, in CPU time; and, with the real fsync, the stdio server process's CPU per call (from
``/proc``, all its threads) beside this process's for the durable call.

Run: ``uv run python benchmarks/mcp_call.py [--compression zstd|none] [--calls 200] [--samples 15]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dsh_todo.harness import Agent, Context
from dsh_todo.standard import open_runtime

ARGS = {"todos": [{"content": f"step {i}: do the thing number {i}",
                   "status": ("completed", "in_progress", "pending")[i % 3]} for i in range(10)]}

Call = Callable[[], Awaitable[Any]]


class FsyncCounter:
    """Counts ``os.fsync`` calls while installed (the writer calls it through the ``os`` module)."""

    def __init__(self) -> None:
        self.count = 0
        self._real = os.fsync

    def __enter__(self) -> FsyncCounter:
        def counted(fd: int) -> None:
            self.count += 1
            self._real(fd)

        os.fsync = counted
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real


async def time_calls(call: Call, calls: int) -> tuple[float, float]:
    """µs per call over ``calls`` calls, and fsyncs per call."""
    with FsyncCounter() as fsyncs:
        start = time.perf_counter()
        for _ in range(calls):
            await call()
        elapsed = time.perf_counter() - start
    return elapsed / calls * 1e6, fsyncs.count / calls


def durable_call(ctx: Context) -> Call:
    session = ctx.sessions.create("durable", cwd="/bench")
    agent = Agent("durable", session)
    execute = ctx.tools.execute
    flush = ctx.session_persistence.flush

    async def call() -> None:
        await execute("todo_write", ARGS, agent)
        flush("durable")

    return call


def carrier_call(ctx: Context) -> Call:
    from dsh_todo.carriers.mcp.calls import CallSession

    session = CallSession(ctx, cwd="/bench", session_id="carrier")

    async def call() -> None:
        result = await session.call("todo_write", ARGS)
        assert not result.is_error

    return call


class Piped:
    """A child process spoken to in lines over its stdin and stdout."""

    def __init__(self, command: list[str], cwd: Path | None) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=cwd)

    def round_trip(self, line: bytes) -> bytes:
        """Write ``line`` and read the line written back."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()
        return self.process.stdout.readline()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


CACHED_CODE = """import sys
from dsh_todo.carriers.mcp.calls import Direct
from dsh_todo.cli import main
call, answers = Direct._call, []
async def cached(self, request_id, name, arguments):
    if not answers:
        answers.append(await call(self, request_id, name, arguments))
    return answers[0]
Direct._call = cached
sys.exit(main(sys.argv[1:]))
"""
"""``dsh-todo mcp`` whose direct ``tools/call`` runs the carrier once and then answers every call with that first
answer: the same process, handshake and transport (read, parse, dispatch, write) without the carrier's work."""


class StdioServer(Piped):
    """``dsh-todo mcp`` over stdio, initialized, answering one ``tools/call`` line at a time (with ``cached``, every
    call after the first is answered with the first one's answer: :data:`CACHED_CODE`)."""

    def __init__(self, root: Path, compression: str, *, cached: bool = False) -> None:
        command = [sys.executable, "-c", CACHED_CODE] if cached else [str(Path(sys.executable).with_name("dsh-todo"))]
        super().__init__([*command, "mcp", "--root", str(root), "--compression", compression], root)
        self.round_trip(self.encode("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                   "clientInfo": {"name": "bench", "version": "1"}}))
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
                                 + b"\n")
        self.line = self.encode("tools/call", {"name": "todo_write", "arguments": ARGS})

    def encode(self, method: str, params: dict[str, Any]) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n"

    def cpu(self) -> float:
        """The serving process's CPU seconds so far (user + system, all threads), or NaN where ``/proc`` is absent:
        the spawned process's child, the spawned one being a stand-in over stdio (``stdio.leave_to_stand_in``)."""
        pid = self.process.pid
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as children:
                [server] = [int(child) for child in children.read().split()] or [pid]
            with open(f"/proc/{server}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def call(self) -> None:
        answer = self.round_trip(self.line)
        assert b'"isError":false' in answer, answer


PEER_CODE = """import json, os, sys
from typing import Literal
from pydantic import BaseModel
from mcp.server.mcpserver import MCPServer

class TodoItem(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"]

log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
server = MCPServer("todo")

@server.tool()
def todo_write(todos: list[TodoItem]) -> str:
    os.write(log, (json.dumps([item.model_dump() for item in todos]) + "\\n").encode())
    os.fsync(log)
    counts = {status: sum(item.status == status for item in todos)
              for status in ("pending", "in_progress", "completed")}
    return (f"Updated todo list: {counts['pending']} pending, {counts['in_progress']} in progress, "
            f"{counts['completed']} completed.")

server.run()
"""
"""The MCP server a user would write for the same job with the SDK's high-level API: a tool that appends the list as
one JSON line and fsyncs it."""


class PeerServer(Piped):
    """:data:`PEER_CODE` over stdio, initialized."""

    def __init__(self, root: Path) -> None:
        super().__init__([sys.executable, "-c", PEER_CODE, str(root / "peer.jsonl")], root)
        self.round_trip(_line("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                             "clientInfo": {"name": "bench", "version": "1"}}))
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.line = _line("tools/call", {"name": "todo_write", "arguments": ARGS})

    async def call(self) -> None:
        answer = self.round_trip(self.line)
        assert b'"isError":false' in answer, answer


def _line(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n"


ECHO_CODE = """import sys
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""


class Echo(Piped):
    """A Python process that writes back every line it reads: the least a line transport over pipes can cost."""

    def __init__(self, line: bytes) -> None:
        super().__init__([sys.executable, "-c", ECHO_CODE], None)
        self.line = line

    async def call(self) -> None:
        self.round_trip(self.line)


async def run(root: Path, compression: str, calls: int, samples: int) -> None:
    from mcp.client import Client

    from dsh_todo.carriers.mcp.calls import Connections
    from dsh_todo.carriers.mcp.server import build_server

    ctx = open_runtime(root / "in-process", compression=compression)
    (root / "stdio").mkdir()
    (root / "transport").mkdir()
    server = StdioServer(root / "stdio", compression)
    transport = StdioServer(root / "transport", compression, cached=True)
    (root / "peer").mkdir()
    peer = PeerServer(root / "peer")
    echo = Echo(server.line)
    try:
        in_process = build_server(Connections(ctx, cwd="/bench"), version="0", own=True)
        async with Client(in_process) as client:
            async def mcp_call() -> None:
                result = await client.call_tool("todo_write", ARGS)
                assert not result.is_error

            kinds: dict[str, Call] = {DURABLE: durable_call(ctx),
                                      STDIO: server.call,
                                      "MCP tools/call, SDK client in process": mcp_call,
                                      "CallSession.call (carrier, no SDK)": carrier_call(ctx)}
            for call in kinds.values():  # warm up: the log files exist from here on
                await call()
            logs = {DURABLE: Path(str(ctx.session_persistence.locate("durable"))),
                    STDIO: next((root / "stdio").rglob("session*.jsonl*"))}
            sizes = {name: log.stat().st_size for name, log in logs.items()}
            for call in kinds.values():
                for _ in range(WARM_UP):
                    await call()
            appended = {name: (log.stat().st_size - sizes[name]) // WARM_UP for name, log in logs.items()}
            kinds.update(floors(root, appended, echo))
            kinds[TRANSPORT] = transport.call
            kinds[PEER] = peer.call
            times: dict[str, list[float]] = {name: [] for name in kinds}
            fsyncs: dict[str, list[float]] = {name: [] for name in kinds}
            cpu: dict[str, list[float]] = {DURABLE: [], CARRIER: []}
            real_cpu: dict[str, list[float]] = {DURABLE: [], STDIO: []}
            for _ in range(samples):
                for name, call in kinds.items():
                    own, served = time.process_time(), server.cpu()
                    per_call, per_call_fsyncs = await time_calls(call, calls)
                    times[name].append(per_call)
                    fsyncs[name].append(per_call_fsyncs)
                    if name == DURABLE:
                        real_cpu[name].append((time.process_time() - own) / calls * 1e6)
                    elif name == STDIO:
                        real_cpu[name].append((server.cpu() - served) / calls * 1e6)
                for name in cpu:
                    cpu[name].append(await cpu_per_call(kinds[name], calls))
    finally:
        server.close()
        transport.close()
        peer.close()
        echo.close()
        ctx.dispose()
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians[DURABLE]
    print(f"\n== compression {compression!r}: {samples} samples x {calls} calls, medians (wall) ==")
    for name, value in medians.items():
        counted = "" if name in (STDIO, TRANSPORT) else f"{statistics.median(fsyncs[name]):.2f} fsyncs/call, "
        print(f"{name:<42} {value:8.0f} us/call  ({counted}{value / base:.2f}x the durable call; "
              f"min {min(times[name]):.0f}, max {max(times[name]):.0f})")
    print(f"the stdio call against the server a user would write with the SDK: "
          f"{medians[STDIO] / medians[PEER]:.2f}x ({medians[STDIO]:.0f} vs {medians[PEER]:.0f} us)")
    print(f"the stdio server's transport alone costs {medians[TRANSPORT] - medians[ECHO]:.0f} us a call more than the "
          f"Python echo; the stdio call costs {medians[STDIO] - medians[CARRIER]:.0f} us more than the carrier in "
          f"process")
    floor = medians[STEP_FSYNC] + medians[ECHO]
    print(f"the stdio call is {medians[STDIO] / floor:.2f}x its floor")
    print(f"floor of the stdio call: {floor:.0f} us = {floor / base:.2f}x the durable call (the fsync of its "
          f"{appended[STDIO]:,} bytes plus a line's round trip through a Python process that only echoes it; the "
          f"durable call appends {appended[DURABLE]:,})")
    durable_cpu, carrier_cpu = (statistics.median(cpu[name]) for name in (DURABLE, CARRIER))
    print(f"CPU per call with fsync stubbed out: durable call {durable_cpu:.0f} us, CallSession.call "
          f"{carrier_cpu:.0f} us ({carrier_cpu / durable_cpu:.2f}x)")
    # The server's CPU is counted in clock ticks (10 ms: 100 us per call of a 100-call sample), so the mean over
    # every sample is the figure with a useful resolution.
    durable_real, stdio_real = (statistics.fmean(real_cpu[name]) for name in (DURABLE, STDIO))
    print(f"CPU per call with the real fsync (all threads, mean of the samples): durable call {durable_real:.0f} us, "
          f"the stdio server process {stdio_real:.0f} us ({stdio_real / durable_real:.2f}x)")


WARM_UP = 20
"""Calls of each kind before timing; also what the bytes each appends are measured over."""

DURABLE = "durable call (execute + flush)"
STDIO = "MCP tools/call over stdio (the server)"
CARRIER = "CallSession.call (carrier, no SDK)"
STEP_FSYNC = "floor: append + fsync of the stdio step's bytes"
ECHO = "floor: a line echoed by a Python process"
TRANSPORT = "stdio server, answer cached (transport alone)"
PEER = "peer: the SDK's MCPServer, one JSON line + fsync"


def appending(path: Path, size: int) -> Call:
    """Append ``size`` bytes to ``path`` and fsync them: the disk's part of a call that appends as much."""
    data = b"x" * max(0, size - 1) + b"\n"

    async def call() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    return call


def floors(root: Path, appended: dict[str, int], echo: Echo) -> dict[str, Call]:
    """The floors timed beside the calls: the stdio step's fsync alone, and a line's round trip alone."""
    return {STEP_FSYNC: appending(root / "floor-step.log", appended[STDIO]), ECHO: echo.call}


async def cpu_per_call(call: Call, calls: int) -> float:
    """CPU µs per call with ``os.fsync`` a no-op: what the path costs besides the disk."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        start = time.process_time()
        for _ in range(calls):
            await call()
        return (time.process_time() - start) / calls * 1e6
    finally:
        os.fsync = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--compression", choices=("zstd", "none", "both"), default="both")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for compression in ("none", "zstd") if args.compression == "both" else (args.compression,):
        workdir = Path(tempfile.mkdtemp(prefix="dsh-bench-mcp-"))
        try:
            asyncio.run(run(workdir, compression, args.calls, args.samples))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
