"""``dsh-todo demo``: a realistic multi-step task played offline by a scripted model through the real agent loop.

Everything but the model is real: the standard composition boots (with DSH-format persistence), every call goes
through the tool registry's validation, and the plan shown is the ``todos`` projection of the session log. The
script includes parallel ``in_progress`` work, a rejected call and its correction, completion, and a second turn
whose ``turn/start`` clears the standing plan. The log is written where every other command looks (the default
root, ``--root`` or ``--database``), and the demo's last lines are the exact commands that show it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import time

from dsh_todo.carriers.terminal import PlanPrinter
from dsh_todo.harness import Agent, Context
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.errors import ListenError
from dsh_todo.harness.llm import ModelReply, ModelRequest, ScriptedModel, ToolCallRequest
from dsh_todo.harness.session import Session
from dsh_todo.jsonutil import dumps
from dsh_todo.runtime import Storage, open_storage

INSPECT, DESIGN, BUILD, DOCS, TESTS = (
    "Read the request pipeline", "Choose a limiter design", "Implement the rate limiter",
    "Document the limits", "Run the test suite")
PROMPTS = ("Add rate limiting to the public API and document it.", "Thanks! What's next?")


def _todo_call(n: int, *items: tuple[str, str]) -> ToolCallRequest:
    args = dumps({"todos": [{"content": c, "status": s} for c, s in items]})
    return ToolCallRequest(f"call_{n:02d}_demo", "todo_write", args)


def demo_replies() -> list[ModelReply]:
    """The scripted model's replies, one per model request, across both prompts."""
    p, a, d = "pending", "in_progress", "completed"
    return [
        ModelReply("I'll plan the work first.", [_todo_call(
            1, (INSPECT, a), (DESIGN, p), (BUILD, p), (DOCS, p), (TESTS, p))], "tool_calls"),
        ModelReply("The pipeline has one middleware hook; a token bucket per key fits.", [_todo_call(
            2, (INSPECT, d), (DESIGN, d), (BUILD, a), (DOCS, p), (TESTS, p))], "tool_calls"),
        ModelReply("A subagent can write the docs while I implement.", [_todo_call(
            3, (INSPECT, d), (DESIGN, d), (BUILD, a), (DOCS, a), (DOCS + " ", p), (TESTS, p))], "tool_calls"),
        ModelReply("", [_todo_call(
            4, (INSPECT, d), (DESIGN, d), (BUILD, a), (DOCS, a), (TESTS, p))], "tool_calls"),
        ModelReply("Limiter and docs are done; running the tests.", [_todo_call(
            5, (INSPECT, d), (DESIGN, d), (BUILD, d), (DOCS, d), (TESTS, a))], "tool_calls"),
        ModelReply("", [_todo_call(6, (INSPECT, d), (DESIGN, d), (BUILD, d), (DOCS, d), (TESTS, d))],
                   "tool_calls"),
        ModelReply("Rate limiting is in place (token bucket, 100 requests/min per key), documented and tested."),
        ModelReply("Next I would add per-route overrides; say the word and I will plan it."),
    ]


async def play(ctx: Context, session: Session, *, pause: float = 0.0) -> None:
    """Run both turns of the demo on ``session`` (``pause`` slows each model reply, for watching in a browser)."""

    class PacedModel(ScriptedModel):
        async def complete(self, request: ModelRequest) -> ModelReply:
            if pause:
                await asyncio.sleep(pause)
            return await super().complete(request)

    loop = AgentLoop(ctx.tools, PacedModel(demo_replies(), model="demo-script"))
    agent = Agent("demo", session)
    for prompt in PROMPTS:
        await loop.run_turn(agent, prompt)


def look_again(storage: Storage, session_id: str) -> list[str]:
    """The commands that show what the demo wrote, exactly as a person would type them."""
    if storage.database is not None:
        where = f"--database {shlex.quote(storage.database)}"
    else:
        where = f"--root {shlex.quote(str(storage.root))}"
    return [f"dsh-todo plan {where} {shlex.quote(session_id)}",
            f"dsh-todo web {where}   (then open /?session={session_id})"]


def run_demo(storage: Storage, *, web: bool = False, port: int = 0, pace: float = 1.5) -> int:
    """Play the task into ``storage``; with ``web``, serve the live page on ``port`` and pause ``pace`` seconds
    per model reply so a person can follow it."""
    ctx = open_storage(storage)
    printer = PlanPrinter(ctx)
    printer.say("dsh-todo demo: the model is SCRIPTED (offline); the loop, tool, log and projection are real.")
    session_id = f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    stop_web = None
    try:
        pause = 0.0
        # The session exists before any URL is printed: a page (or a script) that opens the URL at once finds it.
        session = ctx.sessions.create(session_id, cwd=os.getcwd())
        if web:
            from dsh_todo.carriers.web import serve_in_background

            try:
                url, stop_web = serve_in_background(ctx, port=port)
            except OSError as exc:
                raise ListenError("127.0.0.1", port, exc) from None
            printer.say(f"watch it live: {url.rstrip('/')}/?session={session_id}")
            pause = pace
        asyncio.run(play(ctx, session, pause=pause))
        plan = ctx.session_projections.snapshot(session)["values"]["todos"]
        ctx.session_persistence.flush()
        where = ctx.session_persistence.locate(session_id)
        if stop_web is not None and sys.stdin.isatty():
            printer.say("done; the page stays up until you press Ctrl-C")
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    finally:
        if stop_web is not None:
            stop_web()
        ctx.dispose()
    printer.say(f"standing plan after the last turn: {dumps(plan)} (the second turn's start cleared it)")
    printer.say(f"session log (DSH format): {where}")
    printer.say("look at it again:")
    for command in look_again(storage, session_id):
        printer.say(f"  {command}")
    return 0
