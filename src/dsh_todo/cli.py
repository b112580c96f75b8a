"""``dsh-todo``: the command line. Each subcommand imports what it needs when it runs, so startup stays fast.

The help people read is :data:`USAGE` and :data:`GUIDE` (``--help`` shows them, not this docstring).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final


def _cmd_schema(args: argparse.Namespace) -> int:
    from dsh_todo.harness.llm.wire import function_tool
    from dsh_todo.jsonutil import dumps
    from dsh_todo.tokens import count_tokens
    from dsh_todo.tool_todo import build_tool

    tool = function_tool(build_tool(not args.single_active).schema())
    text = dumps(tool)
    print(text)
    policy = "single-active" if args.single_active else "parallel"
    print(f"# {count_tokens(text)} DeepSeek-V4 tokens ({policy}, compact JSON as sent to the model)",
          file=sys.stderr)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from dsh_todo.demo import run_demo

    _check_port(args.port)
    return run_demo(args)


def _check_port(port: int) -> None:
    """Refuse a port no socket can have: asyncio and uvicorn would otherwise wrap it silently (99999 → 34463)."""
    if not 0 <= port <= 65535:
        from dsh_todo.commands import CommandError

        raise CommandError(f"--port must be between 0 and 65535 (0 picks a free one), not {port}")


def _cmd_mcp(args: argparse.Namespace) -> int:
    from dsh_todo.carriers.mcp.server import main as serve_mcp
    from dsh_todo.cliargs import storage_of

    _check_port(args.port)
    return serve_mcp(storage=storage_of(args), allow_parallel=not args.single_active, http=args.http,
                     port=args.port, idle_timeout=args.idle_timeout)


def _cmd_acp(args: argparse.Namespace) -> int:
    from dsh_todo.carriers.acp.agent import main as serve_acp
    from dsh_todo.cliargs import storage_of

    return serve_acp(storage=storage_of(args), script=args.script, model=args.model,
                     allow_parallel=not args.single_active)


def _cmd_web(args: argparse.Namespace) -> int:
    from dsh_todo.carriers.web.server import run_web
    from dsh_todo.cliargs import storage_of

    _check_port(args.port)
    return run_web(storage_of(args), host=args.host, port=args.port, token=args.token)


def _transfer(args: argparse.Namespace, direction: str) -> int:
    from dsh_todo.commands import CommandError
    from dsh_todo.runtime import default_database

    url = args.database or default_database()
    if not url:
        raise CommandError("no database: pass --database URL or set $DSH_TODO_DATABASE_URL")
    root = Path(args.root)
    if direction == "import" and not root.exists():  # an empty import of a typo would look like success
        raise CommandError(f"{root} does not exist")
    if root.exists() and not root.is_dir():
        raise CommandError(f"{root} is not a directory (a JSONL persistence root is one)")
    from dsh_todo.harness.persistence.postgres.schema import check_schema_name

    check_schema_name(args.schema)  # before connecting, so a typo is not reported as a connection failure
    from dsh_todo.harness.persistence.postgres import PgBackend
    from dsh_todo.harness.persistence.postgres.transfer import Moved, export_root, import_root

    store = PgBackend(url, schema=args.schema)
    try:
        if direction == "import":
            results = import_root(args.root, store, session_ids=args.session)
        else:
            results = export_root(store, args.root, compression=args.compression, session_ids=args.session)
    finally:
        store.close()
    failed = 0
    for result in results:
        if isinstance(result, Moved):
            print(result.describe(f"{direction}ed"))
        else:
            failed += 1
            print(f"dsh-todo {direction}: {result}", file=sys.stderr)
    print(f"{len(results) - failed} sessions {direction}ed, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


def _cmd_export(args: argparse.Namespace) -> int:
    return _transfer(args, "export")


def _cmd_import(args: argparse.Namespace) -> int:
    return _transfer(args, "import")


def _add_transfer_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for direction, help_text in (("export", "copy sessions from PostgreSQL into a JSONL root (byte-faithful)"),
                                 ("import", "copy the sessions of a JSONL root into PostgreSQL (byte-faithful)")):
        cmd = sub.add_parser(direction, help=help_text)
        cmd.add_argument("root", metavar="ROOT", help="the JSONL persistence root")
        cmd.add_argument("--database", metavar="URL", help="PostgreSQL URL (default $DSH_TODO_DATABASE_URL)")
        cmd.add_argument("--schema", default="public", help="PostgreSQL schema holding the tables (default public)")
        if direction == "export":
            cmd.add_argument("--compression", choices=["zstd", "none"], default="zstd",
                             help="encoding of the exported logs (default zstd, as DSH)")
        cmd.add_argument("--session", action="append", metavar="ID", help="only this session (repeatable)")
        cmd.set_defaults(run=_cmd_export if direction == "export" else _cmd_import)


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse reports the error in one line)."""
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"a positive number of seconds, not {text!r}")
    return value


