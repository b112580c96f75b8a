"""``dsh-todo watch``: a session's plan, followed while another process writes it."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh_todo.carriers.terminal import plan_delta, plan_lines
from dsh_todo.coding_agents.base import AgentSession, reader
from dsh_todo.coding_agents.discover import file_stamp, folder_stamp, read_on
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
    printer = _Printer()

    def read() -> None:
        view = read_plan(args.session, **reading)
        printer.say("" if view.health.ok else view.health.reason)
        if view.health.refused:
            printer.forget()  # show the plan again once the log reads
        else:
            printer.show(view.plan, lambda: [view.where, *plan_lines(view.plan)])

    return _poll(args, lambda: file_stamp(log) if log is not None else time.monotonic(), read)  # a database: every poll


def _watch_agent(args: argparse.Namespace, session: AgentSession) -> int:
    """Follow another agent's session: read what was written to its file when it (or a folder its reader names,
    such as Claude Code's task list) changes, and print each plan change as for ours; a file that stops reading is
    said once on stderr, and watching goes on."""
    found = reader(session.agent)
    watched = [session.path, *(Path(folder) for folder in session.extra.get("watch", ()))]
    state: Any = None
    printer = _Printer()

    def read() -> None:
        nonlocal state
        sessions, state = read_on(found, session.path, state)
        current = next((each for each in sessions if each.id == session.id), None)
        printer.say(str(sessions[0].extra["error"]) if sessions and sessions[0].extra.get("error") else "")
        if current is not None:
            plan = None if current.plan is None else [item.as_json() for item in current.plan]
            printer.show(plan, lambda: agent_plan_lines(current))

    return _poll(args, lambda: [file_stamp(path) if path.is_file() else folder_stamp(path) for path in watched], read)


def _poll(args: argparse.Namespace, stamp: Callable[[], object], read: Callable[[], None]) -> int:
    """Every ``--interval`` until ``--seconds`` (or Ctrl-C): ``read()`` whenever ``stamp()`` differs from the last
    poll's, the one loop both kinds of session are followed by."""
    last_stamp: object = object()
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        while deadline is None or time.monotonic() < deadline:
            stamp_now = stamp()
            if stamp_now != last_stamp:
                last_stamp = stamp_now
                read()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0


class _Printer:
    """What ``watch`` prints, the same for both kinds of session: a problem once on stderr (again only once it
    changes), and each plan that differs from the last shown: the whole screen on a terminal, a delta line
    otherwise."""

    def __init__(self) -> None:
        self.interactive = sys.stdout.isatty()
        self.last_plan: object = object()
        self.last_said = ""

    def say(self, said: str) -> None:
        if said and said != self.last_said:
            print(f"dsh-todo watch: {said}", file=sys.stderr, flush=True)
        self.last_said = said

    def forget(self) -> None:
        """The next plan is shown whatever it is."""
        self.last_plan = object()

    def show(self, plan: Any, screen: Callable[[], list[str]]) -> None:
        """``plan`` if it changed: ``screen()``'s lines after clearing the terminal, else its delta."""
        if plan == self.last_plan:
            return
        self.last_plan = plan
        if self.interactive:
            print("\x1b[2J\x1b[H" + "\n".join(screen()), flush=True)
        else:
            print(plan_delta(plan), flush=True)


COMMAND = Command(
    "watch", "follow a session's plan while another process writes it",
    "Follow a session's plan while another process writes it; problems are said once on stderr.",
    "dsh-todo watch SESSION --interval 0.5", _arguments, _run, filter=True)
