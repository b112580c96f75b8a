"""Reading DeepSeek Harness 0.2's logs: our cold plan read in events/s, and against the time ``dsh`` needs to open.

1. **Cold plan read of a format-v4 log** (issue goal: ≥ 1M events/s, whole process). A log of ``--events`` events
   (1,000,000) shaped like the ones ``dsh`` 0.2.1 writes (the templates of its system prompt, runtime context and
   request header come from the ``two-turns`` fixture DSH wrote): turns of ``--steps-per-turn`` steps, each
   ``step/start``, ``session-log-deepseek/delivery-accepted``, an ``assistant/message`` with its ``stream`` list
   (``chunk``, ``reasoning-chunks``, ``tool-call-chunks`` entries), ``tool/call``, ``todo/write`` (one call in ten
   refused: none), ``tool/result`` in v4's ``role: tool`` shape with ``sourceEventSeqs``, ``step/end``; a turn opens
   with ``agent/inbox/spliced``, ``turn/start``, ``user/message`` and ``request/header`` (the first turn also with
   ``system/message`` and the runtime context) and ends with a text step and ``turn/end``. Written with the
   project's own encoder, raw and zstd (a header frame, then one frame per ``--batch`` events, as DSH writes a frame
   per durable batch). Then ``dsh-todo plan --json --root ROOT ID`` as a fresh process (``python -m
   dsh_todo.cli``), spawn to exit, ``--runs`` times per encoding, alternating: events / median wall time, and the
   plan it printed checked against the log's last accepted list.
2. **Against ``dsh`` on a session ``dsh`` wrote**: one ``dsh headless`` turn against a scripted model that makes
   ``--dsh-steps`` ``todo_write`` calls (DSH's default zstd encoding), then alternating, ``--dsh-runs`` rounds:
   (a) ``dsh-todo plan --json`` on it, whole process; (b) ``dsh headless --json --session-id ID x`` in the session's
   folder, on a fresh copy of the home each time, from spawn until the model endpoint has the first model request's
   headers (then ``dsh`` is killed); (c) ``dsh web``: spawn until its URL answers (start-up), then ``GET
   /api/session.export?sessionId=ID`` (the first export of that process, then a second). Medians and the ratio
   ours/theirs (goal ≤ 0.2×). The same three on a synthetic log of ``--dsh-events`` (100,000) events, zstd, as a
   second point (``dsh`` resumes our writer's logs), ``--dsh-events-runs`` rounds. ``--skip-dsh`` leaves part 2 out.

``dsh`` is the pinned ``deepseek-harness-runtime-bin`` console script beside this interpreter (dev group, Linux
x86-64). Medians throughout; the load average is printed before and after, since the machine is shared. Run: ``uv
run python benchmarks/dsh_v4.py [--events N] [--runs N] [--dsh-steps N] [--dsh-runs N] [--skip-dsh]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from http.cookiejar import CookieJar
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.dsh

from tests.carriers.mcp.agents.common import fake_model
from tests.dsh.model import Say, Step, call, steps
from tests.dsh.runtime import VERSION, Home, Scratch, log_lines, log_of, start_turn, turn_of

from dsh_todo.harness.persistence.jsonl.paths import Compression, log_path
from dsh_todo.harness.persistence.jsonl.writer import encode_batch, encode_header

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "dsh-sessions-v4" / "two-turns" / "none" / "store"
STATUSES = ("completed", "in_progress", "pending")
_PROSE = ("the parser module reads each token and the writer keeps a buffer of lines so that retries stay idempotent "
          "while tests cover edge cases like empty input unicode ünïcödé and very long paths")
WORDS = tuple(_PROSE.split(" "))


def _text(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + k * 3) % len(WORDS)] for k in range(words))


def load_avg() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# -- 1. a synthetic log shaped like DSH 0.2.1's ---------------------------------------------------------------------

def _templates() -> dict[str, Any]:
    """The bulky records DSH writes at a turn's start (system prompt, runtime context, request header), from the
    fixture ``dsh`` 0.2.1 wrote: their size is what a reader has to get through."""
    log = next(FIXTURE.glob("*/*/session.v4.jsonl"))
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    found: dict[str, Any] = {}
    for record in records:
        kind = record["type"]
        if kind == "system/message" and "system" not in found:
            found["system"] = record["data"]["message"]
        elif kind == "request/header" and "header" not in found:
            found["header"] = record["data"]
        elif kind == "request/context" and "request" not in found:
            found["request"] = record["data"]
        elif kind in ("permission/preset", "sandbox/mode", "approval/policy"):
            found.setdefault("preamble", []).append((kind, record["data"], {}))
        elif kind == "user/message" and "context" not in found and "runtime context" in json.dumps(record):
            found["context"] = record["data"]
    assert set(found) == {"system", "header", "context", "request", "preamble"}, sorted(found)
    return found


def _todos(turn: int, step: int) -> list[dict[str, str]]:
    return [{"content": _text(turn * 5 + step + k, 6), "status": STATUSES[(turn + step + k) % 3]} for k in range(5)]


def _stream(now: int, reasoning: str, call_id: str | None, args: str | None, words: str | None) -> list[Any]:
    entries: list[Any] = [
        {"type": "chunk", "time": now, "chunk": {"type": "block-start", "index": 0, "blockType": "reasoning"}},
        {"type": "reasoning-chunks", "time0": now, "index": 0, "dt": [1, 1, 2],
         "texts": [reasoning[k:k + 12] for k in range(0, len(reasoning), 12)]},
        {"type": "chunk", "time": now + 5, "chunk": {"type": "block-end", "index": 0,
                                                      "block": {"type": "reasoning", "text": reasoning}}},
        {"type": "chunk", "time": now + 5, "chunk": {"type": "block-start", "index": 1,
                                                      "blockType": "tool-call" if call_id else "text"}}]
    if call_id is not None and args is not None:
        entries += [
            {"type": "tool-call-chunks", "time0": now + 5, "index": 1, "dt": [], "id": call_id, "name": "todo_write",
             "args": [""]},
            {"type": "tool-call-chunks", "time0": now + 6, "index": 1, "dt": [0, 2, 2, 2], "id": call_id,
             "args": [args[k:k + 48] for k in range(0, len(args), 48)]},
            {"type": "chunk", "time": now + 9, "chunk": {"type": "block-end", "index": 1, "block": {
                "type": "tool-call", "id": call_id, "name": "todo_write", "arguments": args}}}]
        reason = "tool-calls"
    else:
        assert words is not None
        entries += [
            {"type": "text-chunks", "time0": now + 5, "index": 1, "dt": [1, 1],
             "texts": [words[k:k + 16] for k in range(0, len(words), 16)]},
            {"type": "chunk", "time": now + 9, "chunk": {"type": "block-end", "index": 1,
                                                          "block": {"type": "text", "text": words}}}]
        reason = "stop"
    entries += [
        {"type": "chunk", "time": now + 10, "chunk": {"type": "usage", "usage": {
            "inputTokens": 108, "outputTokens": 20, "totalTokens": 128}}},
        {"type": "chunk", "time": now + 10, "chunk": {"type": "finish", "reason": {"kind": reason}, "replayState": {
            "response": {"kind": "deepseek-messages", "version": 1, "model": "deepseek-flash"},
            "blocks": [{"type": "reasoning", "signature": "sig8"}, {"type": "tool-call" if call_id else "text"}]}}}]
    return entries


def _assistant(turn: int, step: int, now: int, call_id: str | None, args: str | None) -> dict[str, Any]:
    reasoning = f"Thinking about step {step} of turn {turn}: " + _text(turn + step, 8)
    words = None if call_id else "Done: " + _text(turn, 12)
    content: list[Any] = [{"type": "reasoning", "text": reasoning}]
    content.append({"type": "tool-call", "id": call_id, "name": "todo_write", "arguments": args} if call_id
                   else {"type": "text", "text": words})
    return {"turn": turn, "step": step, "message": {
        "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-flash", "replayState": {
            "response": {"kind": "deepseek-messages", "version": 1, "model": "deepseek-flash"},
            "blocks": [{"type": "reasoning", "signature": "sig8"}, {"type": "tool-call" if call_id else "text"}]}},
        "id": str(uuid.UUID(int=turn << 20 | step))},
        "usage": {"inputTokens": 108, "outputTokens": 20, "totalTokens": 128},
        "stream": _stream(now, reasoning, call_id, args, words)}


def synthetic(count: int, session_id: str, steps_per_turn: int) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``count`` events of a DSH-shaped session as ``(type, data, extra top-level fields)``; see the module."""
    templates = _templates()
    turn = 0
    seq = 0
    while True:
        turn += 1
        prompt = {"content": [{"type": "text", "text": f"TURN {turn}: " + _text(turn, 20)}],
                  "source": {"kind": "user"}, "role": "user", "id": str(uuid.UUID(int=turn))}
        batch: list[tuple[str, dict[str, Any], dict[str, Any]]] = list(templates["preamble"]) if turn == 1 else []
        batch += [
            ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [prompt]}, {}),
            ("turn/start", {"turn": turn}, {}),
            ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}, {})]
        for step in range(1, steps_per_turn + 2):
            batch.append(("step/start", {"turn": turn, "step": step}, {}))
            if step == 1:
                if turn == 1:
                    batch.append(("system/message", {"turn": 1, "step": 1, "message": templates["system"]},
                                  {"surfaceOp": "append"}))
                batch.append(("user/message", prompt, {"surfaceOp": "append"}))
                if turn == 1:
                    batch.append(("user/message", templates["context"], {"surfaceOp": "append"}))
                batch.append(("request/header", templates["header"], {}))
                if turn == 1:
                    batch.append(("request/context", templates["request"], {}))
            batch.append(("session-log-deepseek/delivery-accepted", {
                "sessionId": session_id, "sessionFormatVersion": 4, "throughSeq": seq + len(batch) - 1}, {}))
            if step > steps_per_turn:  # the closing text answer
                batch.append(("assistant/message", _assistant(turn, step, 0, None, None), {"surfaceOp": "append"}))
            else:
                call_id = f"toolu_{turn}_{step}"
                todos = _todos(turn, step)
                refused = (turn + step) % 10 == 0
                if refused:  # a duplicate content: refused, no todo/write
                    todos = [*todos, dict(todos[0])]
                args = json.dumps({"todos": todos})
                batch.append(("assistant/message", _assistant(turn, step, 0, call_id, args), {"surfaceOp": "append"}))
                call_at = seq + len(batch)
                batch.append(("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "todo_write",
                                            "arguments": args}, {}))
                text = f'Error: invalid todos: duplicate content "{todos[0]["content"]}"' if refused else \
                    "Updated todo list: 2 pending, 2 in progress, 1 completed."
                if not refused:
                    batch.append(("todo/write", {"todos": todos}, {}))
                result: dict[str, Any] = {"turn": turn, "step": step, "message": {
                    "role": "tool", "source": {"kind": "tool", "callId": call_id}, "toolCallId": call_id,
                    "content": [{"type": "text", "text": text}], "isError": refused,
                    "id": str(uuid.UUID(int=turn << 40 | step))}}
                if refused:
                    result["error"] = {"name": "ToolArgsError", "code": "INVALID_ARGS"}
                batch.append(("tool/result", result, {"sourceEventSeqs": [call_at], "surfaceOp": "append"}))
            batch.append(("step/end", {"turn": turn, "step": step}, {}))
        batch.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}))
        if seq + len(batch) > count:  # whole turns only: the log ends as a finished session does
            return
        for item in batch:
            yield item
            seq += 1