USAGE = """\
dsh-todo: DeepSeek Harness's todo_write tool, its session logs, and front doors for them.

A model keeps its task list with todo_write; every list it sends is appended to the session's log, and the
standing plan is read back from there. Sessions live under a JSONL root (--root, $DSH_TODO_ROOT, default
./.dsh-todo/sessions) or in PostgreSQL (--database, $DSH_TODO_DATABASE_URL); every command reads where the others
write."""

EPILOG = """\
Examples:
  dsh-todo demo                              play a scripted task offline and show its plan
  dsh-todo run --script replies.json "plan the release"
  dsh-todo sessions                          list the sessions and their plans
  dsh-todo watch SESSION                     follow a plan while another process writes it

Exit codes: 0 done, 1 a failed turn or an unexpected error, 2 bad input, setup or stored log.
Run 'dsh-todo COMMAND --help' for a command's options; add --debug to see a traceback."""

SCRIPT_FORMAT = """\
A script (--script FILE) is a JSON list of model replies, played in order:
  [{"tool_calls": [{"name": "todo_write",
     "arguments": "{\\"todos\\": [{\\"content\\": \\"read the code\\", \\"status\\": \\"in_progress\\"}]}"}]},
   {"text": "Plan recorded."}]
Each reply has "text" and/or "tool_calls"; a call's "arguments" is the raw JSON string a model would send. A turn
ends at a reply without tool calls, or after 50 model steps (the agent loop's cap)."""

GUIDE: dict[str, tuple[str, str]] = {
    "schema": ("Print the todo_write tool exactly as it is sent to a model, and its token count on stderr.",
               "dsh-todo schema --single-active"),
    "demo": ("Play a scripted multi-step task offline through the real agent loop and show the plan as it changes.",
             "dsh-todo demo --web"),
    "mcp": ("Serve todo_write to an MCP client over stdio (or streamable HTTP with --http); each client session "
            "gets its own log.", "dsh-todo mcp --root ./sessions"),
    "acp": ("Run the agent loop as an ACP agent over stdio, so an editor shows the plan.\n\n" + SCRIPT_FORMAT,
            "dsh-todo acp --script replies.json"),
    "web": ("Serve a page with the live plan strip and tool rows of the stored sessions.",
            "dsh-todo web --port 8766"),
    "export": ("Copy sessions from PostgreSQL into a JSONL root, byte for byte.",
               "dsh-todo export ./sessions --database postgresql://localhost/dsh"),
    "import": ("Copy the sessions of a JSONL root into PostgreSQL, byte for byte; the root must exist.",
               "dsh-todo import ./sessions --database postgresql://localhost/dsh"),
    "plan": ("Print a session's standing plan, after load and recovery.", "dsh-todo plan SESSION --json"),
    "events": ("Print a session's events, one compact JSON object per line.", "dsh-todo events SESSION | head"),
    "sessions": ("List the sessions under a root (or in a database) with their plans and whether their logs read.",
                 "dsh-todo sessions ./sessions"),
    "watch": ("Follow a session's plan while another process writes it; problems are said once on stderr.",
              "dsh-todo watch SESSION --interval 0.5"),
    "run": ("Run one turn of the agent loop with todo_write mounted, against a model endpoint (--model, "
            "DEEPSEEK_API_KEY) or a script (--script). --session resumes an existing session.\n\n" + SCRIPT_FORMAT,
            'dsh-todo run --script replies.json --session s1 "plan the release"'),
}


