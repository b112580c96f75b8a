"""The subcommands of ``dsh-todo``: one module per command, holding its help, its options and its body.

:mod:`dsh_todo.cli` builds the parser from :data:`COMMANDS` and turns errors into exit codes; nothing about a single
command lives there. A command's module imports what its body needs only when the body runs, and the parser loads
only the module of the command being run (:func:`command`), so ``dsh-todo --help`` and the start of every command
stay fast.
"""

from __future__ import annotations

import importlib
from typing import Final

from dsh_todo.commands.command import Command
from dsh_todo.harness.errors import CommandError

__all__ = ["COMMANDS", "Command", "CommandError", "all_commands", "command"]

COMMANDS: Final = {
    "schema": ("schema", "COMMAND"), "demo": ("demo", "COMMAND"), "mcp": ("mcp", "COMMAND"),
    "acp": ("acp", "COMMAND"), "web": ("web", "COMMAND"), "export": ("transfer", "EXPORT"),
    "import": ("transfer", "IMPORT"), "plan": ("plan", "COMMAND"), "events": ("events", "COMMAND"),
    "sessions": ("sessions", "COMMAND"), "watch": ("watch", "COMMAND"), "run": ("run", "COMMAND"),
}
"""Every subcommand's name → where it is defined (module of this package, attribute), in the order
``dsh-todo --help`` lists them. Only names live here; what a command says and does lives in its module."""


def command(name: str) -> Command:
    """The subcommand called ``name`` (one of :data:`COMMANDS`), importing its module alone."""
    module, attribute = COMMANDS[name]
    found: Command = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    return found


def all_commands() -> tuple[Command, ...]:
    """Every subcommand, in the order ``dsh-todo --help`` lists them."""
    return tuple(command(name) for name in COMMANDS)
