"""``dsh-todo mcp``: ``todo_write`` served to MCP clients (:mod:`dsh_todo.carriers.mcp`)."""

from __future__ import annotations

import argparse

from dsh_todo.carriers.mcp.stdio import main as serve_mcp
from dsh_todo.commands.command import Command
from dsh_todo.commands.options import add_harness_options, check_port, seconds, storage_of, telemetry_of
from dsh_todo.extras import require


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_harness_options(parser)
    parser.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port with --http (default 8765; 0 picks one)")
    parser.add_argument("--structured-output", action="store_true",
                        help="also offer the tool's output schema and send each accepted list as structuredContent "
                             "(clients that prefer it show the model that JSON instead of the one-line result)")
    parser.add_argument("--idle-timeout", type=seconds, default=None, metavar="SECONDS",
                        help="with --http: release a client's session after this long without a request "
                             "(default 600)")


def _run(args: argparse.Namespace) -> int:
    require("mcp")
    storage, telemetry = storage_of(args), telemetry_of(args)
    return serve_mcp(storage=storage, allow_parallel=not args.single_active, http=args.http,
                     structured=args.structured_output, port=check_port(args.port), idle_timeout=args.idle_timeout,
                     telemetry=telemetry)


COMMAND = Command(
    "mcp", "serve todo_write to an MCP client (stdio, or streamable HTTP with --http)",
    "Serve todo_write to an MCP client over stdio (or streamable HTTP with --http); each client session gets its "
    "own log.", "dsh-todo mcp --root ./sessions", _arguments, _run)
