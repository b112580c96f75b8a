"""``dsh-todo schema``: the tool exactly as a model receives it, and what it costs in tokens.

stdout is the OpenAI function wrapping (what DSH's DeepSeek adapter and our agent loop send); stderr counts it and
the same tool in the Anthropic Messages wrapping, since both are paid on every request in which the tool is visible.
"""

from __future__ import annotations

import argparse
import sys

from dsh_todo.commands.command import Command
from dsh_todo.commands.options import add_policy_option
from dsh_todo.harness.llm.wire import function_tool, messages_tool
from dsh_todo.jsonutil import dumps
from dsh_todo.tokens import count_tokens
from dsh_todo.tool_todo import build_tool


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_policy_option(parser)


def _run(args: argparse.Namespace) -> int:
    schema = build_tool(not args.single_active).schema()
    text = dumps(function_tool(schema))
    print(text)
    policy = "single-active" if args.single_active else "parallel"
    print(f"# {count_tokens(text)} DeepSeek-V4 tokens ({policy}, compact JSON as sent to the model)",
          file=sys.stderr)
    print(f'# {count_tokens(dumps(messages_tool(schema)))} DeepSeek-V4 tokens ({policy}, the same tool in the '
          'Anthropic wrapping {"name","description","input_schema"})', file=sys.stderr)
    return 0


COMMAND = Command(
    "schema", "print todo_write exactly as sent to a model, with its token counts",
    "Print the todo_write tool exactly as it is sent to a model, and its token counts on stderr (OpenAI function "
    "wrapping, then Anthropic tool wrapping).",
    "dsh-todo schema --single-active", _arguments, _run, filter=True)
