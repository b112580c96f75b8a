"""What a subcommand is: its name, the help a person reads, its options and its body, kept in one module each."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple


class Command(NamedTuple):
    """One ``dsh-todo`` subcommand. :func:`dsh_todo.cli.build_parser` turns it into a subparser whose ``--help`` is
    ``description``, the options, then ``Example:`` and ``example``. A named tuple, not a dataclass: every
    ``dsh-todo`` process creates this type, and a dataclass takes about 1 ms to create, a named tuple 0.2 ms."""

    name: str
    summary: str
    """The one line next to the name in ``dsh-todo --help``."""
    description: str
    """What ``dsh-todo NAME --help`` says first: what the command does, in sentences."""
    example: str
    """One command line a person can copy."""
    arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the command's options to its parser."""
    run: Callable[[argparse.Namespace], int]
    """The body: returns the exit code, or raises from :mod:`dsh_todo.harness.errors` (``cli.main`` maps it)."""
    filter: bool = False
    """It only reads and prints, so a person pipes it into ``head``: it dies of SIGPIPE quietly, like any Unix
    filter. Everything else keeps Python's default (SIGPIPE ignored, ``EPIPE`` raised and handled): a server
    (``web``, ``mcp``, ``acp``, ``demo --web``) writes to sockets and pipes whose reader may hang up at any moment,
    and with the default action the first client that did so mid-stream killed the whole server."""
