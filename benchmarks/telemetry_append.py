"""What session telemetry adds to ``Session.append``: per event, with the seam off, mounted alone, and behind each mode.

Configurations, each booted on the standard in-memory composition and measured interleaved (rounds of appends of a
small event to a fresh session, median per event):

- ``off``: no telemetry plugin;
- ``seam``: ``@deepseek-ai/dsh-session-telemetry`` alone (no backend: nothing should be registered);
- ``disabled``: the OTel backend in its default mode (one listener that looks for ``feedback/record``);
- ``feedback-only``: the same listener, releasing nothing (no feedback event);
- ``capture``: live capture into a list (the seam's own cost: record, redact, hand-off, cursor);
- ``full-queue``: live capture into the OpenTelemetry SDK's batch queue, its export thread kept asleep during the
  measurement (one batch holds every event; exported at disposal): the append path alone;
- ``full``: the same with the SDK's default batching, exported by its thread to a collector on 127.0.0.1 that answers
  every request (the thread shares the interpreter, so its encoding and posting count too).

Run: ``uv run python benchmarks/telemetry_append.py [--events N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dsh_todo.harness import Context, boot
from dsh_todo.harness.telemetry import Coordinator, TelemetryRecord
from dsh_todo.runtime import composition

SEAM = {"id": "telemetry", "name": "@deepseek-ai/dsh-session-telemetry"}


class Collector(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ListSink:
    def __init__(self) -> None:
        self.records: list[TelemetryRecord] = []

    def emit(self, record: TelemetryRecord) -> None:
        self.records.append(record)


def otel_row(mode: str, url: str, events: int, asleep: bool = False) -> dict[str, Any]:
    processor: dict[str, Any] = {"max_queue_size": events * 2}
    if asleep:
        processor |= {"max_export_batch_size": events * 2, "schedule_delay_millis": 3_600_000}
    return {"id": "otel", "name": "@deepseek-ai/dsh-session-telemetry-otel",
            "config": {"mode": mode, "exporter": {"endpoint": url}, "processor": processor,
                       "shutdownTimeoutMillis": 60_000}}


def boot_config(name: str, url: str, events: int) -> Context:
    rows: list[dict[str, Any]] = list(composition(None))
    if name == "off":
        return boot(rows)
    if name in ("seam", "capture"):
        ctx = boot([*rows, SEAM])
        if name == "capture":
            sink = ListSink()
            Coordinator(ctx.sessions, sink, ctx.session_telemetry.rules, "live")
        return ctx
    mode = {"disabled": "DISABLED", "feedback-only": "FEEDBACK_ONLY", "full": "FULL", "full-queue": "FULL"}[name]
    return boot([*rows, SEAM, otel_row(mode, url, events, asleep=name == "full-queue")])


def measure(ctx: Context, events: int, round_no: int) -> float:
    session = ctx.sessions.create(f"bench-{round_no}")
    append = session.append
    data = {"turn": 1}
    started = time.perf_counter()
    for _ in range(events):
        append("turn/start", data)
    took = time.perf_counter() - started
    ctx.sessions.close(session.id)
    return took / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/logs"
    names = ["off", "seam", "disabled", "feedback-only", "capture", "full-queue", "full"]
    contexts: dict[str, Context] = {name: boot_config(name, url, args.events * args.rounds) for name in names}
    results: dict[str, list[float]] = {name: [] for name in names}
    for round_no in range(args.rounds):
        for name in names:
            results[name].append(measure(contexts[name], args.events, round_no))
    for ctx in contexts.values():
        ctx.dispose()
    server.shutdown()
    base = statistics.median(results["off"])
    print(f"{args.events} appends × {args.rounds} rounds, medians")
    for name in names:
        median = statistics.median(results[name])
        print(f"{name:>14}: {median:6.2f} µs/event  ({median - base:+5.2f})")


if __name__ == "__main__":
    main()
