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

from dsh_todo.carriers.terminal import plan_delta, plan_lines, progress_label, safe
from dsh_todo.harness.errors import CommandError as CommandError
from dsh_todo.jsonutil import dumps


def _reading(args: argparse.Namespace, source: str) -> dict[str, Any]:
    """How to read ``source``: as a path when one exists there, else as a session id under ``--root``, or in
    ``--database`` (``$DSH_TODO_DATABASE_URL`` when neither is given; else the default root)."""
    if os.path.exists(source):
        return {}
    return _backend_of(args)


def _backend_of(args: argparse.Namespace) -> dict[str, Any]:
    from dsh_todo.cliargs import open_backend, storage_of
    from dsh_todo.logview import Refusal

    try:
        return {"backend": open_backend(storage_of(args))}
    except Refusal as exc:
        raise CommandError(exc.reason) from None


def _close(reading: dict[str, Any]) -> None:
    close = getattr(reading.get("backend"), "close", None)
    if close is not None:
        close()


def _note(args: argparse.Namespace, view: Any) -> None:
    """Refuse (exit 2) or, for a recovered log, say what recovery did; both in one line on stderr."""
    health = view.health
    if health.refused:
        raise CommandError(health.reason)
    if health.state == "recovered":
        print(f"dsh-todo {args.command}: {safe(health.reason)}", file=sys.stderr)


def _view(args: argparse.Namespace, read: Any) -> Any:
    """``read(session, ...)`` of the session the arguments name, refused or noted as :func:`_note` says."""
    reading = _reading(args, args.session)
    try:
        view = read(args.session, **reading)
    finally:
        _close(reading)
    _note(args, view)
    return view


def cmd_plan(args: argparse.Namespace) -> int:
    from dsh_todo.logview import read_plan

    plan = _view(args, read_plan).plan
    if args.json:
        print(dumps(plan))
    else:
        print("\n".join(plan_lines(plan)))
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    from dsh_todo.logview import read_session

    view = _view(args, read_session)
    out = sys.stdout
    for event in view.events:
        out.write(dumps(event))
        out.write("\n")
    out.flush()
    return 0


def plan_label(view: Any) -> str:
    if view.health.refused:
        return "-"
    plan = view.plan
    return "no plan" if plan is None else (progress_label(plan) or "empty plan")


def cmd_sessions(args: argparse.Namespace) -> int:
    from dsh_todo.harness.persistence import JsonlBackend
    from dsh_todo.logview import list_sessions

    if args.root_arg and args.root and args.root_arg != args.root:
        raise CommandError("give the root once: as an argument or as --root")
    args.root = args.root or args.root_arg
    reading = _backend_of(args)
    backend = reading["backend"]
    try:
        if isinstance(backend, JsonlBackend) and not backend.root.is_dir():
            raise CommandError(f"{backend.root} is not a directory")
        try:
            views = list_sessions(backend)
        except CommandError:
            raise
        except Exception as exc:  # the listing itself failed (an unreadable root, a lost database)
            raise CommandError(f"cannot list the sessions: {' '.join(str(exc).split())}") from None
    finally:
        _close(reading)
    if not views:
        print(f"no sessions in {backend.location}")
    for view in views:
        print(f"{safe(view.session_id)}\t{plan_label(view)}\t{safe(view.where)}\t{safe(view.health.describe())}")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    if not args.interval > 0:  # time.sleep refuses a negative pause with a traceback; 0 would spin a core
        raise CommandError(f"--interval must be a positive number of seconds, not {args.interval:g}")
    if not args.seconds >= 0:
        raise CommandError(f"--seconds must be zero (until Ctrl-C) or a positive number, not {args.seconds:g}")
    reading = _reading(args, args.session)
    try:
        return _watch(args, reading)
    finally:
        _close(reading)


def _watch(args: argparse.Namespace, reading: dict[str, Any]) -> int:
    """Poll the log (its size and mtime; a database is read each time) and print each plan change; a verdict that
    is not ``ok`` is said once on stderr, and watching goes on (a log being fixed, or written, may read later)."""
    from dsh_todo.logview import Refusal, read_plan, resolve

    try:
        target = resolve(args.session, **reading)
    except Refusal as exc:
        raise CommandError(exc.reason) from None
    log: Path | None = target.log
    interactive = sys.stdout.isatty()
    last_plan: object = object()
    last_said = ""
    last_stamp: object = object()
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        while deadline is None or time.monotonic() < deadline:
            stamp: object = _stamp(log) if log is not None else time.monotonic()  # a database: every poll
            if stamp != last_stamp:
                last_stamp = stamp
                view = read_plan(args.session, **reading)
                said = "" if view.health.ok else view.health.reason
                if said and said != last_said:
                    print(f"dsh-todo watch: {said}", file=sys.stderr, flush=True)
                last_said = said
                if view.health.refused:
                    last_plan = object()  # show the plan again once the log reads
                elif view.plan != last_plan:
                    last_plan = view.plan
                    if interactive:
                        print("\x1b[2J\x1b[H" + f"{view.where}\n" + "\n".join(plan_lines(view.plan)), flush=True)
                    else:
                        print(plan_delta(view.plan), flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0


def _stamp(log: Path) -> tuple[int, int] | None:
    try:
        stat = log.stat()
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns)


def _default_root() -> Path:
    from dsh_todo.runtime import default_root

    return default_root()


def _model(args: argparse.Namespace) -> Any:
    from dsh_todo.harness.llm import ModelError, make_model

    try:
        return make_model(args.script, args.model)
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
    print(f"session {safe(session_id)}: {safe(path)}", file=sys.stderr)
    if outcome.reason["kind"] != "completed":
        detail = outcome.reason.get("error", {}).get("message", "")
        print(f"turn ended: {outcome.reason['kind']} {detail}".rstrip(), file=sys.stderr)
        return 1
    return 0


SESSION_HELP = "a session directory, its session.jsonl[.zstd], or a session id under --root (or in --database)"


def add_parsers(sub: Any) -> None:
    from dsh_todo.cliargs import add_storage_options

    plan = sub.add_parser("plan", help="the standing plan of a session log (after load and recovery)")
    plan.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    plan.add_argument("--json", action="store_true", help="print the projection value (null when none)")
    add_storage_options(plan, writes=False)
    plan.set_defaults(run=cmd_plan)

    events = sub.add_parser("events", help="a session's events, one compact JSON object per line")
    events.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    add_storage_options(events, writes=False)
    events.set_defaults(run=cmd_events)

    sessions = sub.add_parser("sessions", help="the sessions under a root, with their standing plans and verdicts")
    sessions.add_argument("root_arg", nargs="?", metavar="ROOT",
                          help="a persistence root (default ./.dsh-todo/sessions or $DSH_TODO_ROOT)")
    add_storage_options(sessions, writes=False)
    sessions.set_defaults(run=cmd_sessions)

    watch = sub.add_parser("watch", help="follow a session's plan while another process writes it")
    watch.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    watch.add_argument("--interval", type=float, default=0.2, help="seconds between polls (default 0.2)")
    watch.add_argument("--seconds", type=float, default=0, help="stop after this long (default: until Ctrl-C)")
    add_storage_options(watch, writes=False)
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
