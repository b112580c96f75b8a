"""Persistence benchmarks: cold plan scans, checkpointed cold reads, scan memory, durable append throughput.

1. A log of ``--events`` events (1,000,000 by default) is written in each encoding through the real writer: the
   standard runtime (sessions, projections, JSONL persistence with its 200 ms write-behind window, the todo tool's
   projection unit, the projection checkpoints) and ``Session.append``. The mix is DSH-like: turns of four steps,
   each step a reasoning run, a text run and a tool-call run of deltas (packed into chunk rows), the assistant
   message, a tool call, a ``todo/write`` (one every ~20 events) and the tool result. Its append rate is reported.
2. **Cold read to the standing plan and a verdict**: ``logview.read_plan``, the reader's one pass (every line checked
   by the store's own scanner, events not kept: runs of lines proven clean in bulk, only the lines the plan and the
   open turn need parsed, decision 0015), in events/s, wall clock and CPU; the exact full read (``read_session``,
   every event kept) once, for reference.
3. **Checkpointed cold read**: ``read_plan`` with the checkpoint the runtime wrote at dispose (its proof
   checked, the tail read exactly: the same verdict as the full pass, decision 0010).
4. **Peak memory of the reader's pass**: tracemalloc peak during ``read_plan``, and the peak resident size (VmHWM) of
   a fresh process before and after it, against the log's size.
5. **Batched durable appends**: ``--append-events`` appends (100,000) through ``Session.append`` + the plugins,
   durable at the end (default window), repeated; plus a variant flushing after every ``turn/end``. Each also in
   CPU time per event (all threads), against the in-memory ceiling's: on a shared machine the wall-clock rate
   swings with the load, the CPU the persistence side adds much less. The ceiling and the four variants run
   interleaved, one sample of each per round, so a change of load hits them alike.

Numbers are medians (the machine is shared). Run: ``uv run python benchmarks/persistence.py [--events N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dsh_todo.harness.persistence.jsonl.checkpoint import CHECKPOINT_NAME
from dsh_todo.logview import read_plan, read_session
from dsh_todo.standard import open_runtime

_PROSE = ("the parser module reads each token and the writer keeps a buffer of lines so that retries stay idempotent "
          "while tests cover edge cases like empty input unicode ünïcödé and very long paths")
WORDS = tuple(_PROSE.split(" "))

Event = tuple[str, dict[str, Any], str | None, list[int] | None]


def _text(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + k * 3) % len(WORDS)] for k in range(words))


def mix(count: int) -> Iterator[Event]:
    """``count`` events of the DSH-like mix (see the module docstring), as ``(type, data, surfaceOp, sources)``."""
    seq = 0
    turn = 0
    statuses = ("completed", "in_progress", "pending")
    while True:
        turn += 1
        batch: list[Event] = [("turn/start", {"turn": turn}, None, None),
                              ("user/message", {"turn": turn, "message": {
                                  "id": f"u-{turn}", "role": "user",
                                  "content": [{"type": "text", "text": _text(turn, 40)}]}}, "append", None)]
        for step in range(1, 5):
            call_id = f"call_{turn}_{step}"
            batch.append(("step/start", {"turn": turn, "step": step}, None, None))
            for kind, runs in (("reasoning-delta", 6), ("text-delta", 5)):
                batch += [("assistant/chunk", {"turn": turn, "step": step, "chunk": {
                    "type": kind, "index": 0, "text": _text(turn + k, 3) + " "}}, None, None) for k in range(runs)]
            batch += [("assistant/chunk", {"turn": turn, "step": step, "chunk": {
                "type": "tool-call-delta", "index": 1, "id": call_id, "name": "todo_write",
                "argumentsDelta": _text(step + k, 4)}}, None, None) for k in range(3)]
            todos = [{"content": _text(turn * 5 + k, 6), "status": statuses[(turn + step + k) % 3]} for k in range(6)]
            batch.append(("assistant/message", {"turn": turn, "step": step, "message": {
                "id": f"a-{turn}-{step}", "role": "assistant", "content": [
                    {"type": "text", "text": _text(turn + step, 30)},
                    {"type": "tool-call", "id": call_id, "name": "todo_write", "arguments": {"todos": todos}}]}},
                "append", None))
            batch.append(("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "todo_write",
                                        "arguments": {"todos": todos}}, None, None))
            batch.append(("todo/write", {"todos": todos}, None, None))
            batch.append(("tool/result", {"turn": turn, "step": step, "message": {
                "source": {"kind": "tool", "callId": call_id}, "content": [{
                    "type": "tool-result", "toolCallId": call_id,
                    "content": [{"type": "text", "text": "Updated todo list: " + _text(step, 12)}],
                    "isError": False}], "role": "user", "id": f"r-{turn}-{step}"}}, "append", [-3]))
            batch.append(("step/end", {"turn": turn, "step": step}, None, None))
        batch.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, None, None))
        for kind, data, surface_op, sources in batch:
            if seq >= count:
                return
            yield kind, data, surface_op, None if sources is None else [seq + sources[0]]
            seq += 1


def append_all(root: Path, compression: str, count: int, *, flush_turns: bool = False,
               stop_before_last_turn_end: bool = False) -> tuple[float, Path]:
    """Append ``count`` mix events through the runtime; returns (appends/s until durable, the log path)."""
    ctx = open_runtime(root, compression=compression)
    try:
        session = ctx.sessions.create("bench", cwd="/bench")
        append = session.append
        flush = ctx.session_persistence.flush
        start = time.perf_counter()
        for kind, data, surface_op, sources in mix(count):
            append(kind, data, surface_op=surface_op, source_event_seqs=sources)
            if flush_turns and kind == "turn/end":
                flush("bench")
        flush()
        rate = count / (time.perf_counter() - start)
        where = ctx.session_persistence.locate("bench")
        assert where is not None
    finally:
        ctx.dispose()
    return rate, Path(where)


def median_time(fn: Any, repeat: int) -> float:
    return median_times(fn, repeat)[0]


def median_times(fn: Any, repeat: int) -> tuple[float, float]:
    """Median wall-clock and median CPU seconds of ``repeat`` calls (on a shared machine the wall clock swings with
    the load; the process's CPU time much less)."""
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - start_cpu)
        times.append(time.perf_counter() - start)
    return statistics.median(times), statistics.median(cpu)


