"""A writer in another process, for the cross-process tests:
``python -m tests.harness.persistence.postgres.worker COMMAND …``.

- ``race URL SCHEMA ID TAG GO N``: wait for the file GO, then create session ID and write N plans tagged TAG, one
  batch each; prints ``WON`` (exit 0) or ``LOCKED <message>`` (exit 3).
- ``append URL SCHEMA ID N PAUSE``: create (or load) ID and write N plans, one flushed batch every PAUSE seconds;
  prints ``SENT <seq> <monotonic ns>`` after each commit.
- ``crash URL SCHEMA ID``: leave a turn open with a recorded tool call and a plan, print ``READY``, then hang until
  killed.
- ``web URL SCHEMA -``: serve the web page over the database on a free port, print its URL, serve until stdin
  closes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from dsh_todo.harness import Context, boot
from dsh_todo.harness.persistence import SessionLockedError, SessionNotFoundError
from dsh_todo.testing import database_composition


def plan(tag: str, index: int) -> list[dict[str, str]]:
    return [{"content": f"{tag} step {index}", "status": "in_progress"},
            {"content": f"{tag} wrap up", "status": "pending"}]


def open_session(ctx: Context, session_id: str) -> Any:
    try:
        return ctx.session_persistence.load(session_id)
    except SessionNotFoundError:
        return ctx.sessions.create(session_id, cwd="/srv/agent")


def race(ctx: Context, session_id: str, tag: str, go: str, count: int) -> int:
    print("READY", flush=True)
    while not Path(go).exists():
        time.sleep(0.001)
    try:
        session = ctx.sessions.create(session_id, cwd=f"/srv/{tag}")
    except SessionLockedError as exc:
        print(f"LOCKED {exc}", flush=True)
        return 3
    session.append("turn/start", {"turn": 1})
    for index in range(count):
        session.append("todo/write", {"todos": plan(tag, index)})
        ctx.session_persistence.flush()
        time.sleep(0.03)  # hold the session long enough for the rival to be turned away, not to arrive late
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    ctx.session_persistence.flush()
    print("WON", flush=True)
    return 0


def append(ctx: Context, session_id: str, count: int, pause: float) -> int:
    session = open_session(ctx, session_id)
    turn = 1 + sum(1 for event in session.events if event["type"] == "turn/start")
    session.append("turn/start", {"turn": turn})
    ctx.session_persistence.flush()
    for index in range(count):
        time.sleep(pause)
        event = session.append("todo/write", {"todos": plan("remote", index)})
        ctx.session_persistence.flush()
        print(f"SENT {event['seq']} {time.monotonic_ns()}", flush=True)
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    ctx.session_persistence.flush()
    return 0


def crash(ctx: Context, session_id: str) -> int:
    session = ctx.sessions.create(session_id, cwd="/srv/crash")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    call = {"type": "tool-call", "id": "call_9", "name": "todo_write", "arguments": "{}"}
    session.append("assistant/message", {"turn": 1, "step": 1, "message": {"role": "assistant", "content": [call]}},
                   surface_op="append")
    session.append("tool/call", {"turn": 1, "step": 1, "callId": "call_9", "name": "todo_write", "arguments": "{}"})
    session.append("todo/write", {"todos": plan("crash", 0)})
    ctx.session_persistence.flush()
    print("READY", flush=True)
    time.sleep(600)
    return 0


def web(ctx: Context) -> int:
    from dsh_todo.carriers.web.server import BackgroundServer

    server = BackgroundServer(ctx, port=0)
    print(server.start(), flush=True)
    try:
        sys.stdin.read()  # serve until the test closes our stdin
    finally:
        server.stop()
    return 0


def main(argv: list[str]) -> int:
    command, url, schema, session_id, *rest = argv
    ctx = boot(database_composition(url, schema=schema, batch_delay_ms=5))
    try:
        if command == "race":
            return race(ctx, session_id, rest[0], rest[1], int(rest[2]))
        if command == "append":
            return append(ctx, session_id, int(rest[0]), float(rest[1]))
        if command == "crash":
            return crash(ctx, session_id)
        if command == "web":
            return web(ctx)
        raise SystemExit(f"unknown command {command!r}")
    finally:
        ctx.dispose()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
