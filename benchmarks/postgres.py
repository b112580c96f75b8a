"""PostgreSQL persistence: how fast appends become durable, and how soon another process sees them.

    uv run python benchmarks/postgres.py [--database URL] [--events N] [--pushes N]

Without ``--database`` (or ``$DSH_TODO_DATABASE_URL``) it starts a throwaway local cluster with default durability
(``fsync`` on, ``synchronous_commit`` on), so commit numbers include a real WAL flush. Everything runs in a scratch
schema that is dropped afterwards.

1. **Batched appends**: ``Session.append`` as fast as the caller can, the write-behind window (200 ms) cutting
   batches, each batch one transaction; appends/s from the first append until everything is durable.
2. **One event per transaction**: append then ``flush()`` each time (the MCP server's per-call flush pattern).
3. **Append → remote**: another process appends one event and flushes, every 20 ms; this process has a follower
   (``session_persistence.follow``) and a web server (``dsh-todo web`` over the same database) with an SSE client
   on ``/api/events.mux``. Latency is from just before ``append`` in the writer to the callback / the SSE frame here
   (both processes read the same ``CLOCK_MONOTONIC``).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from dsh_todo.harness import Context, boot
from dsh_todo.testing import database_composition, start_cluster

PLAN = [{"content": "read the failing test and the code it covers", "status": "completed"},
        {"content": "write the fix", "status": "in_progress"},
        {"content": "run the whole suite", "status": "pending"}]


def rows(url: str, schema: str, delay_ms: int = 200) -> list[dict[str, Any]]:
    """The standard runtime on ``url``, in the benchmark's scratch schema."""
    return database_composition(url, schema=schema, batch_delay_ms=delay_ms)


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def batched(url: str, schema: str, count: int) -> tuple[float, int]:
    ctx = boot(rows(url, schema))
    try:
        session = ctx.sessions.create("bench-batched")
        session.append("turn/start", {"turn": 1})
        ctx.session_persistence.flush()
        start = time.perf_counter()
        for _ in range(count):
            session.append("todo/write", {"todos": PLAN})
        ctx.session_persistence.flush()
        elapsed = time.perf_counter() - start
        stored = ctx.session_persistence.read("bench-batched")
        assert len(stored.events) == count + 1
        return count / elapsed, len(set(stored.batches)) - 1
    finally:
        ctx.dispose()


def per_event(url: str, schema: str, count: int) -> tuple[float, list[float]]:
    ctx = boot(rows(url, schema))
    try:
        session = ctx.sessions.create("bench-single")
        session.append("turn/start", {"turn": 1})
        ctx.session_persistence.flush()
        latencies = []
        start = time.perf_counter()
        for _ in range(count):
            t0 = time.perf_counter()
            session.append("todo/write", {"todos": PLAN})
            ctx.session_persistence.flush()
            latencies.append((time.perf_counter() - t0) * 1000)
        return count / (time.perf_counter() - start), latencies
    finally:
        ctx.dispose()


def writer(url: str, schema: str, count: int, pause: float) -> int:
    """The remote process: one append + flush every ``pause`` seconds, printing when each append started."""
    ctx = boot(rows(url, schema, delay_ms=5))
    try:
        session = ctx.sessions.create("bench-remote")
        session.append("turn/start", {"turn": 1})
        ctx.session_persistence.flush()
        print("READY", flush=True)
        sys.stdin.readline()
        for _ in range(count):
            time.sleep(pause)
            before = time.monotonic_ns()
            event = session.append("todo/write", {"todos": PLAN})
            ctx.session_persistence.flush()
            print(f"T {event['seq']} {before}", flush=True)
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        ctx.session_persistence.flush()
    finally:
        ctx.dispose()
    return 0


def remote(url: str, schema: str, count: int) -> tuple[list[float], list[float]]:
    from dsh_todo.carriers.web.server import BackgroundServer

    ctx: Context = boot(rows(url, schema))
    server = BackgroundServer(ctx, port=0)
    server.start()
    process = subprocess.Popen([sys.executable, __file__, "--writer", url, schema, str(count)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    callback_at: dict[int, int] = {}
    frame_at: dict[int, int] = {}
    try:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline().strip() == "READY"

        def on_events(events: Sequence[Any]) -> None:
            now = time.monotonic_ns()
            for event in events:
                callback_at[event["seq"]] = now

        subscription = ctx.session_persistence.follow("bench-remote", 0, on_events)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/api/events.mux?sessionId=bench-remote")
        response = conn.getresponse()
        done = threading.Event()

        def read_frames() -> None:
            while not done.is_set():
                line = response.readline()
                if not line:
                    return
                if line.startswith(b"data: "):
                    now = time.monotonic_ns()
                    payload = json.loads(line[6:])["payload"]
                    if payload["type"] == "session/event":
                        frame_at[payload["event"]["seq"]] = now
                        if payload["event"]["type"] == "turn/end":
                            return

        reader = threading.Thread(target=read_frames, daemon=True)
        reader.start()
        time.sleep(0.3)  # the stream is subscribed
        process.stdin.write("go\n")
        process.stdin.flush()
        sent: dict[int, int] = {}
        for line in process.stdout:
            _tag, seq, stamp = line.split()
            sent[int(seq)] = int(stamp)
        process.wait(60)
        reader.join(10)
        done.set()
        subscription.close()
        conn.close()
    finally:
        with contextlib.suppress(Exception):
            process.kill()
        server.stop()
        ctx.dispose()
    to_callback = [(callback_at[seq] - stamp) / 1e6 for seq, stamp in sent.items() if seq in callback_at]
    to_frame = [(frame_at[seq] - stamp) / 1e6 for seq, stamp in sent.items() if seq in frame_at]
    assert len(to_callback) == len(sent) == len(to_frame), (len(sent), len(to_callback), len(to_frame))
    return to_callback, to_frame


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DSH_TODO_DATABASE_URL"))
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--pushes", type=int, default=300)
    parser.add_argument("--writer", nargs=3, metavar=("URL", "SCHEMA", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        url, schema, count = args.writer
        return writer(url, schema, int(count), 0.02)

    import psycopg

    cluster = None if args.database else start_cluster(durable=True)
    url = args.database or (cluster.url if cluster else "")
    schema = f"bench_{secrets.token_hex(4)}"
    try:
        with psycopg.connect(url) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            fsync = conn.execute("SHOW fsync").fetchone()
        where = "throwaway local cluster" if cluster else "given server"
        print(f"PostgreSQL {version[0] if version else '?'} ({where}, fsync={fsync[0] if fsync else '?'}), "
              f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
        rate, batches = batched(url, schema, args.events)
        print(f"batched appends: {rate:,.0f} events/s ({args.events} events, {batches} transactions)")
        commits, latencies = per_event(url, schema, args.commits)
        print(f"one event per transaction: {commits:,.0f} commits/s, append+flush p50 {pct(latencies, 0.5):.2f} ms, "
              f"p99 {pct(latencies, 0.99):.2f} ms")
        to_callback, to_frame = remote(url, schema, args.pushes)
        print(f"append in another process → follower callback here: p50 {statistics.median(to_callback):.2f} ms, "
              f"p99 {pct(to_callback, 0.99):.2f} ms ({len(to_callback)} events)")
        print(f"append in another process → SSE frame from the web server here: p50 "
              f"{statistics.median(to_frame):.2f} ms, p99 {pct(to_frame, 0.99):.2f} ms")
    finally:
        with contextlib.suppress(Exception), psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