def write_synthetic(root: Path, cwd: Path, count: int, compression: Compression, steps_per_turn: int,
                    batch: int) -> tuple[str, Path, int, Any]:
    """A synthetic session under ``root``: (its id, its log, its event count, the plan it ends with)."""
    session_id = f"session-{uuid.uuid4()}"
    path = log_path(root, str(cwd), session_id, compression)
    path.parent.mkdir(parents=True)
    base = 1_796_520_000_000
    meta = {"id": session_id, "createdAt": base, "cwd": str(cwd), "version": 4}
    written = 0
    plan: Any = None
    with path.open("wb") as out:
        out.write(encode_header(meta, compression))
        pending: list[dict[str, Any]] = []
        for kind, data, extra in synthetic(count, session_id, steps_per_turn):
            pending.append({"type": kind, "seq": written, "time": base + written, "data": data, **extra})
            if kind == "todo/write":
                plan = data["todos"]
            elif kind == "turn/start":
                plan = None
            written += 1
            if len(pending) >= batch:
                out.write(encode_batch(pending, compression, pack_chunks=False))
                pending = []
        if pending:
            out.write(encode_batch(pending, compression, pack_chunks=False))
    return session_id, path, written, plan


# -- our side ---------------------------------------------------------------------------------------------------------

def ours(root: Path, session_id: str) -> tuple[float, Any]:
    """``dsh-todo plan --json --root ROOT ID`` as a fresh process: (spawn-to-exit seconds, the parsed output)."""
    return ours_cpu(root, session_id)[::2]


