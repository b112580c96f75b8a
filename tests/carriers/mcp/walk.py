"""The modules one warm MCP ``tools/call`` over stdio runs through, from reading its request line to the fsync.

The stdio server runs in this process (:func:`~dsh_todo.carriers.mcp.stdio.serve_stdio` on two pipes, a file root,
telemetry off); after the handshake and one warm call, a second identical ``tools/call`` is traced with
:func:`sys.setprofile` on the serving thread, from the first function of ours that runs after its line is written
(the transport reading stdin) to the first ``os.fsync``. Each Python function of ours that starts or resumes there
is one step; its module is the one the step is *in*. So the walk is deterministic: a count, never a time.

- **modules**: every module of ours a step ran in;
- **main path**: those outside the fan-out of the post-commit listeners (a step with a listener other than
  persistence's on its stack: the projections, the checkpoint cache, the in-memory bound): the modules the call
  itself crosses to reach the disk;
- **transitions**: how often the step after one is in another module (returns included: the walk is the
  sequence of modules the thread is in, modules not ours left out).

Run ``uv run python -m tests.carriers.mcp.walk`` for the report (every module, with its steps).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from types import FrameType
from typing import Any

OURS = "dsh_todo"

LISTENERS = frozenset({"ProjectionRegistry.on_event", "ProjectionCache.on_event", "InMemoryBound._written",
                       "Coordinator._on_event"})
"""Post-commit listeners that are not the call's path to the disk (qualified names of the function a listener
runs); the persistence listener that queues the event is the call's path."""

TURNS = "dsh_todo.harness.turns"
SESSION = "dsh_todo.harness.session"

ARGS = {"todos": [{"content": f"step {i}: do the thing number {i}",
                   "status": ("completed", "in_progress", "pending")[i % 3]} for i in range(10)]}


@dataclass
class Walk:
    """The steps of one traced call: ``(module, qualified function, on the main path)`` in order."""

    steps: list[tuple[str, str, bool]] = field(default_factory=list)
    calls: set[tuple[str, str]] = field(default_factory=set)
    """``(caller, callee)`` module pairs of ours on the main path, caller != callee."""

    @property
    def modules(self) -> list[str]:
        return list(dict.fromkeys(module for module, _, _ in self.steps))

    @property
    def main_path(self) -> list[str]:
        return list(dict.fromkeys(module for module, _, main in self.steps if main))

    @property
    def crossed(self) -> list[str]:
        """The main path's modules the call passes *through*: entered, and calling on into another module of ours
        from there (the others are leaves it only visits: helpers that call nothing of ours)."""
        callers = {caller for caller, _ in self.calls}
        return [module for module in self.main_path if module in callers]

    @property
    def transitions(self) -> int:
        return sum(1 for before, after in pairwise(self.steps) if before[0] != after[0])

    @property
    def main_transitions(self) -> int:
        main = [module for module, _, on in self.steps if on]
        return sum(1 for before, after in pairwise(main) if before != after)

    def between(self, one: str, other: str) -> tuple[int, int]:
        """How often the walk went from module ``one`` straight to ``other``, and back."""
        pairs = Counter((before[0], after[0]) for before, after in pairwise(self.steps))
        return pairs[(one, other)], pairs[(other, one)]

    def report(self) -> str:
        counts = Counter(module for module, _, _ in self.steps)
        lines = [f"modules: {len(self.modules)}, transitions: {self.transitions}; "
                 f"main path: {len(self.main_path)} modules, {self.main_transitions} transitions; "
                 f"crossed: {len(self.crossed)}; turns -> session {self.between(TURNS, SESSION)[0]}, "
                 f"back {self.between(TURNS, SESSION)[1]}"]
        main = set(self.main_path)
        for module in self.modules:
            functions = dict.fromkeys(function for name, function, _ in self.steps if name == module)
            mark = ("X" if module in self.crossed else "*") if module in main else " "
            lines.append(f"  {mark} {module} ({counts[module]} steps): "
                         f"{', '.join(functions)}")
        return "\n".join(lines)


def _qualname(frame: FrameType) -> str:
    return frame.f_code.co_qualname


def _side(frame: FrameType | None) -> bool:
    """Whether a listener that is not the call's path is on the stack."""
    while frame is not None:
        if _qualname(frame) in LISTENERS and str(frame.f_globals.get("__name__", "")).startswith(OURS):
            return True
        frame = frame.f_back
    return False


class Tracer:
    def __init__(self) -> None:
        self.walk = Walk()
        self.on = False
        self.done = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or self.done:
            return
        if event == "c_call" and getattr(arg, "__name__", None) == "fsync":
            self.done = True
            return
        if event == "call":
            module = str(frame.f_globals.get("__name__", ""))
        elif event == "return" and frame.f_back is not None:
            module = str(frame.f_back.f_globals.get("__name__", ""))
            frame = frame.f_back
        else:
            return
        if not module.startswith(OURS):
            return
        if event == "return" and self.walk.steps and self.walk.steps[-1][0] == module:
            return
        main = not _side(frame)
        self.walk.steps.append((module, _qualname(frame), main))
        if event == "call" and main:
            caller = frame.f_back
            while caller is not None and not str(caller.f_globals.get("__name__", "")).startswith(OURS):
                caller = caller.f_back
            if caller is not None and (name := str(caller.f_globals["__name__"])) != module:
                self.walk.calls.add((name, module))


def _line(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


async def _serve_and_trace(root: Path) -> Walk:
    from dsh_todo.carriers.mcp.calls import Connections
    from dsh_todo.carriers.mcp.stdio import serve_stdio
    from dsh_todo.standard import open_runtime

    # A window longer than any traced call (a loaded machine, the profiler's cost): the call's own flush writes the
    # batch, never the writer thread, so the fsync is always on the traced thread.
    ctx = open_runtime(root, compression="zstd", batch_delay_ms=60_000)
    connections = Connections(ctx, cwd=str(root))
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    stdin = os.fdopen(in_read, "rb", buffering=0)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    server = loop.create_task(serve_stdio(connections, version="0", stdin=stdin, stdout_fd=out_write, stop=stop))
    os.set_blocking(out_read, False)
    pending = bytearray()

    async def answer() -> bytes:
        while b"\n" not in pending:
            ready = loop.create_future()
            loop.add_reader(out_read, ready.set_result, None)
            try:
                await ready
            finally:
                loop.remove_reader(out_read)
            pending.extend(os.read(out_read, 1 << 16))
        line, _, rest = bytes(pending).partition(b"\n")
        pending[:] = rest
        return line

    tracer = Tracer()
    try:
        os.write(in_write, _line(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                   "clientInfo": {"name": "walk", "version": "1"}}))
        await answer()
        os.write(in_write, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = _line(2, "tools/call", {"name": "todo_write", "arguments": ARGS})
        os.write(in_write, call)
        assert b'"isError":false' in await answer()
        sys.setprofile(tracer)
        try:
            tracer.on = True
            os.write(in_write, call)
            reply = await answer()
        finally:
            sys.setprofile(None)
        assert b'"isError":false' in reply, reply
        assert tracer.done, "the call reached no fsync"
    finally:
        os.close(in_write)
        stop.set()
        await server
        connections.close()
        ctx.dispose()
        stdin.close()
        os.close(out_read)
        os.close(out_write)
    return tracer.walk


def trace_call(root: Path) -> Walk:
    """Trace one warm ``tools/call`` of a stdio server persisting to ``root`` (see the module's docstring)."""
    return asyncio.run(_serve_and_trace(root))


def main() -> int:
    with tempfile.TemporaryDirectory() as root:
        print(trace_call(Path(root)).report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
