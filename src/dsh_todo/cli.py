"""``dsh-todo``: the command line. Each subcommand imports what it needs when it runs, so startup stays fast."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _cmd_schema(args: argparse.Namespace) -> int:
    from dsh_todo.harness.tools.wire import function_tool
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

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsh-todo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    schema = sub.add_parser("schema", help="print todo_write exactly as sent to a model, with its token count")
    schema.add_argument("--single-active", action="store_true", help="allowParallelInProgress: false")
    schema.set_defaults(run=_cmd_schema)

    demo = sub.add_parser("demo", help="play a scripted multi-step task offline and show the plan")
    demo.add_argument("--root", default=".dsh-todo/demo", help="where the demo's session log is written")
    demo.set_defaults(run=_cmd_demo)

    from dsh_todo.commands import add_parsers

    add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    from dsh_todo.commands import CommandError

    if hasattr(signal, "SIGPIPE"):  # `dsh-todo events … | head` should stop quietly, like any Unix filter
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except CommandError as exc:
        print(f"dsh-todo {args.command}: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