def ours_cpu(root: Path, session_id: str) -> tuple[float, float, Any]:
    """:func:`ours` with the process's CPU seconds (user + system) in the middle."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "plan", "--json", "--root", str(root), session_id],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"dsh-todo plan exited {done.returncode}: {done.stderr.strip()[-800:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu, json.loads(done.stdout)


def items_of(printed: Any) -> Any:
    """The ``(content, status)`` list of ``plan --json``'s output (``null`` when no plan stands)."""
    if printed is None:
        return None
    todos = printed.get("todos", printed) if isinstance(printed, dict) else printed
    return [(item["content"], item["status"]) for item in todos]


def _expect(printed: Any, plan: Any, what: str) -> None:
    want = None if plan is None else [(item["content"], item["status"]) for item in plan]
    if items_of(printed) != want:
        raise SystemExit(f"{what}: dsh-todo plan printed {json.dumps(printed)[:400]}, expected {want}")


def part_one(work: Path, args: argparse.Namespace) -> None:
    print(f"\n1. cold plan read, {args.events:,} events, whole process, {args.runs} runs per encoding")
    cwd = work / "project"
    cwd.mkdir(exist_ok=True)
    logs = {}
    for compression in ("none", "zstd"):
        root = work / f"root-{compression}"
        start = time.perf_counter()
        session_id, path, count, plan = write_synthetic(root, cwd, args.events, compression, args.steps_per_turn,
                                                        args.batch)
        logs[compression] = (root, session_id, count, plan)
        print(f"   wrote {compression}: {count:,} events, {path.stat().st_size / 2**20:,.0f} MiB on disk "
              f"({time.perf_counter() - start:.1f} s)")
    plaintext = (work / "root-none").glob("*/*/session.v4.jsonl")
    size = next(plaintext).stat().st_size
    times: dict[str, list[float]] = {name: [] for name in logs}
    cpus: dict[str, list[float]] = {name: [] for name in logs}
    for name, (root, session_id, _, plan) in logs.items():  # one untimed run each (bytecode, page cache)
        _expect(ours(root, session_id)[1], plan, name)
    for _ in range(args.runs):
        for name, (root, session_id, _, plan) in logs.items():
            took, cpu, printed = ours_cpu(root, session_id)
            _expect(printed, plan, name)
            times[name].append(took)
            cpus[name].append(cpu)
    for name, (_, _, count, _) in logs.items():
        median, cpu = statistics.median(times[name]), statistics.median(cpus[name])
        print(f"   {name:5} median {median:.3f} s (min {min(times[name]):.3f}) = {count / median / 1e6:.2f}M events/s, "
              f"{size / median / 1e6:.0f} MB/s of JSONL (goal ≥ 1M events/s); CPU {cpu:.3f} s = "
              f"{count / cpu / 1e6:.2f}M events/s")
    print("   the plan printed each time is the log's last accepted list")


