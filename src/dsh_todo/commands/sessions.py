"""``dsh-todo sessions``: every session under a root (or in a database), its plan and its log's verdict."""

from __future__ import annotations

import argparse
import os
from typing import Any

from dsh_todo.carriers.terminal import progress_label, safe
from dsh_todo.commands.command import Command
from dsh_todo.commands.options import add_storage_options
from dsh_todo.commands.reading import backend_of, close
from dsh_todo.harness.errors import CommandError
from dsh_todo.logview import list_sessions
from dsh_todo.quoting import shell_path


def _arguments(parser: argparse.ArgumentParser) -> None:
    # A root given as a word (as this command once took it) is answered with the way to give it, not argparse's
    # "unrecognized arguments".
    parser.add_argument("root_arg", nargs="?", help=argparse.SUPPRESS)
    add_storage_options(parser, writes=False)


def plan_label(view: Any) -> str:
    if view.health.refused:
        return "-"
    plan = view.plan
    return "no plan" if plan is None else (progress_label(plan) or "empty plan")


def _run(args: argparse.Namespace) -> int:
    if args.root_arg is not None:
        raise CommandError(f"give the root as an option: dsh-todo sessions --root {shell_path(args.root_arg)}")
    reading = backend_of(args)
    backend = reading["backend"]
    try:
        if backend.holds_files and not os.path.isdir(backend.location):
            raise CommandError(f"{backend.location} is not a directory")
        try:
            views = list_sessions(backend)
        except CommandError:
            raise
        except Exception as exc:  # the listing itself failed (an unreadable root, a lost database)
            raise CommandError(f"cannot list the sessions: {' '.join(str(exc).split())}") from None
    finally:
        close(reading)
    if not views:
        print(f"no sessions in {backend.location}")
    for view in views:
        print(f"{safe(view.session_id)}\t{plan_label(view)}\t{safe(view.where)}\t{safe(view.health.describe())}")
    return 0


COMMAND = Command(
    "sessions", "the sessions under a root, with their standing plans and verdicts",
    "List the sessions under a root (or in a database) with their plans and whether their logs read.",
    "dsh-todo sessions --root ./sessions", _arguments, _run, filter=True)
