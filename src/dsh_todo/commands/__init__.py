"""The subcommands of ``dsh-todo``: one module per command, holding its help, its options and its body.

:mod:`dsh_todo.cli` builds the parser from :func:`all_commands` and turns errors into exit codes; nothing about a
single command lives there. A command's module imports what its body needs only when the body runs, so
``dsh-todo --help`` and the start of every command stay fast.
"""

from __future__ import annotations

from dsh_todo.commands.command import Command
from dsh_todo.harness.errors import CommandError

__all__ = ["Command", "CommandError", "all_commands"]


def all_commands() -> tuple[Command, ...]:
    """Every subcommand, in the order ``dsh-todo --help`` lists them."""
    from dsh_todo.commands import acp, demo, events, mcp, plan, run, schema, sessions, transfer, watch, web

    return (schema.COMMAND, demo.COMMAND, mcp.COMMAND, acp.COMMAND, web.COMMAND, transfer.EXPORT, transfer.IMPORT,
            plan.COMMAND, events.COMMAND, sessions.COMMAND, watch.COMMAND, run.COMMAND)
