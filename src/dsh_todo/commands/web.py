"""``dsh-todo web``: the live page over the stored sessions (:mod:`dsh_todo.carriers.web`)."""

from __future__ import annotations

import argparse
import sys

from dsh_todo.commands.command import Command
from dsh_todo.commands.options import (
    add_agents_option,
    add_storage_options,
    add_telemetry_option,
    agents_of,
    check_port,
    storage_of,
    telemetry_of,
)
from dsh_todo.quoting import safe

IDLE_MINUTES = 10.0
"""The default of ``--idle-minutes`` (the page's, :data:`dsh_todo.carriers.web.app.IDLE_MINUTES`; not imported
from there, so ``dsh-todo --help`` does not load the web server)."""


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_storage_options(parser, writes=False)
    add_telemetry_option(parser)
    parser.add_argument("--port", type=int, default=8766, help="port (default 8766; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; others need --token)")
    parser.add_argument("--token", help="access token every request must carry (required off loopback)")
    add_agents_option(parser)
    parser.add_argument("--idle-minutes", type=_minutes, default=IDLE_MINUTES, metavar="N",
                        help=f"a card says idle after N minutes with an item in progress and no write "
                             f"(default {IDLE_MINUTES:g})")


def _minutes(value: str) -> float:
    """A positive number of minutes (a fraction allowed): 0 would flag every session at work at once."""
    try:
        minutes = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {value!r}") from None
    if not 0 < minutes < float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0: {value!r}")
    return minutes


def _run(args: argparse.Namespace) -> int:
    from dsh_todo.carriers.web.server import run_web

    storage = storage_of(args)
    telemetry = telemetry_of(args)
    port = check_port(args.port)
    agents, agent_homes = agents_of(args)
    if storage.root is not None and not storage.root.exists():  # a typo would look like a root without sessions
        print(f"dsh-todo web: the session root {safe(storage.root)} does not exist yet; its sessions will show once "
              "something writes there", file=sys.stderr, flush=True)
    return run_web(storage, host=args.host, port=port, token=args.token, telemetry=telemetry, agents=agents,
                   agent_homes=agent_homes, idle_minutes=args.idle_minutes)


COMMAND = Command(
    "web", "serve the live plan strip and tool rows of the sessions under a root",
    "Serve a page with the live plan strip and tool rows of the stored sessions.",
    "dsh-todo web --port 8766", _arguments, _run)
