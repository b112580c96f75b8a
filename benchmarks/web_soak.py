"""Soak ``dsh-todo web``: sequential SSE clients and clients that never read, while another process writes a log.

``dsh-todo web --root R`` runs as a subprocess. A second process writes one session under ``R`` (``--events``
events, ``--rate`` per second, in turns of a ``turn/start``, a user message, ``todo/write``s and a ``turn/end``),
so the server follows a growing file. Meanwhile:

- ``--slow`` clients open ``/api/events.mux?sessionId=…`` and never read a byte (a small receive buffer);
- ``--clients`` sequential clients each open the same stream, read ``: connected`` and the ``session/subscribed``
  frame, and close;
- one fast reader stays connected and reads every frame: its lag is the time from an event's ``time`` (stamped
  when the writer appended it) to its frame's arrival, which includes the writer's batching (its events reach the
  file every 200 ms or so) and the follower's 100 ms look at the file.

Printed: open fds and RSS before (after warm-up), during (sampled) and after (every client gone), peak RSS
(``VmHWM``), the server's CPU while the log grew, and the fast reader's lag (median, p99, max). Target: RSS and
fds flat (after ≈ before), lag well under a second, CPU a fraction of a core.

Run: ``uv run python benchmarks/web_soak.py`` (50k events, 2,000 clients, 20 slow readers; several minutes) or
``--quick`` (5k events, 200 clients, 5 slow readers). Bounded: ``--deadline`` seconds at most, then everything is
stopped.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from dsh_todo.testing import memory_kb, open_fds, stop

WRITER = r"""
import sys, time
from dsh_todo.standard import open_runtime

root, session_id = sys.argv[1], sys.argv[2]
prefill, total, rate = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
ctx = open_runtime(root)
session = ctx.sessions.create(session_id)


def turns():
    turn = 0
    while True:
        turn += 1
        yield "turn/start", {"turn": turn}, None
        yield "user/message", {"turn": turn, "message": {"role": "user", "content": f"turn {turn}"}}, "append"
        for k in range(7):
            yield "todo/write", {"todos": [{"content": f"turn {turn} step {k}", "status": "in_progress"},
                                           {"content": "the rest", "status": "pending"}]}, None
        yield "turn/end", {"turn": turn, "reason": {"kind": "completed"}}, None


events = turns()
for _ in range(prefill):
    kind, data, op = next(events)
    session.append(kind, data, surface_op=op)
ctx.session_persistence.flush()
print("ready", flush=True)
started = time.monotonic()
for written in range(1, total + 1):
    kind, data, op = next(events)
    session.append(kind, data, surface_op=op)
    ahead = written / rate - (time.monotonic() - started)
    if ahead > 0:
        time.sleep(ahead)
ctx.session_persistence.flush()
ctx.dispose()
print("done", flush=True)
"""




def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class Stream:
    """One SSE connection read line by line."""

    def __init__(self, host: str, path: str) -> None:
        self.conn = http.client.HTTPConnection(host, timeout=60)
        self.conn.request("GET", path, headers={"accept": "text/event-stream"})
        self.response = self.conn.getresponse()

    def payload(self) -> dict[str, Any] | None:
        """The next frame's payload (``None`` at the end of the stream); comments and pings are skipped."""
        while True:
            line = self.response.readline()
            if not line:
                return None
            if line.startswith(b"data: "):
                payload: dict[str, Any] = json.loads(line[6:])["payload"]
                return payload

    def close(self) -> None:
        self.conn.close()


class FastReader(threading.Thread):
    """Reads every frame of one session; notes each event's lag (arrival − the event's ``time``)."""

    def __init__(self, host: str, session_id: str, first: int, total: int) -> None:
        super().__init__(daemon=True)
        after = "&afterSeq=-1" if first == 0 else ""  # after a prefill: from now on
        self.stream = Stream(host, f"/api/events.mux?sessionId={session_id}{after}")
        self.first = first
        self.total = total
        self.subscribed = threading.Event()
        self.lags: list[float] = []
        self.last_seq = -1
        self.ended = False

    def run(self) -> None:
        while self.last_seq < self.total - 1:
            payload = self.stream.payload()
            if payload is None:
                self.ended = True
                self.subscribed.set()
                return
            self.subscribed.set()
            if payload["type"] == "session/event":
                event = payload["event"]
                if event["seq"] >= self.first:
                    self.lags.append(time.time() * 1000 - event["time"])
                self.last_seq = max(self.last_seq, event["seq"])


def slow_reader(port: int, host: str, session_id: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET /api/events.mux?sessionId={session_id} HTTP/1.1\r\nHost: {host}\r\n"
                 "Accept: text/event-stream\r\n\r\n".encode())
    return sock


