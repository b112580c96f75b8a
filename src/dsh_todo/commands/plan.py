"""``dsh-todo plan``: a session's standing plan, as the reader gives it (after load and recovery)."""

from __future__ import annotations

import argparse
from typing import Any

from dsh_todo.carriers.terminal import plan_lines, safe
from dsh_todo.coding_agents.base import AgentSession
from dsh_todo.coding_agents.discover import find
from dsh_todo.commands.command import Command
from dsh_todo.commands.latest import add_latest_options, chosen_session
from dsh_todo.commands.options import SESSION_HELP, add_agents_option, add_storage_options, agents_of
from dsh_todo.commands.reading import view_of
from dsh_todo.commands.sessions import about
from dsh_todo.harness.errors import CommandError
from dsh_todo.jsonutil import dumps
from dsh_todo.logview import Refusal, read_plan, read_session
from dsh_todo.logview.plan import PlanFold

STANDARD = ("pending", "in_progress", "completed")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", nargs="?", help=SESSION_HELP)
    add_latest_options(parser)
    parser.add_argument("--json", action="store_true", help="print the projection value (null when none)")
    parser.add_argument("--turn", type=int, metavar="N",
                        help="the plan as it stood when turn N ended (a later turn's start clears the standing one)")
    add_storage_options(parser, writes=False)
    add_agents_option(parser)


def _run(args: argparse.Namespace) -> int:
    agents, homes = agents_of(args)
    args.session = chosen_session(args)
    other = agent_session(agents, homes, args.session) if agents and not args.latest else None
    if other is not None:
        return _agent_plan(args, other)
    if args.turn is None:
        plan = view_of(args, read_plan).plan
    else:
        plan = plan_of_turn(view_of(args, read_session).events, args.turn)
    print(dumps(plan) if args.json else "\n".join(plan_lines(plan)))
    return 0


def agent_session(agents: list[str], homes: dict[str, Any], session: str) -> AgentSession | None:
    """The chosen agents' session named ``session`` (its id or file path); one that does not read is the reader's
    one-line error."""
    found = find(agents, homes, session)
    if found is not None and found.extra.get("error"):
        raise CommandError(str(found.extra["error"]))
    return found


def agent_plan_lines(session: AgentSession) -> list[str]:
    """Another agent's plan for a person: which session it is, then the plan as ours is shown, a status that is
    not one of ours written beside its item (never dropped)."""
    plan = None if session.plan is None else [item.as_json() for item in session.plan]
    lines = plan_lines(plan)
    if session.plan:
        lines[1:] = [line + (f" ({safe(item.status)})" if item.status not in STANDARD else "")
                     for line, item in zip(lines[1:], session.plan, strict=True)]
    return [f"{safe(session.id)}: {about(session)}", *lines]


def _agent_plan(args: argparse.Namespace, session: AgentSession) -> int:
    if args.turn is not None:
        raise CommandError(f"--turn reads DSH sessions; {session.id} is a {session.agent} session")
    if args.json:
        print(dumps(None if session.plan is None else [item.as_json() for item in session.plan]))
    else:
        print("\n".join(agent_plan_lines(session)))
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
