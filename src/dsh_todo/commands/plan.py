"""``dsh-todo plan``: a session's standing plan, as the reader gives it (after load and recovery)."""

from __future__ import annotations

import argparse
from typing import Any

from dsh_todo.carriers.terminal import plan_lines
from dsh_todo.commands.command import Command
from dsh_todo.commands.latest import add_latest_options, chosen_session
from dsh_todo.commands.options import SESSION_HELP, add_storage_options
from dsh_todo.commands.reading import view_of
from dsh_todo.harness.errors import CommandError
from dsh_todo.jsonutil import dumps
from dsh_todo.logview import Refusal, read_plan, read_session
from dsh_todo.logview.plan import PlanFold


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", nargs="?", help=SESSION_HELP)
    add_latest_options(parser)
    parser.add_argument("--json", action="store_true", help="print the projection value (null when none)")
    parser.add_argument("--turn", type=int, metavar="N",
                        help="the plan as it stood when turn N ended (a later turn's start clears the standing one)")
    add_storage_options(parser, writes=False)


def _run(args: argparse.Namespace) -> int:
    args.session = chosen_session(args)
    if args.turn is None:
        plan = view_of(args, read_plan).plan
    else:
        plan = plan_of_turn(view_of(args, read_session).events, args.turn)
    print(dumps(plan) if args.json else "\n".join(plan_lines(plan)))
    return 0


def plan_of_turn(events: list[dict[str, Any]], turn: int) -> list[Any] | None:
    """The standing plan of ``events`` cut just before the ``turn/start`` that follows turn ``turn``'s: what a reader
    showed while that turn ran and after it ended, until the next one began."""
    starts = [(index, event.get("data", {}).get("turn")) for index, event in enumerate(events)
              if event.get("type") == "turn/start" and isinstance(event.get("data"), dict)]
    at = next((position for position, (_, number) in enumerate(starts) if number == turn), None)
    if at is None:
        turns = ", ".join(str(number) for _, number in starts) or "none"
        raise CommandError(f"the session has no turn {turn} (its turns: {turns})")
    end = starts[at + 1][0] if at + 1 < len(starts) else len(events)
    fold = PlanFold()
    fold.see(events[:end])
    try:
        return fold.plan()
    except Refusal as exc:
        raise CommandError(exc.reason) from None


COMMAND = Command(
    "plan", "the standing plan of a session log (after load and recovery)",
    "Print a session's standing plan, after load and recovery; with --turn N, the plan turn N ended with.",
    "dsh-todo plan SESSION --json", _arguments, _run, filter=True)
