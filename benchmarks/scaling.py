"""How cost grows: the ``todo_write`` call against list length, live sessions and log length; durable appends/s and
cross-process push latency against concurrent writer processes, on one JSONL root and on one PostgreSQL.

    uv run --group bench python benchmarks/scaling.py [--quick | --full] [--out docs/scaling.png]
                                                      [--only call,sessions,log,writers] [--database URL]
                                                      [--save numbers.json] [--replot numbers.json]

Prints the numbers and writes a PNG of the curves (matplotlib's Agg backend, no display; matplotlib is in the
``bench`` dependency group, not ``dev``: nothing else needs it). Log axes wherever a range spans decades.

1. **List length** (1 → 1,000 items): the full in-memory call ``tool_call.py`` times (same composition, same
   CPU-time batches through its ``_calls``), once with the list resent (its items remembered from earlier calls) and
   once with every item new to the call. The work is linear in the items (every item is looked up or built, and
   checked), so the curve should be: a fixed cost, then a line.
2. **Live sessions** (1 → 10,000, each with a plan): the same 10-item call, spread over every live session in turn.
   Sessions are a dict, the call touches only its own: flat.
3. **Log length** (10 → 1,000,000 events already in the session): a session restored in bulk
   (``Session.restore``) and adopted, then the call. The first call folds the restored log into the projection cell
   once (linear, reported apart); every later call folds only its own event: flat.
4. **Writers** (1 → 16 processes on one JSONL root, then on one PostgreSQL, each its own session): every writer boots
   the standard runtime (``dsh_todo.standard.open_runtime``), appends batches of ``--batch`` events and flushes each
   (durable: fsync / commit) for the same wall-clock window; appends/s is all the writers' events over the span from
   the first start to the last end. This process follows writer 0's session through ``session_persistence.follow``
   (as ``postgres.py`` does) and takes the latency from just before each ``append`` in the writer
   (``CLOCK_MONOTONIC``, shared by the processes) to the callback here: p50/p99 at each count, and an idle floor
   first (one writer, one event flushed every 20 ms, ``postgres.py``'s remote writer), the push path's own latency
   apart from the load's. A file cannot push: the JSONL follower polls (100 ms), PostgreSQL's is woken by ``NOTIFY``.
   Without ``--database`` PostgreSQL is a throwaway local cluster with ``fsync`` on (``start_cluster``); without one
   here that half is skipped, saying why.

Medians of repeated runs; ``--quick`` runs fewer and smaller, ``--full`` more and longer. The default finishes in a
few minutes on two busy cores; machines here are shared, so quote the load with the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_todo.harness import Agent, boot
from dsh_todo.harness.context import Context
from dsh_todo.harness.frozen import FrozenDict, freeze_trusted
from dsh_todo.harness.session import Session
from dsh_todo.standard import open_runtime
from dsh_todo.testing import ClusterUnavailable, start_cluster
from postgres import PLAN, pct
from tool_call import ARGS, COMPOSITION, _calls

LIST_LENGTHS = (1, 3, 10, 30, 100, 300, 1_000)
SESSION_COUNTS = (1, 10, 100, 1_000, 10_000)
LOG_LENGTHS = (10, 100, 1_000, 10_000, 100_000, 1_000_000)
WRITER_COUNTS = (1, 2, 4, 8, 16)
STATUSES = ("completed", "in_progress", "pending")

Profile = dict[str, Any]
PROFILES: dict[str, Profile] = {
    # repeats: medians over this many batches; work: item-calls per batch (list length) or calls per batch;
    # window: seconds each writer count runs.
    "quick": {"repeats": 3, "work": 6_000, "calls": 1_000, "window": 1.0},
    "default": {"repeats": 5, "work": 15_000, "calls": 2_000, "window": 2.0},
    "full": {"repeats": 11, "work": 40_000, "calls": 5_000, "window": 5.0},
}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- 1. list length --------------------------------------------------------------------------------------------------

def _list(length: int, tag: str) -> dict[str, Any]:
    """``length`` items shaped like ``tool_call.ARGS``'s (padded content, statuses in turn), unique to ``tag``."""
    return {"todos": [{"content": f"  {tag} step {i}: do the thing number {i}  ", "status": STATUSES[i % 3]}
                      for i in range(length)]}


