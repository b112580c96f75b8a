"""``dsh-todo watch``: a session's plan, followed while another process writes it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from dsh_todo.carriers.terminal import plan_delta, plan_lines
from dsh_todo.coding_agents.base import AgentSession, reader
from dsh_todo.coding_agents.discover import read_on
from dsh_todo.commands.command import Command
from dsh_todo.commands.latest import add_latest_options, chosen_session
from dsh_todo.commands.options import SESSION_HELP, add_agents_option, add_storage_options, agents_of
from dsh_todo.commands.plan import agent_plan_lines, agent_session
from dsh_todo.commands.reading import close, reading_of
from dsh_todo.harness.errors import CommandError
from dsh_todo.logview import Refusal, read_plan, resolve


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", nargs="?", help=SESSION_HELP)
    add_latest_options(parser)
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between polls (default 0.2)")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (default: until Ctrl-C)")
    add_storage_options(parser, writes=False)
    add_agents_option(parser)


def _run(args: argparse.Namespace) -> int:
    if not args.interval > 0:  # time.sleep refuses a negative pause with a traceback; 0 would spin a core
        raise CommandError(f"--interval must be a positive number of seconds, not {args.interval:g}")
    if not args.seconds >= 0:
        raise CommandError(f"--seconds must be zero (until Ctrl-C) or a positive number, not {args.seconds:g}")
    agents, _homes = agents_of(args)
    args.session = chosen_session(args)
    other = agent_session(agents, _homes, args.session) if agents and not args.latest else None
    if other is not None:
        return _watch_agent(args, other)
    reading = reading_of(args, args.session)
    try:
        return _watch(args, reading)
    finally:
        close(reading)


def _watch(args: argparse.Namespace, reading: dict[str, Any]) -> int:
    """Poll the log (its size and mtime; a database is read each time) and print each plan change; a verdict that
    is not ``ok`` is said once on stderr, and watching goes on (a log being fixed, or written, may read later)."""
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


def _watch_agent(args: argparse.Namespace, session: AgentSession) -> int:
    """Follow another agent's session: read what was written to its file when it (or a folder its reader names,
    such as Claude Code's task list) changes, and print each plan change as for ours; a file that stops reading is
    said once on stderr, and watching goes on."""
    found = reader(session.agent)
    watched = [session.path, *(Path(folder) for folder in session.extra.get("watch", ()))]
    state: Any = None
    interactive = sys.stdout.isatty()
    last_plan: object = object()
    last_said = ""
    last_stamp: object = object()
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        while deadline is None or time.monotonic() < deadline:
            stamp = [_stamp(path) if path.is_file() else _folder_stamp(path) for path in watched]
            if stamp != last_stamp:
                last_stamp = stamp
                read, state = read_on(found, session.path, state)
                current = next((each for each in read if each.id == session.id), None)
                said = str(read[0].extra["error"]) if read and read[0].extra.get("error") else ""
                if said and said != last_said:
                    print(f"dsh-todo watch: {said}", file=sys.stderr, flush=True)
                last_said = said
                if current is not None:
                    plan = None if current.plan is None else [item.as_json() for item in current.plan]
                    if plan != last_plan:
                        last_plan = plan
                        if interactive:
                            print("\x1b[2J\x1b[H" + "\n".join(agent_plan_lines(current)), flush=True)
                        else:
                            print(plan_delta(plan), flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0


def _folder_stamp(folder: Path) -> list[tuple[str, tuple[int, int] | None]]:
    try:
        return sorted((entry.name, _stamp(entry)) for entry in folder.iterdir())
    except OSError:
        return []


def _stamp(log: Path) -> tuple[int, int] | None:
    try:
        stat = log.stat()
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns)


COMMAND = Command(
    "watch", "follow a session's plan while another process writes it",
    "Follow a session's plan while another process writes it; problems are said once on stderr.",
    "dsh-todo watch SESSION --interval 0.5", _arguments, _run, filter=True)
