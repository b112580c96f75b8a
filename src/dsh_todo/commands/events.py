"""``dsh-todo events``: a session's events as JSON lines, for ``jq``, ``grep`` and ``head``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dsh_todo.commands.command import Command
from dsh_todo.commands.options import SESSION_HELP, add_storage_options
from dsh_todo.commands.reading import close, note, reading_of, view_of
from dsh_todo.jsonutil import dumps
from dsh_todo.logview import read_events, read_plan


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    add_storage_options(parser, writes=False)


def _run(args: argparse.Namespace) -> int:
    """The verdict first (a refused log prints nothing), then the events as they are read, none kept: a log of any
    size costs one read piece, not the log (issue 22)."""
    view_of(args, read_plan)
    out = sys.stdout
    printed = 0

    def write(events: list[dict[str, Any]], _types: list[Any]) -> None:
        nonlocal printed
        for event in events:
            if event["seq"] >= printed:  # a log read again because it grew: its first events are out already
                out.write(dumps(event))
                out.write("\n")
                printed = event["seq"] + 1

    reading = reading_of(args, args.session)
    try:
        view = read_events(args.session, write, **reading)
    finally:
        close(reading)
    if view.health.refused:
        note(args, view)
    for event in view.closers:
        out.write(dumps(event))
        out.write("\n")
    out.flush()
    return 0


COMMAND = Command(
    "events", "a session's events, one compact JSON object per line",
    "Print a session's events, one compact JSON object per line.", "dsh-todo events SESSION | head",
    _arguments, _run, filter=True)
