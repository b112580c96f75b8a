"""Crash testing with real processes: a child that appends and acknowledges, a driver that SIGKILLs it and checks.

Run as a script, this is the **child**: ``python crash_child.py ROOT COMPRESSION SESSION_ID``. It mounts sessions,
projections (with the ``todos`` unit), JSONL persistence (5 ms batch window) and the projection checkpoints, loads
the session (committing crash recovery) or creates it, and then appends turns forever: each turn has two steps with
text deltas (packed into chunk rows) and a ``todo/write``. After every ``todo/write``, ``step/end`` and ``turn/end``
it flushes and prints ``ack <last seq> <first seq> <sha256 of those events' JSON lines>``: from then on those events
must survive anything.

Imported, :func:`run_crashes` is the **driver**: it starts the child again and again, kills it with SIGKILL at
random moments (seeded), and after each kill checks that the log loads, every acknowledged event is there byte for
byte, an open turn is closed as interrupted, and the cold plan read (through the checkpoint) equals the full read.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_todo.jsonutil import dumps_bytes

CHILD = Path(__file__).resolve()
SESSION_ID = "crash"
STATUSES = ("completed", "in_progress", "pending")


def turn_events(turn: int) -> list[tuple[str, dict[str, Any]]]:
    """The events of one turn, a pure function of its number."""
    events: list[tuple[str, dict[str, Any]]] = [("turn/start", {"turn": turn})]
    for step in (1, 2):
        events.append(("step/start", {"turn": turn, "step": step}))
        events += [("assistant/chunk", {"turn": turn, "step": step,
                                        "chunk": {"type": "text-delta", "index": 0, "text": f"t{turn}s{step}d{k} "}})
                   for k in range(3 + step)]
        todos = [{"content": f"turn {turn} task {k}", "status": STATUSES[(turn + step + k) % 3]} for k in range(4)]
        events.append(("todo/write", {"todos": todos}))
        events.append(("step/end", {"turn": turn, "step": step}))
    events.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
    return events


def digest(events: Any) -> str:
    return hashlib.sha256(b"".join(dumps_bytes(event) + b"\n" for event in events)).hexdigest()


def child(root: str, compression: str, session_id: str) -> None:
    from dsh_todo.harness import projections
    from dsh_todo.harness import session as sessions_plugin
    from dsh_todo.harness.context import Context
    from dsh_todo.harness.persistence import SessionNotFoundError, checkpoints
    from dsh_todo.harness.persistence.jsonl import plugin as jsonl
    from dsh_todo.tool_todo.projection import TODOS_UNIT

    ctx = Context()
    ctx.plugin(sessions_plugin)
    ctx.plugin(projections)
    ctx.session_projections.register(TODOS_UNIT)
    ctx.plugin(jsonl, {"root": root, "compression": compression, "writeBatchMaxDelayMs": 5})
    ctx.plugin(checkpoints)
    persistence = ctx.session_persistence
    try:
        session = persistence.load(session_id)
    except SessionNotFoundError:
        session = ctx.sessions.create(session_id, cwd="/crash")
    out = sys.stdout
    out.write(f"start {session.seq}\n")
    out.flush()
    acked = session.seq
    turn = 1 + sum(1 for event in session.events if event["type"] == "turn/start")
    while True:
        for kind, data in turn_events(turn):
            session.append(kind, data)
            if kind in ("todo/write", "step/end", "turn/end"):
                persistence.flush()
                out.write(f"ack {session.seq - 1} {acked} {digest(session.events[acked:])}\n")
                out.flush()
                acked = session.seq
        turn += 1


# -- the driver ---------------------------------------------------------------------------------------------------


@dataclass
class CrashReport:
    kills: int = 0
    acknowledged: int = 0
    interrupted_turns: int = 0
    torn_tails: int = 0
    killed_before_start: int = 0
    events: int = 0
    checkpointed_reads: int = 0
    failures: list[str] = field(default_factory=list)


def _spawn(root: Path, compression: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CHILD), str(root), compression, SESSION_ID],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_crashes(root: Path, compression: str, kills: int, seed: int, *, max_delay: float = 0.25,
                early: float = 0.2) -> CrashReport:
    """Kill a writing child ``kills`` times and check the log after each kill (see the module docstring).

    Each run is killed ``uniform(0, max_delay)`` seconds after the child reports it is writing; a fraction
    ``early`` of the runs is killed instead at a random moment of start-up, which includes loading and committing
    the previous crash's recovery.
    """
    from dsh_todo.harness.persistence import interrupted_turn_closers
    from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
    from tests.harness.persistence.checkpoint_plan import read_plan, read_session

    rng = random.Random(seed)
    store = JsonlBackend(root, compression)  # type: ignore[arg-type]
    report = CrashReport()
    for run in range(kills):
        proc = _spawn(root, compression)
        assert proc.stdout is not None
        started = False
        if rng.random() < early:
            time.sleep(rng.uniform(0, 0.3))
        else:
            started = True
            first = proc.stdout.readline()
            if not first.startswith("start "):
                proc.kill()
                raise AssertionError(f"run {run}: the child did not start: {first!r} {proc.communicate()[1]}")
            time.sleep(rng.uniform(0, max_delay))
        os.kill(proc.pid, signal.SIGKILL)
        rest, errors = proc.communicate()
        report.kills += 1
        if proc.returncode != -signal.SIGKILL:
            raise AssertionError(f"run {run}: the child exited by itself ({proc.returncode}): {errors}")
        acks = [line.split() for line in rest.splitlines() if line.startswith("ack ")]
        if not started and not any(line.startswith("start ") for line in rest.splitlines()):
            report.killed_before_start += 1
        if store.find(SESSION_ID) is None:
            assert not acks
            continue
        # Every other run: check the non-mutating read (plus in-memory closers) and leave recovery to the next
        # child's load; otherwise commit recovery here, as a loader would.
        if run % 2:
            stored = store.read(SESSION_ID)
            meta = stored.meta
            events = stored.events + interrupted_turn_closers(stored.events, meta)
            closers = events[len(stored.events):]
            report.torn_tails += stored.torn is not None
        else:
            loaded = store.load(SESSION_ID)
            meta, events, closers = loaded.meta, loaded.events, loaded.closers
            report.torn_tails += loaded.truncated_to is not None
        for _, last, first, expected in acks:
            if int(last) >= len(events) or digest(events[int(first):int(last) + 1]) != expected:
                report.failures.append(f"run {run}: acknowledged events {first}..{last} are not in the log")
        report.acknowledged += len(acks)
        if closers:
            report.interrupted_turns += 1
            end = closers[-1]
            if end["type"] != "turn/end" or end["data"]["reason"] != {"kind": "interrupted"}:
                report.failures.append(f"run {run}: the open turn was not closed as interrupted: {end}")
        if interrupted_turn_closers(events, meta):
            report.failures.append(f"run {run}: a turn is still open after recovery")
        starts = [event["data"]["turn"] for event in events if event["type"] == "turn/start"]
        if starts != list(range(1, len(starts) + 1)):
            report.failures.append(f"run {run}: turns are not sequential: {starts[-5:]}")
        log = store.find(SESSION_ID)
        assert log is not None
        cold = read_plan(log)
        if cold.plan != read_session(log).plan:
            report.failures.append(f"run {run}: the cold plan read ({cold.source}) differs from the full read")
        report.checkpointed_reads += cold.source == "checkpoint"
        report.events = len(events)
    return report


if __name__ == "__main__":
    child(*sys.argv[1:4])
