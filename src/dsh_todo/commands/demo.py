"""``dsh-todo demo``: a scripted multi-step task, played offline through the real loop (:mod:`dsh_todo.demo`)."""

from __future__ import annotations

import argparse

from dsh_todo.commands.command import Command
from dsh_todo.commands.options import add_storage_options, add_telemetry_option, check_port, storage_of, telemetry_of
from dsh_todo.demo import run_demo


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_storage_options(parser, writes=True)
    add_telemetry_option(parser)
    parser.add_argument("--web", action="store_true", help="serve the live page on 127.0.0.1 while the demo runs")
    parser.add_argument("--port", type=int, default=0, help="port for --web (default: a free one)")
    parser.add_argument("--pace", type=float, default=1.5, help="seconds per model reply with --web (default 1.5)")


def _run(args: argparse.Namespace) -> int:
    storage, telemetry = storage_of(args), telemetry_of(args)
    return run_demo(storage, web=args.web, port=check_port(args.port), pace=args.pace, telemetry=telemetry)


COMMAND = Command(
    "demo", "play a scripted multi-step task offline and show the plan",
    "Play a scripted multi-step task offline through the real agent loop and show the plan as it changes.",
    "dsh-todo demo --web", _arguments, _run)
