"""``dsh-todo sessions``: every session under a root (or in a database), its plan and its log's verdict."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dsh_todo.carriers.terminal import progress_label, safe
from dsh_todo.coding_agents.base import AgentSession
from dsh_todo.coding_agents.discover import discover
from dsh_todo.commands.command import Command
from dsh_todo.commands.options import add_agents_option, add_storage_options, agents_of
from dsh_todo.commands.reading import backend_of, close
from dsh_todo.harness.errors import CommandError
from dsh_todo.logview import list_sessions
from dsh_todo.quoting import shell_path


def _arguments(parser: argparse.ArgumentParser) -> None:
    # A root given as a word (as this command once took it) is answered with the way to give it, not argparse's
    # "unrecognized arguments".
    parser.add_argument("root_arg", nargs="?", help=argparse.SUPPRESS)
    add_storage_options(parser, writes=False)
    add_agents_option(parser)


def plan_label(view: Any) -> str:
    if view.health.refused:
        return "-"
    plan = view.plan
    return "no plan" if plan is None else (progress_label(plan) or "empty plan")


def _run(args: argparse.Namespace) -> int:
    if args.root_arg is not None:
        raise CommandError(f"give the root as an option: dsh-todo sessions --root {shell_path(args.root_arg)}")
    agents, homes = agents_of(args)
    reading = backend_of(args)
    backend = reading["backend"]
    views: list[Any] = []
    try:
        missing = backend.holds_files and not os.path.isdir(backend.location)
        if missing and not (agents and args.root is None):  # with agents, a default root not made yet is no error
            raise CommandError(f"{backend.location} is not a directory")
        try:
            views = [] if missing else list_sessions(backend)
        except CommandError:
            raise
        except Exception as exc:  # the listing itself failed (an unreadable root, a lost database)
            raise CommandError(f"cannot list the sessions: {' '.join(str(exc).split())}") from None
    finally:
        close(reading)
    others = _agent_sessions(agents, homes)
    if not views and not others:
        print(f"no sessions in {backend.location}" + (f" nor in the homes of {', '.join(agents)}" if agents else ""))
    for view in views:
        print(f"{safe(view.session_id)}\t{plan_label(view)}\t{safe(view.where)}\t{safe(view.health.describe())}")
    for session in others:
        print(f"{safe(session.id)}\t{agent_plan_label(session)}\t{safe(session.path)}\t{about(session)}")
    return 0


def _agent_sessions(agents: Sequence[str], homes: dict[str, Any]) -> list[AgentSession]:
    """The other agents' sessions, most recently changed first, each subagent right after its parent."""
    if not agents:
        return []
    found = discover(agents, homes)
    ids = {(session.agent, session.id) for session in found}
    children: dict[tuple[str, str], list[AgentSession]] = {}
    for session in found:
        if session.parent is not None and (session.agent, session.parent) in ids:
            children.setdefault((session.agent, session.parent), []).append(session)
    ordered: list[AgentSession] = []

    def add(session: AgentSession) -> None:
        ordered.append(session)
        for child in children.get((session.agent, session.id), []):
            add(child)

    for session in found:
        if session.parent is None or (session.agent, session.parent) not in ids:
            add(session)
    return ordered


def agent_plan_label(session: AgentSession) -> str:
    """The plan column of another agent's session: as :func:`plan_label` says it for ours."""
    if session.extra.get("error"):
        return "-"
    if session.plan is None:
        return "no plan"
    return progress_label([item.as_json() for item in session.plan]) or "empty plan"


def changed(session: AgentSession) -> str:
    """When the session last changed, in UTC."""
    return datetime.fromtimestamp(session.updated, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def about(session: AgentSession) -> str:
    """Its agent, project and last change (and its parent, or why it does not read)."""
    parts = [session.agent, f"project {session.project}" if session.project else "no project",
             f"changed {changed(session)}"]
    if session.parent is not None:
        parts.append(f"subagent of {session.parent}")
    if session.extra.get("error"):
        parts.append(str(session.extra["error"]))
    return safe(" · ".join(parts))


COMMAND = Command(
    "sessions", "the sessions under a root, with their standing plans and verdicts",
    "List the sessions under a root (or in a database) with their plans and whether their logs read.",
    "dsh-todo sessions --root ./sessions", _arguments, _run, filter=True)
