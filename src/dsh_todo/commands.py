"""The log and agent subcommands: ``plan``, ``events``, ``sessions``, ``watch`` and ``run``.

Kept apart from :mod:`dsh_todo.cli` (which only builds the parser) so ``dsh-todo --help`` imports nothing heavy.
Errors a person can fix (a wrong path, a corrupt log, a missing API key) print one line and exit 2; they never
surface as tracebacks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from dsh_todo.carriers.terminal import plan_delta, plan_lines, progress_label
from dsh_todo.jsonutil import dumps


class CommandError(Exception):
    """A one-line, user-facing failure (exit code 2)."""


def _read(path: str) -> Any:
    from dsh_todo.harness.persistence import SessionLogError
    from dsh_todo.logview import LogPathError, read_session

    try:
        return read_session(path)
    except (LogPathError, SessionLogError, OSError) as exc:
        raise CommandError(str(exc)) from None


def _read_plan(path: str) -> Any:
    """The standing plan alone: from the checkpoint and the log's tail when possible (same value as a full read)."""
    from dsh_todo.harness.persistence import SessionLogError
    from dsh_todo.logview import LogPathError, read_plan

    try:
        return read_plan(path)
    except (LogPathError, SessionLogError, OSError) as exc:
        raise CommandError(str(exc)) from None


def cmd_plan(args: argparse.Namespace) -> int:
    view = _read_plan(args.path)
    plan = view.plan
    if args.json:
        print(dumps(plan))
    else:
        print("\n".join(plan_lines(plan)))
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    view = _read(args.path)
    out = sys.stdout
    for event in view.events:
        out.write(dumps(event))
        out.write("\n")
    out.flush()
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from dsh_todo.harness.persistence import JsonlStore
    from dsh_todo.logview import LOG_NAMES

    root = Path(args.root) if args.root else _default_root()
    if not root.is_dir():
        raise CommandError(f"{root} is not a directory")
    compressions = {LOG_NAMES[p.name] for p in root.glob("*/*/session.jsonl*") if p.name in LOG_NAMES}
    rows = []
    for compression in sorted(compressions):
        for stored in JsonlStore(root, compression).list():
            try:
                view = _read_plan(str(stored.path))
            except CommandError as exc:
                rows.append((stored.id, "unreadable", str(exc)))
                continue
            plan = view.plan
            label = "no plan" if plan is None else (progress_label(plan) or "empty plan")
            rows.append((stored.id, label, str(stored.path)))
    if not rows:
        print(f"no sessions under {root}")
    for session_id, label, where in rows:
        print(f"{session_id}\t{label}\t{where}")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from dsh_todo.logview import find_log

    try:
        log = find_log(args.path)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    interactive = sys.stdout.isatty()
    last_plan: object = object()
    last_stamp: tuple[int, int] | None = None
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        while deadline is None or time.monotonic() < deadline:
            stat = log.stat()
            stamp = (stat.st_size, stat.st_mtime_ns)
            if stamp != last_stamp:
                last_stamp = stamp
                plan = _read_plan(str(log)).plan
                if plan != last_plan:
                    last_plan = plan
                    if interactive:
                        print("\x1b[2J\x1b[H" + f"{log}\n" + "\n".join(plan_lines(plan)), flush=True)
                    else:
                        print(plan_delta(plan), flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0


def _default_root() -> Path:
    from dsh_todo.runtime import default_root

    return default_root()


def _model(args: argparse.Namespace) -> Any:
    from dsh_todo.harness.llm import ModelError, ScriptedModel
    from dsh_todo.harness.llm.scripted import load_script

    try:
        if args.script:
            return ScriptedModel(load_script(args.script), model=Path(args.script).name)
        from dsh_todo.harness.llm.openai_compat import OpenAICompatibleModel

        return OpenAICompatibleModel(args.model)
    except ModelError as exc:
        raise CommandError(str(exc)) from None


def cmd_run(args: argparse.Namespace) -> int:
    from dsh_todo.carriers.terminal import PlanPrinter
    from dsh_todo.cliargs import storage_of
    from dsh_todo.harness import Agent
    from dsh_todo.harness.agent_loop import AgentLoop
    from dsh_todo.harness.persistence import SessionLogError, SessionNotFoundError
    from dsh_todo.runtime import open_storage

    storage = storage_of(args)
    if args.session == "":
        raise CommandError("--session needs a non-empty id")
    model = _model(args)
    ctx = open_storage(storage, allow_parallel=not args.single_active)
    try:
        printer = PlanPrinter(ctx)
        mounted = ", ".join(ctx.tools.names()) or "none"
        print(f"tools mounted: {mounted} (allowParallelInProgress: {str(not args.single_active).lower()})",
              file=sys.stderr)
        session_id = args.session or str(uuid.uuid4())
        try:
            try:
                session = ctx.session_persistence.load(session_id)
                printer.say(f"resuming session {session_id} at seq {session.seq}")
            except SessionNotFoundError:  # another process may be creating it this very moment: same refusal
                session = ctx.sessions.create(session_id, cwd=os.getcwd())
        except SessionLogError as exc:
            raise CommandError(str(exc)) from None
        loop = AgentLoop(ctx.tools, model, persistence=ctx.session_persistence)  # each call durable as it returns
        outcome = asyncio.run(loop.run_turn(Agent("dsh-todo", session), args.prompt))
        path = ctx.session_persistence.locate(session_id)
    finally:
        ctx.dispose()
    print(f"session {session_id}: {path}", file=sys.stderr)
    if outcome.reason["kind"] != "completed":
        detail = outcome.reason.get("error", {}).get("message", "")
        print(f"turn ended: {outcome.reason['kind']} {detail}".rstrip(), file=sys.stderr)
        return 1
    return 0


def add_parsers(sub: Any) -> None:
    from dsh_todo.cliargs import add_storage_options

    plan = sub.add_parser("plan", help="the standing plan of a session log (after load and recovery)")
    plan.add_argument("path", help="a session directory or its session.jsonl[.zstd]")
    plan.add_argument("--json", action="store_true", help="print the projection value (null when none)")
    plan.set_defaults(run=cmd_plan)

    events = sub.add_parser("events", help="a session's events, one compact JSON object per line")
    events.add_argument("path", help="a session directory or its session.jsonl[.zstd]")
    events.set_defaults(run=cmd_events)

    sessions = sub.add_parser("sessions", help="the sessions under a root, with their standing-plan counts")
    sessions.add_argument("root", nargs="?", help="a persistence root (default ./.dsh-todo/sessions)")
    sessions.set_defaults(run=cmd_sessions)

    watch = sub.add_parser("watch", help="follow a session's plan while another process writes it")
    watch.add_argument("path", help="a session directory or its session.jsonl[.zstd]")
    watch.add_argument("--interval", type=float, default=0.2, help="seconds between polls (default 0.2)")
    watch.add_argument("--seconds", type=float, default=0, help="stop after this long (default: until Ctrl-C)")
    watch.set_defaults(run=cmd_watch)

    run = sub.add_parser("run", help="one turn of the agent loop with todo_write mounted")
    run.add_argument("prompt")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--script", help="a JSON list of scripted assistant replies (offline)")
    source.add_argument("--model", help="model name for the OpenAI-compatible endpoint (DEEPSEEK_MODEL)")
    add_storage_options(run, writes=True)
    run.add_argument("--session", help="session id; an existing one is resumed")
    run.add_argument("--single-active", action="store_true", help="allowParallelInProgress: false")
    run.set_defaults(run=cmd_run)
