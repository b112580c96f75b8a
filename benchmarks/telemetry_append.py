"""What session telemetry adds to ``Session.append``: per event, with the seam off, mounted alone, and behind each mode.

Configurations, each booted on the standard in-memory composition, one at a time (a backend's threads must not run
while another configuration is measured), in rounds that alternate them; medians:

- ``off``: no telemetry plugin;
- ``seam``: ``@deepseek-ai/dsh-session-telemetry`` alone (no backend: nothing should be registered);
- ``disabled``: the OTel backend in its default mode (one listener that looks for ``feedback/record``);
- ``feedback-only``: the same listener, releasing nothing (no feedback event);
- ``capture``: live capture into a sink that counts (the seam's own cost: record, redact, hand-off, cursor);
- ``full``: live capture into the OTel backend, whose feeder thread hands records to the SDK's batch queue and whose
  export thread posts them to a collector on 127.0.0.1 that answers every request;
- ``full+spans``: the same with the GenAI spans on (a traces endpoint named): every appended ``turn/start`` ends
  the previous turn's ``invoke_agent`` span and starts one, on the feeder thread, so this is a span per event, the
  worst case.

Three numbers each, per event, over a burst of appends: ``path``, the appending thread's own CPU time (the append
path: what the backend's threads do meanwhile is not in it); ``wall``, the burst's wall time (their work is in it,
since they share the interpreter); and ``CPU``, the whole process's CPU time for the burst plus the disposal that
exports what is left: the whole cost.

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
from dsh_todo.standard import composition

SEAM = {"id": "telemetry", "name": "@deepseek-ai/dsh-session-telemetry"}


class Collector(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class CountingSink:
    """Keeps no record (a list of them would cost the collector, not the seam)."""

    def __init__(self) -> None:
        self.count = 0

    def emit(self, record: TelemetryRecord) -> None:
        self.count += 1


def otel_row(mode: str, url: str, events: int, spans: bool = False) -> dict[str, Any]:
    queue = {"max_queue_size": events * 2}
    config: dict[str, Any] = {"mode": mode, "exporter": {"endpoint": url}, "processor": queue,
                              "shutdownTimeoutMillis": 120_000, "spans": False}
    if spans:
        config["spans"] = {"exporter": {"endpoint": url.replace("/v1/logs", "/v1/traces")}, "processor": queue}
    return {"id": "otel", "name": "@deepseek-ai/dsh-session-telemetry-otel", "config": config}


def boot_config(name: str, url: str, events: int) -> Context:
    rows: list[dict[str, Any]] = list(composition(None))
    if name == "off":
        return boot(rows)
    if name in ("seam", "capture"):
        ctx = boot([*rows, SEAM])
        if name == "capture":
            Coordinator(ctx.sessions, CountingSink(), ctx.session_telemetry.rules, "live")
        return ctx
    mode = {"disabled": "DISABLED", "feedback-only": "FEEDBACK_ONLY", "full": "FULL", "full+spans": "FULL"}[name]
    return boot([*rows, SEAM, otel_row(mode, url, events, spans=name == "full+spans")])


def measure(name: str, url: str, events: int) -> tuple[float, float, float]:
    """(path, wall, CPU), µs per event."""
    ctx = boot_config(name, url, events)
    warm = ctx.sessions.create("warm")
    for _ in range(200):
        warm.append("turn/start", {"turn": 1})
    session = ctx.sessions.create("bench")
    append = session.append
    data = {"turn": 1}
    cpu = time.process_time()
    own = time.thread_time()
    started = time.perf_counter()
    for _ in range(events):
        append("turn/start", data)
    took = time.perf_counter() - started
    path = time.thread_time() - own
    ctx.dispose()
    whole = time.process_time() - cpu
    return path / events * 1e6, took / events * 1e6, whole / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/logs"
    names = ["off", "seam", "disabled", "feedback-only", "capture", "full", "full+spans"]
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            results[name].append(measure(name, url, args.events))
    server.shutdown()
    print(f"{args.events} appends × {args.rounds} rounds; medians, µs per event (added to off)")
    for name in names:
        cells = []
        for index, label in enumerate(("path", "wall", "CPU")):
            value = statistics.median(r[index] for r in results[name])
            base = statistics.median(r[index] for r in results["off"])
            cells.append(f"{label} {value:6.2f} ({value - base:+6.2f})")
        print(f"{name:>14}: " + "   ".join(cells))


if __name__ == "__main__":
    main()
