"""The subcommands of ``dsh-todo``: one module per command, holding its help, its options and its body.

:mod:`dsh_todo.cli` builds the parser from :data:`COMMANDS` and turns errors into exit codes; nothing about a single
command lives there. A command's module imports what its body needs at its top, like any module; what keeps the
start of every command fast is that the parser loads only the module of the command being run (:func:`command`):
this table is the composition root choosing a command, by name, not an import hidden in a body (decision 0030). Only
a door to an optional heavy dependency (the ACP agent, the web server, psycopg) is opened inside a body.
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