def _explain(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Give every command a description and one example, kept together here so they read as one manual."""
    for command, parser in sub.choices.items():
        description, example = GUIDE[command]
        parser.description = description
        parser.epilog = f"Example:\n  {example}"
        parser.formatter_class = argparse.RawDescriptionHelpFormatter


def build_parser() -> argparse.ArgumentParser:
    from dsh_todo.cliargs import add_storage_options

    parser = argparse.ArgumentParser(prog="dsh-todo", description=USAGE, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of a failure (also DSH_TODO_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    schema = sub.add_parser("schema", help="print todo_write exactly as sent to a model, with its token count")
    schema.add_argument("--single-active", action="store_true", help="allowParallelInProgress: false")
    schema.set_defaults(run=_cmd_schema)

    demo = sub.add_parser("demo", help="play a scripted multi-step task offline and show the plan")
    add_storage_options(demo, writes=True)
    demo.add_argument("--web", action="store_true", help="serve the live page on 127.0.0.1 while the demo runs")
    demo.add_argument("--port", type=int, default=0, help="port for --web (default: a free one)")
    demo.add_argument("--pace", type=float, default=1.5, help="seconds per model reply with --web (default 1.5)")
    demo.set_defaults(run=_cmd_demo)

    mcp = sub.add_parser("mcp", help="serve todo_write to an MCP client (stdio, or streamable HTTP with --http)")
    add_storage_options(mcp, writes=True)
    mcp.add_argument("--single-active", action="store_true", help="allowParallelInProgress: false")
    mcp.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    mcp.add_argument("--port", type=int, default=8765, help="HTTP port with --http (default 8765; 0 picks one)")
    mcp.add_argument("--idle-timeout", type=_seconds, default=600.0, metavar="SECONDS",
                     help="with --http: release a client's session after this long without a request (default 600)")
    mcp.set_defaults(run=_cmd_mcp)

    acp = sub.add_parser("acp", help="the agent loop as an ACP agent over stdio (plans show in the editor)")
    acp_model = acp.add_mutually_exclusive_group()
    acp_model.add_argument("--script", help="a JSON list of scripted assistant replies (offline)")
    acp_model.add_argument("--model", help="model name for the OpenAI-compatible endpoint (DEEPSEEK_MODEL)")
    add_storage_options(acp, writes=True)
    acp.add_argument("--single-active", action="store_true", help="allowParallelInProgress: false")
    acp.set_defaults(run=_cmd_acp)

    web = sub.add_parser("web", help="serve the live plan strip and tool rows of the sessions under a root")
    add_storage_options(web, writes=False)
    web.add_argument("--port", type=int, default=8766, help="port (default 8766; 0 picks a free one)")
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --token)")
    web.add_argument("--token", help="access token every request must carry (required off loopback)")
    web.set_defaults(run=_cmd_web)

    _add_transfer_parsers(sub)

    from dsh_todo.commands import add_parsers

    add_parsers(sub)
    _explain(sub)
    return parser


FILTERS: Final = frozenset({"events", "plan", "sessions", "watch", "schema"})
"""Subcommands that only read and print, so a person pipes them into ``head``: they die of SIGPIPE quietly, like
any Unix filter. Everything else keeps Python's default (SIGPIPE ignored, ``EPIPE`` raised and handled): a server
(``web``, ``mcp``, ``acp``, ``demo --web``) writes to sockets and pipes whose reader may hang up at any moment, and
with the default action the first client that did so mid-stream killed the whole server."""


def _restore_sigpipe(command: str) -> None:
    import signal

    if command in FILTERS and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def _exit_codes() -> tuple[tuple[type[BaseException], int], ...]:
    """What each group of the error tree (:mod:`dsh_todo.harness.errors`) means to a shell, first match wins.

    Whatever the person or model sent, however the setup is wrong, whatever stored log cannot be read: 2, the
    person can fix it. A model endpoint failing or the operating system refusing (a full disk, no permission): 1.
    """
    from dsh_todo.harness.errors import EncodingError, InputError, ModelError, SessionLogError, SetupError

    return ((InputError, 2), (SetupError, 2), (SessionLogError, 2), (EncodingError, 2), (ModelError, 1),
            (OSError, 1))


def one_line(exc: BaseException) -> str:
    """The message on one line: psycopg's texts, for one, put a hint on a second, indented line."""
    text = re.sub(r"\s*\n\s*", " ", str(exc).strip())
    return text or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the one place that turns an exception into a line on stderr and an exit code.

    A known error prints ``dsh-todo <command>: <message>``; anything else, a bug, prints
    ``dsh-todo: error: <message>`` and exits 1. ``--debug`` (before the command) or ``DSH_TODO_DEBUG=1`` lets the
    traceback through instead, for the person who asked for it.
    """
    args = build_parser().parse_args(argv)
    _restore_sigpipe(args.command)
    debug = args.debug or os.environ.get("DSH_TODO_DEBUG", "") not in ("", "0")
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if debug:
            raise
        for kind, exit_code in _exit_codes():
            if isinstance(exc, kind):
                print(f"dsh-todo {args.command}: {one_line(exc)}", file=sys.stderr)
                return exit_code
        print(f"dsh-todo: error: {one_line(exc)}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