# -- 2. dsh -----------------------------------------------------------------------------------------------------------

class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # dsh is killed mid-request on purpose


class FirstRequest:
    """A model endpoint that only notes when the first ``POST`` arrives (its headers read) and never answers
    before ``dsh`` is killed: what it measures is how long ``dsh`` takes to open the session and ask."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.at = 0.0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                if not owner.arrived.is_set():
                    owner.at = time.perf_counter()
                    owner.arrived.set()
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    while length > 0:
                        length -= len(self.rfile.read(min(length, 1 << 20)) or b"x" * length)
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.arrived.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _kill(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def dsh_resume(dsh: Path, home: Home, cwd: Path, session_id: str, endpoint: FirstRequest, work: Path) -> float:
    """Seconds from spawning ``dsh headless --json --session-id ID x`` (on a fresh copy of ``home``) to the first
    model request's arrival."""
    copy_dir = work / "resume-home"
    shutil.rmtree(copy_dir, ignore_errors=True)
    copy = home.copy(copy_dir)
    endpoint.reset()
    start = time.perf_counter()
    process = start_turn(dsh, copy, cwd, "x", endpoint.url, session_id=session_id)
    try:
        while not endpoint.arrived.wait(0.05):
            if process.poll() is not None:
                err = process.communicate()[1]
                raise SystemExit(f"dsh exited {process.returncode} before asking the model: {err.strip()[-1500:]}")
            if time.perf_counter() - start > 600:
                raise SystemExit("dsh did not ask the model within 600 s")
        return endpoint.at - start
    finally:
        _kill(process)
        shutil.rmtree(copy_dir, ignore_errors=True)