def peak_rss(log: Path) -> tuple[int, int]:
    """Peak resident memory (VmHWM, bytes) of a fresh interpreter after importing the reader, and after its pass.

    VmHWM belongs to the process's own address space; ``ru_maxrss`` would not do here, as Linux carries it over
    from the (large) parent across fork and exec.
    """
    code = (
        "import sys\n"
        "def hwm():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            return int(line.split()[1]) * 1024\n"
        "from dsh_todo.logview import read_plan\n"
        "before = hwm()\n"
        "assert not read_plan(sys.argv[1]).health.refused\n"
        "print(before, hwm())\n")
    out = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    return before, after


def bench_logs(events: int, repeat: int, workdir: Path) -> None:
    for compression in ("none", "zstd"):
        root = workdir / f"log-{compression}"
        rate, log = append_all(root, compression, events)
        size = log.stat().st_size
        print(f"\n== {events:,} events, compression {compression!r}: {size / 1e6:.1f} MB on disk "
              f"(written through Session.append at {rate:,.0f} appends/s, default 200 ms window) ==")
        checkpoint = log.parent / CHECKPOINT_NAME
        saved = checkpoint.read_bytes()

        checkpoint.unlink()
        assert read_plan(log).source == "scan"
        scan, scan_cpu = median_times(lambda: read_plan(log), repeat)  # noqa: B023
        print(f"cold read to the standing plan and a verdict (read_plan, one checked pass: runs of lines proven in "
              f"bulk, the rest parsed): median {scan * 1000:.0f} ms = {events / scan / 1e6:.2f} M events/s "
              f"(CPU {scan_cpu * 1000:.0f} ms = {events / scan_cpu / 1e6:.2f} M events/s)")
        start = time.perf_counter()
        full = read_session(log)
        full_time = time.perf_counter() - start
        assert full.plan == read_plan(log).plan and full.health == read_plan(log).health
        print(f"exact full read (read_session, every event kept, 1 run): {full_time:.2f} s = "
              f"{events / full_time / 1e6:.2f} M events/s")
        del full

        tracemalloc.start()
        view = read_plan(log)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert view.as_of_seq == events - 1
        before, after = peak_rss(log)
        print(f"read_plan peak memory: tracemalloc {peak / 1e6:.1f} MB; a fresh process peaks at {before / 1e6:.1f} "
              f"MB resident after imports and {after / 1e6:.1f} MB after the pass (log: {size / 1e6:.1f} MB on disk, "
              f"{events:,} events)")

        checkpoint.write_bytes(saved)
        assert read_plan(log).source == "checkpoint"
        proven = median_time(lambda: read_plan(log), max(repeat * 3, 15))  # noqa: B023
        assert read_plan(log).health == view.health and read_plan(log).plan == view.plan
        before, after = peak_rss(log)
        print(f"cold read from the checkpoint, its proof checked (read_plan, the same verdict): median "
              f"{proven * 1000:.1f} ms = {events / proven / 1e6:.1f} M events/s; a fresh process peaks at "
              f"{after / 1e6:.1f} MB ({before / 1e6:.1f} MB after imports)")
        shutil.rmtree(root)


