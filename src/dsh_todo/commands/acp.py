"""``dsh-todo acp``: the agent loop as an ACP agent (:mod:`dsh_todo.carriers.acp`)."""

from __future__ import annotations

import argparse

from dsh_todo.commands.command import Command
from dsh_todo.commands.options import SCRIPT_FORMAT, add_agent_options, storage_of, telemetry_of
from dsh_todo.extras import require


def _run(args: argparse.Namespace) -> int:
    require("acp")
    storage, telemetry = storage_of(args), telemetry_of(args)
    from dsh_todo.carriers.acp.agent import main as serve_acp

    return serve_acp(storage=storage, script=args.script, model=args.model, wire=args.wire,
                     allow_parallel=not args.single_active, telemetry=telemetry)


COMMAND = Command(
    "acp", "the agent loop as an ACP agent over stdio (plans show in the editor)",
    "Run the agent loop as an ACP agent over stdio, so an editor shows the plan.\n\n" + SCRIPT_FORMAT,
    "dsh-todo acp --script replies.json", add_agent_options, _run)
