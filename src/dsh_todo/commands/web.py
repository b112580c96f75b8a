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


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_storage_options(parser, writes=False)
    add_telemetry_option(parser)
    parser.add_argument("--port", type=int, default=8766, help="port (default 8766; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; others need --token)")
    parser.add_argument("--token", help="access token every request must carry (required off loopback)")
    add_agents_option(parser)


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
                   agent_homes=agent_homes)


COMMAND = Command(
    "web", "serve the live plan strip and tool rows of the sessions under a root",
    "Serve a page with the live plan strip and tool rows of the stored sessions.",
    "dsh-todo web --port 8766", _arguments, _run)