def append_in_memory(count: int) -> float:
    """The ceiling: the same appends with no persistence mounted (sessions, projections, the todo tool's unit)."""
    ctx = open_runtime(None)
    try:
        session = ctx.sessions.create("bench", cwd="/bench")
        append = session.append
        start = time.perf_counter()
        for kind, data, surface_op, sources in mix(count):
            append(kind, data, surface_op=surface_op, source_event_seqs=sources)
        return count / (time.perf_counter() - start)
    finally:
        ctx.dispose()


def bench_appends(count: int, repeat: int, workdir: Path) -> None:
    print(f"\n== batched durable appends: {count:,} events through Session.append + the plugins ==")
    ceiling: list[float] = []
    ceiling_cpu: list[float] = []
    variants = [(compression, flush_turns) for compression in ("none", "zstd") for flush_turns in (False, True)]
    rates: dict[tuple[str, bool], list[float]] = {variant: [] for variant in variants}
    cpu: dict[tuple[str, bool], list[float]] = {variant: [] for variant in variants}
    for sample in range(repeat):  # interleaved: a change of load on the shared machine hits every series alike
        start = time.process_time()
        ceiling.append(append_in_memory(count))
        ceiling_cpu.append((time.process_time() - start) / count * 1e6)
        for compression, flush_turns in variants:
            root = workdir / f"append-{compression}-{flush_turns}-{sample}"
            start = time.process_time()  # every thread of the process: the writer's encoding included
            rates[compression, flush_turns].append(append_all(root, compression, count, flush_turns=flush_turns)[0])
            cpu[compression, flush_turns].append((time.process_time() - start) / count * 1e6)
            shutil.rmtree(root)
    base_cpu = statistics.median(ceiling_cpu)
    print(f"ceiling, Session.append with no persistence mounted: median {statistics.median(ceiling):,.0f} appends/s "
          f"({base_cpu:.1f} us CPU/event)")
    for compression, flush_turns in variants:
        label = ("flushed at every turn/end (~83 events a batch)" if flush_turns
                 else "200 ms write-behind window, durable at the end")
        rate, used = rates[compression, flush_turns], statistics.median(cpu[compression, flush_turns])
        print(f"{compression:>4}, {label}: median {statistics.median(rate):,.0f} appends/s "
              f"(min {min(rate):,.0f}, max {max(rate):,.0f}); CPU {used:.1f} us/event, +{used - base_cpu:.1f} over "
              "the ceiling")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--append-events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", help="where to write the logs (default: a temporary directory)")
    parser.add_argument("--only", choices=("logs", "appends"), help="run one part only")
    args = parser.parse_args()
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="dsh-bench-"))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"logs under {workdir}")
    try:
        if args.only != "appends":
            bench_logs(args.events, args.repeat, workdir)
        if args.only != "logs":
            bench_appends(args.append_events, args.repeat, workdir)
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
