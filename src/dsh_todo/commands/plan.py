"""``dsh-todo plan``: a session's standing plan, as the reader gives it (after load and recovery)."""

from __future__ import annotations

import argparse

from dsh_todo.commands.command import Command
from dsh_todo.commands.options import SESSION_HELP, add_storage_options


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    parser.add_argument("--json", action="store_true", help="print the projection value (null when none)")
    add_storage_options(parser, writes=False)


def _run(args: argparse.Namespace) -> int:
    from dsh_todo.carriers.terminal import plan_lines
    from dsh_todo.commands.reading import view_of
    from dsh_todo.jsonutil import dumps
    from dsh_todo.logview import read_plan

    plan = view_of(args, read_plan).plan
    print(dumps(plan) if args.json else "\n".join(plan_lines(plan)))
    return 0


COMMAND = Command(
    "plan", "the standing plan of a session log (after load and recovery)",
    "Print a session's standing plan, after load and recovery.", "dsh-todo plan SESSION --json",
    _arguments, _run, filter=True)
