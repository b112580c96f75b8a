"""Command-line options that several commands share, so each means the same everywhere."""

from __future__ import annotations

import argparse

from dsh_todo.runtime import Storage


def add_storage_options(parser: argparse.ArgumentParser, *, writes: bool) -> None:
    """``--root`` / ``--database`` (and, for commands that create logs, ``--compression``): where sessions live,
    resolved by :func:`storage_of` as :meth:`~dsh_todo.runtime.Storage.resolve` says."""
    parser.add_argument("--root", metavar="DIR",
                        help="JSONL session root (default $DSH_TODO_ROOT or ./.dsh-todo/sessions)")
    parser.add_argument("--database", metavar="URL",
                        help="PostgreSQL instead of a root (default $DSH_TODO_DATABASE_URL)")
    if writes:
        parser.add_argument("--compression", choices=["zstd", "none"],
                            help="encoding of new logs under the root (default zstd, as DSH); existing logs keep "
                                 "theirs")


def storage_of(args: argparse.Namespace) -> Storage:
    """The storage the options name (a contradiction raises :class:`~dsh_todo.runtime.StorageError`)."""
    return Storage.resolve(args.root, args.database, getattr(args, "compression", None))