def bench_list_length(profile: Profile) -> dict[str, list[tuple[int, float]]]:
    """Median CPU µs per call against the list length: items resent (remembered) and items new to every call."""
    ctx = boot(COMPOSITION)
    resent: list[tuple[int, float]] = []
    new: list[tuple[int, float]] = []
    try:
        for length in LIST_LENGTHS:
            calls = max(5, profile["work"] // length)
            same = [_list(length, "resent")]
            times_resent, times_new = [], []
            for sample in range(profile["repeats"]):
                agent = Agent("bench", ctx.sessions.create(f"len-{length}-{sample}"))
                fresh = [_list(length, f"s{sample} c{n}") for n in range(calls)]
                gc.collect()
                run(_calls(ctx, [agent], same, 1))  # the resent list's items are remembered from here on
                times_resent.append(run(_calls(ctx, [agent], same, calls)))
                times_new.append(run(_calls(ctx, [agent], fresh, calls)))
                ctx.sessions.close(agent.session.id)
            resent.append((length, statistics.median(times_resent)))
            new.append((length, statistics.median(times_new)))
            print(f"  {length:>5} items: resent {resent[-1][1]:9.1f} us/call ({resent[-1][1] / length:6.2f} us/item), "
                  f"new {new[-1][1]:9.1f} us/call ({new[-1][1] / length:6.2f} us/item)", flush=True)
    finally:
        ctx.dispose()
    return {"resent": resent, "new": new}


# -- 2. live sessions ------------------------------------------------------------------------------------------------

def bench_sessions(profile: Profile) -> list[tuple[int, float]]:
    """Median CPU µs per 10-item call against the number of live sessions (each with a plan), calls spread over all."""
    points: list[tuple[int, float]] = []
    for count in SESSION_COUNTS:
        ctx = boot(COMPOSITION)
        try:
            agents = [Agent("bench", ctx.sessions.create(f"live-{index}")) for index in range(count)]
            for agent in agents:  # each has a plan
                run(ctx.tools.execute("todo_write", ARGS, agent=agent))
            gc.collect()
            times = [run(_calls(ctx, agents, [ARGS], profile["calls"])) for _ in range(profile["repeats"])]
            points.append((count, statistics.median(times)))
            print(f"  {count:>6,} live sessions: {points[-1][1]:7.1f} us/call", flush=True)
        finally:
            ctx.dispose()
            del ctx
            gc.collect()
    return points


# -- 3. log length ---------------------------------------------------------------------------------------------------

def _history(length: int) -> list[Any]:
    """``length`` frozen events in ``tool_call.bench_fold``'s mix (a ``todo/write`` every 20, a turn every 200), built
    in bulk: the data objects are shared, as the tool shares remembered items."""
    write = freeze_trusted({"todos": [dict(item) for item in ARGS["todos"]]})
    step = freeze_trusted({"turn": 1, "step": 1})
    events: list[Any] = []
    append = events.append
    for seq in range(length):
        if seq % 200 == 0:
            append(FrozenDict(type="turn/start", seq=seq, time=0, data=freeze_trusted({"turn": seq // 200 + 1})))
        elif seq % 20 == 0:
            append(FrozenDict(type="todo/write", seq=seq, time=0, data=write))
        else:
            append(FrozenDict(type="step/start", seq=seq, time=0, data=step))
    return events


def bench_log_length(profile: Profile) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(steady, first): median CPU µs per call against the events already in the session, and the first call's
    (which folds the restored log into the projection cell)."""
    steady: list[tuple[int, float]] = []
    first: list[tuple[int, float]] = []
    ctx = boot(COMPOSITION)
    try:
        for length in LOG_LENGTHS:
            session = Session(f"log-{length}")
            session.restore(_history(length))
            agent = Agent("bench", ctx.sessions.adopt(session))
            gc.collect()
            first.append((length, run(_calls(ctx, [agent], [ARGS], 1))))
            times = [run(_calls(ctx, [agent], [ARGS], profile["calls"])) for _ in range(profile["repeats"])]
            steady.append((length, statistics.median(times)))
            print(f"  {length:>9,} events: {steady[-1][1]:7.1f} us/call (first call, folding the log: "
                  f"{first[-1][1] / 1000:8.2f} ms)", flush=True)
            ctx.sessions.close(session.id)
            del session, agent
            gc.collect()
    finally:
        ctx.dispose()
    return steady, first


# -- 4. writer processes ---------------------------------------------------------------------------------------------

def writer(where: str, index: int, window: float, batch: int, stamps: bool, pause: float = 0.0) -> int:
    """One writer process: the standard runtime on ``where`` (a root, or ``URL SCHEMA``), its own session; after
    ``go`` on stdin, batches of ``batch`` appends, each flushed (durable), ``pause`` seconds after each, until
    ``window`` seconds have passed. Prints one JSON line: events made durable, seconds, and (writer 0) each append's
    start time by seq."""
    url, _, schema = where.partition(" ")
    ctx = open_runtime(database=url, schema=schema) if schema else open_runtime(url)
    try:
        session = ctx.sessions.create(f"writer-{index}")
        session.append("turn/start", {"turn": 1})
        flush = ctx.session_persistence.flush
        flush()
        print("READY", flush=True)
        sys.stdin.readline()
        append = session.append
        sent: list[tuple[int, int]] = []
        events = 0
        began = time.monotonic_ns()
        start = time.perf_counter()
        deadline = start + window
        while time.perf_counter() < deadline:
            for _ in range(batch):
                before = time.monotonic_ns()
                event = append("todo/write", {"todos": PLAN})
                if stamps:
                    sent.append((event["seq"], before))
            flush()
            events += batch
            if pause:
                time.sleep(pause)
        ended = time.monotonic_ns()
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        flush()
    finally:
        ctx.dispose()
    print(json.dumps({"events": events, "began": began, "ended": ended, "sent": sent}), flush=True)
    return 0


def writers_once(ctx: Context, where: str, count: int, window: float, batch: int,
                 pause: float = 0.0) -> tuple[float, list[float]]:
    """``count`` writer processes at once: (every writer's durable events over the span from the first one's start
    to the last one's end, writer 0's append → callback ms). Over the span, not a sum of each writer's rate: on two
    cores sixteen writers do not all start at once, and a sum would count their windows as if they overlapped."""
    processes = [subprocess.Popen([sys.executable, __file__, "--writer", where, str(index), str(window), str(batch),
                                   str(pause)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for index in range(count)]
    callback_at: dict[int, int] = {}
    lock = threading.Lock()

    def on_events(events: Sequence[Any]) -> None:
        now = time.monotonic_ns()
        with lock:
            for event in events:
                callback_at[event["seq"]] = now

    subscription = None
    try:
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "READY"
        subscription = ctx.session_persistence.follow("writer-0", 0, on_events)
        time.sleep(0.3)  # the follower has read what is there and is waiting
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        results = []
        for process in processes:
            assert process.stdout is not None
            results.append(json.loads(process.stdout.readline()))
            process.wait(60)
        sent = results[0]["sent"]
        last = sent[-1][0] if sent else 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with lock:
                if last in callback_at:
                    break
            time.sleep(0.05)
    finally:
        if subscription is not None:
            subscription.close()
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()
    with lock:
        latencies = [(callback_at[seq] - stamp) / 1e6 for seq, stamp in sent if seq in callback_at]
    assert len(latencies) == len(sent), (len(sent), len(latencies))
    span = (max(r["ended"] for r in results) - min(r["began"] for r in results)) / 1e9
    return sum(r["events"] for r in results) / span, latencies


IDLE_PAUSE = 0.02
"""The idle floor's writer: one event, flushed, every 20 ms (``postgres.py``'s remote writer)."""


def bench_writers(profile: Profile, batch: int, label: str, boot_follower: Any, where_for: Any,
                  reset: Any) -> list[tuple[int, float, float, float]]:
    """(writers, appends/s, p50 ms, p99 ms) per writer count: medians over repeats of the rate; latencies pooled.
    Count 0 is the idle floor: one writer, one event every 20 ms, so the latency is the push path's alone."""
    where = where_for(0, 0)
    ctx = boot_follower(where)
    try:
        rate, idle = writers_once(ctx, where, 1, profile["window"], 1, IDLE_PAUSE)
    finally:
        ctx.dispose()
        reset(where)
    points = [(0, rate, statistics.median(idle), pct(idle, 0.99))]
    print(f"  {label} idle floor (one event every {IDLE_PAUSE * 1000:.0f} ms): p50 {points[0][2]:7.2f} ms, "
          f"p99 {points[0][3]:7.2f} ms ({len(idle)} events)", flush=True)
    repeats = max(1, profile["repeats"] // 2)
    for count in WRITER_COUNTS:
        rates: list[float] = []
        latencies: list[float] = []
        for sample in range(repeats):
            where = where_for(count, sample)
            ctx = boot_follower(where)
            try:
                rate, lat = writers_once(ctx, where, count, profile["window"], batch)
            finally:
                ctx.dispose()
                reset(where)
            rates.append(rate)
            latencies += lat
        points.append((count, statistics.median(rates), statistics.median(latencies), pct(latencies, 0.99)))
        print(f"  {label} {count:>2} writers: {points[-1][1]:9,.0f} durable appends/s; writer 0 → follower here "
              f"p50 {points[-1][2]:7.2f} ms, p99 {points[-1][3]:7.2f} ms ({len(latencies)} events)", flush=True)
    return points


def bench_jsonl(profile: Profile, batch: int) -> list[tuple[int, float, float, float]]:
    scratch = Path(tempfile.mkdtemp(prefix="dsh-todo-scaling-"))
    try:
        return bench_writers(profile, batch, "JSONL",
                             lambda where: open_runtime(where),
                             lambda count, sample: str(scratch / f"root-{count}-{sample}"),
                             lambda where: shutil.rmtree(where, ignore_errors=True))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def bench_postgres(profile: Profile, batch: int, database: str | None) -> list[tuple[int, float, float, float]] | None:
    import psycopg

    try:
        cluster = None if database else start_cluster(durable=True)
    except ClusterUnavailable as exc:
        print(f"  PostgreSQL skipped: {exc}")
        return None
    url = database or (cluster.url if cluster else "")

    def drop(where: str) -> None:
        schema = where.partition(" ")[2]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    try:
        with psycopg.connect(url) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            fsync = conn.execute("SHOW fsync").fetchone()
        print(f"  PostgreSQL {version[0] if version else '?'} "
              f"({'given server' if database else 'throwaway local cluster'}, fsync={fsync[0] if fsync else '?'})")
        return bench_writers(profile, batch, "PostgreSQL",
                             lambda where: open_runtime(database=url, schema=where.partition(" ")[2]),
                             lambda count, sample: f"{url} scaling_{secrets.token_hex(4)}",
                             drop)
    finally:
        if cluster is not None:
            cluster.stop()


# -- the plot --------------------------------------------------------------------------------------------------------

def plot(results: dict[str, Any], out: Path, caption: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    (length_ax, item_ax, sessions_ax), (log_ax, rate_ax, latency_ax) = axes

    if "call" in results:
        for name, marker in (("resent", "o"), ("new", "s")):
            xs, ys = zip(*results["call"][name], strict=True)
            length_ax.plot(xs, ys, marker=marker, label=f"items {name}")
            item_ax.plot(xs, [y / x for x, y in zip(xs, ys, strict=True)], marker=marker, label=f"items {name}")
        xs, ys = zip(*results["call"]["new"], strict=True)
        length_ax.plot(xs, [ys[-1] * x / xs[-1] for x in xs], ls=":", color="grey", label="linear")
        length_ax.set(xscale="log", yscale="log", xlabel="items in the list", ylabel="CPU µs per call",
                      title="todo_write call vs list length")
        item_ax.set(xscale="log", yscale="log", xlabel="items in the list", ylabel="CPU µs per item",
                    title="the same, per item")
        length_ax.legend()
        item_ax.legend()
    if "sessions" in results:
        xs, ys = zip(*results["sessions"], strict=True)
        sessions_ax.plot(xs, ys, marker="o", label="10-item call, spread over all sessions")
        sessions_ax.set(xscale="log", xlabel="live sessions in the process (each with a plan)",
                        ylabel="CPU µs per call", title="todo_write call vs live sessions", ylim=(0, max(ys) * 1.5))
        sessions_ax.legend()
    if "log" in results:
        xs, ys = zip(*results["log"]["steady"], strict=True)
        log_ax.plot(xs, ys, marker="o", label="10-item call (steady)")
        log_ax.set(xscale="log", xlabel="events already in the session", ylabel="CPU µs per call",
                   title="todo_write call vs log length", ylim=(0, max(ys) * 1.5))
        first_ax = log_ax.twinx()
        fx, fy = zip(*results["log"]["first"], strict=True)
        first_ax.plot(fx, [y / 1000 for y in fy], marker="^", ls="--", color="tab:red",
                      label="first call after a restore (folds the log), ms")
        first_ax.plot(fx, [fy[-1] / 1000 * x / fx[-1] for x in fx], ls=":", color="grey", label="linear")
        first_ax.set(yscale="log", ylabel="first call, ms", ylim=(min(fy) / 1000 / 3, max(fy) / 1000 * 3))
        lines = log_ax.get_lines() + first_ax.get_lines()
        log_ax.legend(lines, [line.get_label() for line in lines], loc="upper left")
    for name, color in (("jsonl", "tab:blue"), ("postgres", "tab:green")):
        points = results.get(name)
        if not points:
            continue
        label = "JSONL root" if name == "jsonl" else "PostgreSQL"
        idle, points = points[0], points[1:]
        xs = [p[0] for p in points]
        rate_ax.plot(xs, [p[1] for p in points], marker="o", color=color, label=label)
        latency_ax.plot(xs, [p[2] for p in points], marker="o", color=color, label=f"{label} p50")
        latency_ax.plot(xs, [p[3] for p in points], marker="v", ls="--", color=color, label=f"{label} p99")
        latency_ax.axhline(idle[2], ls=":", color=color, label=f"{label} p50, idle")
    rate_ax.set_ylim(bottom=0)
    rate_ax.set(xlabel="concurrent writer processes (a session each)",
                ylabel="durable appends/s, all writers", title="durable appends vs writer processes")
    rate_ax.set_xscale("log", base=2)
    rate_ax.set_xticks(list(WRITER_COUNTS), [str(c) for c in WRITER_COUNTS])
    latency_ax.set(yscale="log", xlabel="concurrent writer processes", ylabel="ms, append → follower callback",
                   title="cross-process push latency (writer 0 followed)")
    latency_ax.set_xscale("log", base=2)
    latency_ax.set_xticks(list(WRITER_COUNTS), [str(c) for c in WRITER_COUNTS])
    if rate_ax.get_lines():
        rate_ax.legend()
        bottom, top = latency_ax.get_ylim()
        latency_ax.set_ylim(bottom, top * 20)  # room above the curves for the legend
        latency_ax.legend(fontsize=7, ncol=2, loc="upper left")
    for ax in axes.flat:
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"dsh-todo: how cost grows ({caption})")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer, smaller runs (iteration)")
    size.add_argument("--full", action="store_true", help="more, longer runs")
    parser.add_argument("--only", default="call,sessions,log,writers",
                        help="comma-separated parts: call, sessions, log, writers")
    parser.add_argument("--batch", type=int, default=100, help="events per flushed batch of a writer process")
    parser.add_argument("--database", default=os.environ.get("DSH_TODO_DATABASE_URL"),
                        help="a PostgreSQL URL (default: a throwaway local cluster)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "scaling.png")
    parser.add_argument("--save", type=Path, help="also write the numbers as JSON here")
    parser.add_argument("--replot", type=Path, metavar="JSON", help="plot numbers saved by --save; measure nothing")
    parser.add_argument("--writer", nargs=5, metavar=("WHERE", "INDEX", "WINDOW", "BATCH", "PAUSE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        where, index, window, batch, pause = args.writer
        return writer(where, int(index), float(window), int(batch), index == "0", float(pause))

    if args.replot:
        saved = json.loads(args.replot.read_text())
        plot(saved["results"], args.out, saved["caption"])
        return 0
    profile = PROFILES["quick" if args.quick else "full" if args.full else "default"]
    parts = set(args.only.split(","))
    load = os.getloadavg()[0]
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {load:.1f} at the start", flush=True)
    results: dict[str, Any] = {}
    started = time.perf_counter()
    if "call" in parts:
        print("== 1. the full todo_write call vs list length (CPU time) ==", flush=True)
        results["call"] = bench_list_length(profile)
    if "sessions" in parts:
        print("== 2. the 10-item call vs live sessions in one process (CPU time) ==", flush=True)
        results["sessions"] = bench_sessions(profile)
    if "log" in parts:
        print("== 3. the 10-item call vs events already in its session (CPU time) ==", flush=True)
        steady, first = bench_log_length(profile)
        results["log"] = {"steady": steady, "first": first}
    if "writers" in parts:
        print(f"== 4. durable appends/s vs writer processes ({args.batch}-event batches, each flushed), "
              f"{profile['window']:.0f} s windows ==", flush=True)
        results["jsonl"] = bench_jsonl(profile, args.batch)
        results["postgres"] = bench_postgres(profile, args.batch, args.database)
    end_load = os.getloadavg()[0]
    print(f"done in {time.perf_counter() - started:.0f} s; load {load:.1f} → {end_load:.1f}", flush=True)
    caption = (f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
               f"load {load:.1f}–{end_load:.1f}; CPU time for the call, wall time for the writers")
    if args.save:
        args.save.write_text(json.dumps({"caption": caption, "results": results}))
    plot(results, args.out, caption)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
