"""``dsh-todo run``: one turn of the agent loop with ``todo_write`` mounted, against a model or a script."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

from dsh_todo.carriers.stopping import STOPPING
from dsh_todo.carriers.terminal import PlanPrinter, safe
from dsh_todo.commands.command import Command
from dsh_todo.commands.options import SCRIPT_FORMAT, add_agent_options, storage_of, telemetry_of
from dsh_todo.harness.agent import Agent
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.errors import CommandError, SessionLogError, SessionNotFoundError
from dsh_todo.harness.llm import ModelError, describe, make_model
from dsh_todo.harness.persistence.contract import SESSION_PERSISTENCE
from dsh_todo.harness.session import SESSIONS
from dsh_todo.harness.tools.registry import TOOLS
from dsh_todo.harness.turns import aborted
from dsh_todo.ids import random_uuid
from dsh_todo.standard import open_storage

if TYPE_CHECKING:
    from dsh_todo.harness.agent import Agent
    from dsh_todo.harness.agent_loop import AgentLoop


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", metavar="PROMPT", help="what the person asks the agent, as one argument (quote it)")
    parser.add_argument("--session", help="session id; an existing one is resumed")
    add_agent_options(parser)


def _run(args: argparse.Namespace) -> int:
    """The turn, with the stop signals handled from the start (:mod:`dsh_todo.carriers.stopping`): SIGTERM, SIGINT
    and SIGHUP end the turn ``aborted``, the log flushed and let go, and the exit status is 128 + the signal's number
    (130 for Ctrl-C, as a shell reports a command its signal ended)."""
    STOPPING.install()
    try:
        return _run_turn(args)
    finally:
        STOPPING.done()


def _run_turn(args: argparse.Namespace) -> int:
    storage = storage_of(args)
    telemetry = telemetry_of(args)
    if args.session == "":
        raise CommandError("--session needs a non-empty id")
    try:
        model = make_model(args.script, args.model, args.wire)
    except ModelError as exc:
        raise CommandError(str(exc)) from None
    ctx = open_storage(storage, allow_parallel=not args.single_active, telemetry=telemetry)
    try:
        printer = PlanPrinter(ctx)
        mounted = ", ".join(ctx[TOOLS].names()) or "none"
        print(f"tools mounted: {mounted} (allowParallelInProgress: {str(not args.single_active).lower()})",
              file=sys.stderr)
        if not args.script:  # which endpoint and wire the turn talks to (a script needs no saying)
            print(f"model: {describe(model)}", file=sys.stderr)
        session_id = args.session or random_uuid()
        try:
            try:
                session = ctx[SESSION_PERSISTENCE].load(session_id)
                printer.say(f"resuming session {session_id} at seq {session.seq}")
            except SessionNotFoundError:  # another process may be creating it this very moment: same refusal
                session = ctx[SESSIONS].create(session_id, cwd=os.getcwd())
        except SessionLogError as exc:
            raise CommandError(str(exc)) from None
        loop = AgentLoop(ctx[TOOLS], model, persistence=ctx[SESSION_PERSISTENCE])  # each call durable as it returns
        reason = asyncio.run(_turn(loop, Agent("dsh-todo", session), args.prompt))
        path = ctx[SESSION_PERSISTENCE].locate(session_id)
    finally:
        ctx.dispose()
    print(f"session {safe(session_id)}: {safe(path)}", file=sys.stderr)
    if reason["kind"] != "completed":
        detail = reason.get("error", {}).get("message", "")
        print(f"turn ended: {reason['kind']} {detail}".rstrip(), file=sys.stderr)
    if STOPPING.signal is not None and reason["kind"] == "aborted":  # one that came after the turn ended stops nothing
        return 128 + STOPPING.signal
    return 0 if reason["kind"] == "completed" else 1


async def _turn(loop: AgentLoop, agent: Agent, prompt: str) -> dict[str, Any]:
    """The turn's ``turn/end`` reason. A stop signal cancels the turn (``aborted``, whatever it was waiting for: a
    model request, a tool), as Ctrl-C always did; one that came during the boot cancels it as soon as it starts."""
    task = asyncio.current_task()
    assert task is not None
    STOPPING.serve(task.cancel)
    try:
        return (await loop.run_turn(agent, prompt)).reason
    except asyncio.CancelledError:
        if STOPPING.signal is None:
            raise
        return aborted()


COMMAND = Command(
    "run", "one turn of the agent loop with todo_write mounted",
    "Run one turn of the agent loop with todo_write mounted, against a model endpoint (--model, DEEPSEEK_API_KEY; "
    "Anthropic Messages as DSH 0.2 speaks it, or --wire openai for chat completions) or a script (--script). "
    "--session resumes an existing session.\n\n" + SCRIPT_FORMAT,
    'dsh-todo run --script replies.json --session s1 "plan the release"', _arguments, _run)
