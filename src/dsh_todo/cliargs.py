"""Command-line options that several commands share, so each means the same everywhere."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dsh_todo.runtime import Storage, default_root

if TYPE_CHECKING:
    from dsh_todo.harness.persistence import LogBackend


def add_storage_options(parser: argparse.ArgumentParser, *, writes: bool) -> None:
    """``--root`` / ``--database`` (and, for commands that create logs, ``--compression``): where sessions live,
    resolved by :func:`storage_of` as :meth:`~dsh_todo.runtime.Storage.resolve` says."""
    parser.add_argument("--root", metavar="DIR",
                        help="JSONL session root (default $DSH_TODO_ROOT or ./.dsh-todo/sessions)")
    parser.add_argument("--database", metavar="URL",
                        help="PostgreSQL instead of a root (default $DSH_TODO_DATABASE_URL)")
    parser.add_argument("--schema", default="public", help="PostgreSQL schema holding the tables (default public)")
    if writes:
        parser.add_argument("--compression", choices=["zstd", "none"],
                            help="encoding of new logs under the root (default zstd, as DSH); existing logs keep "
                                 "theirs")


def storage_of(args: argparse.Namespace) -> Storage:
    """The storage the options name (a contradiction raises :class:`~dsh_todo.runtime.StorageError`)."""
    return Storage.resolve(args.root, args.database, getattr(args, "compression", None), args.schema)


def open_backend(storage: Storage) -> LogBackend:
    """The backend a reader reads ``storage`` through (no runtime booted: readers never write). A database that
    cannot be reached raises :class:`~dsh_todo.logview.Refusal`."""
    if storage.database is not None:
        from dsh_todo.logview.database import open_database

        return open_database(storage.database, schema=storage.schema)
    from dsh_todo.harness.persistence import JsonlBackend

    return JsonlBackend(storage.root or default_root(), storage.compression)