def one_client(host: str, session_id: str) -> None:
    stream = Stream(host, f"/api/events.mux?sessionId={session_id}")
    try:
        payload = stream.payload()
        if payload is None or payload["type"] != "session/subscribed":
            raise RuntimeError(f"unexpected first frame: {payload}")
    finally:
        stream.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000, help="events written while clients come and go")
    parser.add_argument("--prefill", type=int, default=0,
                        help="events written at full speed first (``--prefill 50000 --events 300 --rate 10 "
                             "--clients 0 --slow 0``: a trickle into a long log)")
    parser.add_argument("--rate", type=float, default=500.0, help="events per second the writer appends")
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--slow", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=900.0, help="stop everything after this many seconds")
    parser.add_argument("--quick", action="store_true", help="5k events, 200 clients, 5 slow readers")
    args = parser.parse_args()
    if args.quick:
        args.events, args.clients, args.slow = 5_000, 200, 5
    session_id = "soak"
    env = {k: v for k, v in os.environ.items() if k != "DSH_TODO_ROOT"}
    with tempfile.TemporaryDirectory() as tmp:
        root = str(Path(tmp) / "sessions")
        server = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "web", "--port", "0", "--root", root],
                                  cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        writer: subprocess.Popen[str] | None = None
        slow: list[socket.socket] = []
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            if not url:
                raise SystemExit("the server exited before listening")
            host = url.split("//", 1)[1].split("/", 1)[0]
            port = int(host.rsplit(":", 1)[1])
            for _ in range(20):
                one_client(host, "warm-up")
            time.sleep(0.5)
            fds_before, rss_before = open_fds(server.pid), memory_kb(server.pid, "VmRSS")

            writer = subprocess.Popen([sys.executable, "-c", WRITER, root, session_id, str(args.prefill),
                                       str(args.events), str(args.rate)], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, text=True)
            assert writer.stdout is not None
            writer.stdout.readline()  # ready: the session exists, and the prefill (if any) is on disk
            total = args.prefill + args.events
            fast = FastReader(host, session_id, args.prefill, total)
            fast.start()
            fast.subscribed.wait(60)  # the server has read the log once (the prefill): measure what follows
            slow = [slow_reader(port, host, session_id) for _ in range(args.slow)]
            started = time.monotonic()
            cpu_start = cpu_seconds(server.pid)
            peak_rss, peak_fds, done, writing_s = rss_before, fds_before, 0, 0.0
            while time.monotonic() - started < args.deadline:
                if done < args.clients:
                    one_client(host, session_id)
                    done += 1
                else:
                    time.sleep(0.05)
                if done % 20 == 0:
                    peak_rss = max(peak_rss, memory_kb(server.pid, "VmRSS"))
                    peak_fds = max(peak_fds, open_fds(server.pid))
                if not writing_s and writer.poll() is not None:
                    if writer.returncode:
                        raise SystemExit(f"the writer failed (exit {writer.returncode})")
                    writing_s = time.monotonic() - started
                    cpu_writing = cpu_seconds(server.pid) - cpu_start
                if writing_s and done >= args.clients and (fast.last_seq >= total - 1 or fast.ended):
                    break
            elapsed = time.monotonic() - started
            fast.join(timeout=30)
            fast.stream.close()
            for sock in slow:
                sock.close()
            slow = []
            time.sleep(12)  # the follower lingers 10 s after its last connection
            fds_after, rss_after = open_fds(server.pid), memory_kb(server.pid, "VmRSS")
            hwm = memory_kb(server.pid, "VmHWM")
            alive = server.poll() is None
        finally:
            for sock in slow:
                sock.close()
            if writer is not None:
                stop(writer, timeout=30)
            stop(server, timeout=30)
    lags = fast.lags
    prefilled = f"{args.prefill} events, then " if args.prefill else ""
    print(f"writer: {prefilled}{args.events} events at {args.rate:.0f}/s in {writing_s:.1f} s; "
          f"{done} sequential clients, {args.slow} slow readers, {elapsed:.1f} s in all; server alive: {alive}")
    print(f"open fds: {fds_before} before, {fds_after} after (peak sampled {peak_fds})")
    print(f"RSS: {rss_before / 1024:.1f} MiB after warm-up, {rss_after / 1024:.1f} MiB after, "
          f"peak {max(peak_rss, hwm) / 1024:.1f} MiB (VmHWM)")
    if writing_s:
        print(f"server CPU while the log grew: {cpu_writing:.1f} s over {writing_s:.1f} s "
              f"({100 * cpu_writing / writing_s:.0f}% of a core)")
    if lags:
        print(f"fast reader: {len(lags)} events (last seq {fast.last_seq}), "
              f"lag median {statistics.median(lags):.0f} ms, p99 {percentile(lags, 99):.0f} ms, max {max(lags):.0f} ms")
    ok = alive and fast.last_seq == total - 1 and fds_after <= fds_before + 4
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