def dsh_export(dsh: Path, home: Home, session_id: str) -> tuple[float, float, float, int]:
    """A fresh ``dsh web``: (start-up s, spawn until its URL answers; first export s; second export s; bytes)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [str(dsh), "web", "--no-open", "--host", "127.0.0.1", "--port", str(port)]
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=home.path, env=home.env("http://127.0.0.1:9"), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        if not first.startswith("dsh web: http://"):
            raise SystemExit(f"dsh web printed {first!r}")
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        opener.open(first.removeprefix("dsh web: "), timeout=60).read()
        started = time.perf_counter() - start
        took = []
        size = 0
        for _ in range(2):
            at = time.perf_counter()
            with opener.open(f"http://127.0.0.1:{port}/api/session.export?sessionId={session_id}",
                             timeout=600) as response:
                body = response.read()
            took.append(time.perf_counter() - at)
            with zipfile.ZipFile(BytesIO(body)) as archive:
                size = len(archive.read("session.v4.jsonl"))
        return started, took[0], took[1], size
    finally:
        _kill(process)


def _dsh_command() -> Path | None:
    command = Path(sysconfig.get_path("scripts")) / "dsh"
    if not command.exists():
        return None
    done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), "DSH_HOME": os.devnull})
    return command if done.stdout.strip() == VERSION else None


def make_dsh_session(dsh: Path, home: Home, cwd: Path, count: int) -> tuple[str, Any]:
    """One ``dsh headless`` turn whose scripted model makes ``count`` ``todo_write`` calls: (session id, last list)."""
    prompt = "BENCH: plan a long job, step by step"
    lists = [tuple((_text(k * 5 + j, 6), STATUSES[(k + j) % 3]) for j in range(5)) for k in range(count)]
    script: list[Step] = [call(*items) for items in lists]
    script.append(Say("DONE"))
    with fake_model(steps({prompt: script})) as model:
        turn = turn_of(start_turn(dsh, home, cwd, prompt, model.url), timeout=3600)
    if turn.returncode != 0:
        raise SystemExit(turn.describe()[-3000:])
    return turn.session_id, [{"content": content, "status": status} for content, status in lists[-1]]


def side_by_side(dsh: Path, home: Home, cwd: Path, session_id: str, plan: Any, runs: int, work: Path,
                 label: str) -> None:
    root = home.sessions
    endpoint = FirstRequest()
    series: dict[str, list[float]] = {"ours": [], "resume": [], "web start": [], "export": [], "export again": []}
    try:
        _expect(ours(root, session_id)[1], plan, label)  # untimed warm-up of each
        dsh_resume(dsh, home, cwd, session_id, endpoint, work)
        size = 0
        for _ in range(runs):
            took, printed = ours(root, session_id)
            _expect(printed, plan, label)
            series["ours"].append(took)
            series["resume"].append(dsh_resume(dsh, home, cwd, session_id, endpoint, work))
            started, first, again, size = dsh_export(dsh, home, session_id)
            series["web start"].append(started)
            series["export"].append(first)
            series["export again"].append(again)
    finally:
        endpoint.close()
    med = {name: statistics.median(values) for name, values in series.items()}
    print(f"   dsh-todo plan --json (whole process)     {med['ours'] * 1000:8.0f} ms")
    print(f"   dsh headless resume → first model request {med['resume'] * 1000:8.0f} ms   ours/theirs "
          f"{med['ours'] / med['resume']:.3f}× (goal ≤ 0.2×)")
    print(f"   dsh web start-up                          {med['web start'] * 1000:8.0f} ms")
    print(f"   dsh web session.export, first             {med['export'] * 1000:8.0f} ms   ours/theirs "
          f"{med['ours'] / med['export']:.3f}×; with start-up {med['ours'] / (med['export'] + med['web start']):.3f}×")
    print(f"   dsh web session.export, again             {med['export again'] * 1000:8.0f} ms   "
          f"({size / 2**20:.1f} MiB exported)")


def part_two(work: Path, args: argparse.Namespace) -> None:
    dsh = _dsh_command()
    if dsh is None:
        print(f"\n2. skipped: the pinned dsh {VERSION} is not installed beside this interpreter (`uv sync`)")
        return
    scratch = Scratch.make(work / "dsh-scratch")
    home = Home.make(work / "dsh-home", scratch)
    cwd = work / "dsh-project"
    cwd.mkdir()
    start = time.perf_counter()
    session_id, plan = make_dsh_session(dsh, home, cwd, args.dsh_steps)
    log = log_of(home.sessions, session_id)
    lines = len(log_lines(log))
    print(f"\n2a. a session dsh wrote: one turn of {args.dsh_steps} todo_write calls, {lines - 1:,} events, "
          f"{log.stat().st_size / 2**20:.1f} MiB ({log.name}), made in {time.perf_counter() - start:.1f} s; "
          f"{args.dsh_runs} rounds alternating")
    side_by_side(dsh, home, cwd, session_id, plan, args.dsh_runs, work, "dsh's session")
    if args.dsh_events:
        synth_cwd = work / "synth-project"
        synth_cwd.mkdir()
        session_id, path, count, plan = write_synthetic(home.sessions, synth_cwd, args.dsh_events, "zstd",
                                                        args.steps_per_turn, args.batch)
        print(f"\n2b. a synthetic log (ours, zstd): {count:,} events, {path.stat().st_size / 2**20:.1f} MiB; "
              f"{args.dsh_events_runs} rounds alternating")
        side_by_side(dsh, home, synth_cwd, session_id, plan, args.dsh_events_runs, work, "synthetic for dsh")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events of part 1's log (1,000,000)")
    parser.add_argument("--runs", type=int, default=5, help="timed plan runs per encoding in part 1 (5)")
    parser.add_argument("--steps-per-turn", type=int, default=30, help="todo_write steps per synthetic turn (30)")
    parser.add_argument("--batch", type=int, default=100, help="events per zstd frame / write (100)")
    parser.add_argument("--dsh-steps", type=int, default=400, help="todo_write calls in dsh's turn (400)")
    parser.add_argument("--dsh-runs", type=int, default=5, help="rounds of part 2 (5)")
    parser.add_argument("--dsh-events", type=int, default=100_000,
                        help="events of the synthetic log dsh opens in part 2 (100,000; 0 leaves it out)")
    parser.add_argument("--dsh-events-runs", type=int, default=3, help="rounds on that synthetic log (3)")
    parser.add_argument("--skip-dsh", action="store_true", help="part 1 only")
    parser.add_argument("--skip-cold", action="store_true", help="part 2 only")
    args = parser.parse_args()
    print(f"load average before: {load_avg()} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="dsh-v4-bench-") as where:
        work = Path(where)
        if not args.skip_cold:
            part_one(work, args)
        if not args.skip_dsh:
            part_two(work, args)
    print(f"\nload average after: {load_avg()}")


if __name__ == "__main__":
    main()
