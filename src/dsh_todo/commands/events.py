"""``dsh-todo events``: a session's events as JSON lines, for ``jq``, ``grep`` and ``head``."""

from __future__ import annotations

import argparse
import sys

from dsh_todo.commands.command import Command
from dsh_todo.commands.options import SESSION_HELP, add_storage_options


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    add_storage_options(parser, writes=False)


def _run(args: argparse.Namespace) -> int:
    from dsh_todo.commands.reading import view_of
    from dsh_todo.jsonutil import dumps
    from dsh_todo.logview import read_session

    view = view_of(args, read_session)
    out = sys.stdout
    for event in view.events:
        out.write(dumps(event))
        out.write("\n")
    out.flush()
    return 0


COMMAND = Command(
    "events", "a session's events, one compact JSON object per line",
    "Print a session's events, one compact JSON object per line.", "dsh-todo events SESSION | head",
    _arguments, _run, filter=True)
