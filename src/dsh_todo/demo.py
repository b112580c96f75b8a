"""``dsh-todo demo``: a realistic multi-step task played offline by a scripted model through the real agent loop.

Everything but the model is real: the standard composition boots (with DSH-format persistence), every call goes
through the tool registry's validation, and the plan shown is the ``todos`` projection of the session log. The
script includes parallel ``in_progress`` work, a rejected call and its correction, completion, and a second turn
whose ``turn/start`` clears the standing plan. The log is written where every other command looks (the default
root, ``--root`` or ``--database``), and the demo's last lines are the exact commands that show it again.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

from dsh_todo.carriers.stopping import STOPPING
from dsh_todo.carriers.terminal import PlanPrinter
from dsh_todo.harness.agent import Agent
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import ListenError
from dsh_todo.harness.llm import ModelReply, ModelRequest, ScriptedModel, ToolCallRequest
from dsh_todo.harness.persistence.contract import SESSION_PERSISTENCE
from dsh_todo.harness.projections import SESSION_PROJECTIONS
from dsh_todo.harness.session import SESSIONS, Session
from dsh_todo.harness.tools.registry import TOOLS
from dsh_todo.jsonutil import dumps
from dsh_todo.quoting import shell_path, shell_word
from dsh_todo.runtime import Storage, Telemetry
from dsh_todo.standard import open_storage

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

    loop = AgentLoop(ctx[TOOLS], PacedModel(demo_replies(), model="demo-script"))
    agent = Agent("demo", session)
    for prompt in PROMPTS:
        await loop.run_turn(agent, prompt)


def invocation() -> str:
    """How a person runs ``dsh-todo`` from here, so the lines the demo prints can be pasted as they are.

    Under ``uv run`` (which sets ``UV_RUN_RECURSION_DEPTH``) the script lives only in the project's environment:
    ``uv run dsh-todo`` inside the project, ``uv run --project DIR dsh-todo`` from anywhere else. Otherwise the
    ``dsh-todo`` on ``PATH``, or, when there is none, this interpreter with ``-m dsh_todo.cli``.
    """
    if os.environ.get("UV_RUN_RECURSION_DEPTH"):
        venv = os.environ.get("VIRTUAL_ENV")
        project = Path(venv).parent if venv else None
        if project is None or not (project / "pyproject.toml").is_file():
            return "uv run dsh-todo"
        here = Path.cwd().resolve()
        if here == project.resolve() or project.resolve() in here.parents:
            return "uv run dsh-todo"
        return f"uv run --project {shell_path(project)} dsh-todo"
    if shutil.which("dsh-todo"):
        return "dsh-todo"
    return f"{shell_word(sys.executable)} -m dsh_todo.cli"


def look_again(storage: Storage, session_id: str, command: str = "dsh-todo") -> list[str]:
    """What to run to see what the demo wrote, each command alone on its line (``command`` is how ``dsh-todo`` is
    run here: :func:`invocation`). The standing plan is empty by then (the second turn's start cleared it), so the
    plan shown is the one the first turn ended with."""
    if storage.database is not None:
        where = f"--database {shell_word(storage.database)}"
    else:
        where = f"--root {shell_path(str(storage.root))}"
    session = shell_word(session_id)
    return [
        "the plan turn 1 ended with (the second turn's start cleared the standing plan):",
        f"  {command} plan {where} {session} --turn 1",
        "every event of the session, one JSON object per line:",
        f"  {command} events {where} {session}",
        f"the page (then open http://127.0.0.1:8766/?session={quote(session_id, safe='')}):",
        f"  {command} web {where}",
    ]


def serve_until_stopped(printer: PlanPrinter) -> None:
    """Keep the page up after the demo until Ctrl-C, SIGTERM or SIGHUP, whatever stdin is: whoever opens the
    printed URL after the turns ended (from an IDE's run button, a script, ``nohup``) still finds the page."""
    done = threading.Event()
    STOPPING.install()
    try:
        STOPPING.serve(done.set)
        printer.say("done; the page stays up until you press Ctrl-C (or the process gets SIGTERM)")
        while not done.wait(0.5):
            pass
    finally:
        STOPPING.done()


def run_demo(storage: Storage, *, web: bool = False, port: int = 0, pace: float = 1.5,
             telemetry: Telemetry = "disabled") -> int:
    """Play the task into ``storage``; with ``web``, serve the live page on ``port`` and pause ``pace`` seconds
    per model reply so a person can follow it."""
    ctx = open_storage(storage, telemetry=telemetry)
    printer = PlanPrinter(ctx)
    printer.say("dsh-todo demo: the model is SCRIPTED (offline); the loop, tool, log and projection are real.")
    session_id = f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    stop_web = None
    try:
        pause = 0.0
        url = None
        if web:  # listening first: a port in use leaves nothing behind
            from dsh_todo.carriers.web import serve_in_background

            try:
                url, stop_web = serve_in_background(ctx, port=port)
            except OSError as exc:
                raise ListenError("127.0.0.1", port, exc) from None
            pause = pace
        # The session exists before any URL is printed: a page (or a script) that opens the URL at once finds it.
        session = ctx[SESSIONS].create(session_id, cwd=os.getcwd())
        if url is not None:
            printer.say(f"watch it live: {url.rstrip('/')}/?session={session_id}")
        asyncio.run(play(ctx, session, pause=pause))
        plan = ctx[SESSION_PROJECTIONS].snapshot(session)["values"]["todos"]
        ctx[SESSION_PERSISTENCE].flush()
        where = ctx[SESSION_PERSISTENCE].locate(session_id)
        printer.say(f"standing plan after the last turn: {dumps(plan)} (the second turn's start cleared it)")
        printer.say(f"session log (DSH format): {where}")
        printer.say("look at it again:")
        for line in look_again(storage, session_id, invocation()):
            printer.say(f"  {line}")
        if stop_web is not None:
            serve_until_stopped(printer)
    finally:
        if stop_web is not None:
            stop_web()
        ctx.dispose()
    return 0
