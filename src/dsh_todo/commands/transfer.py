"""``dsh-todo export`` and ``dsh-todo import``: sessions copied byte for byte between a JSONL root and PostgreSQL.

The two directions are one command body (:func:`_transfer`) with two names, so what they check and print agrees.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from dsh_todo.carriers.terminal import safe
from dsh_todo.commands.command import Command
from dsh_todo.extras import require
from dsh_todo.harness.errors import CommandError
from dsh_todo.runtime import default_database


def _arguments(direction: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("root", metavar="ROOT", help="the JSONL persistence root")
        parser.add_argument("--database", metavar="URL", help="PostgreSQL URL (default $DSH_TODO_DATABASE_URL)")
        parser.add_argument("--schema", default="public",
                            help="PostgreSQL schema holding the tables (default public)")
        if direction == "export":
            parser.add_argument("--compression", choices=["zstd", "none"], default="zstd",
                                help="encoding of the exported logs (default zstd, as DSH)")
        parser.add_argument("--session", action="append", metavar="ID", help="only this session (repeatable)")

    return add


def _transfer(args: argparse.Namespace) -> int:
    direction = args.command
    url = args.database or default_database()
    if not url:
        raise CommandError("no database: pass --database URL or set $DSH_TODO_DATABASE_URL")
    require("postgres")
    root = Path(args.root)
    if direction == "import" and not root.exists():  # an empty import of a typo would look like success
        raise CommandError(f"{root} does not exist")
    if root.exists() and not root.is_dir():
        raise CommandError(f"{root} is not a directory (a JSONL persistence root is one)")
    from dsh_todo.harness.persistence import transfer  # psycopg, the `postgres` extra

    backend = transfer.open_database(url, args.schema)
    try:
        if direction == "import":
            results = transfer.import_root(args.root, backend, session_ids=args.session)
        else:
            results = transfer.export_root(backend, args.root, compression=args.compression, session_ids=args.session)
    finally:
        backend.close()
    failed = skipped = 0
    for result in results:
        if isinstance(result, transfer.Moved):
            print(safe(result.describe(f"{direction}ed")))
        elif isinstance(result, transfer.Skipped):
            skipped += 1
            print(safe(result.describe()))
        else:
            failed += 1
            print(f"dsh-todo {direction}: {safe(result.describe())}", file=sys.stderr)
    also = f", {skipped} already imported (skipped)" if skipped else ""
    print(f"{len(results) - failed - skipped} sessions {direction}ed{also}, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


EXPORT = Command(
    "export", "copy sessions from PostgreSQL into a JSONL root (byte-faithful)",
    "Copy sessions from PostgreSQL into a JSONL root, byte for byte.",
    "dsh-todo export ./sessions --database postgresql://localhost/dsh", _arguments("export"), _transfer)

IMPORT = Command(
    "import", "copy the sessions of a JSONL root into PostgreSQL (byte-faithful)",
    "Copy the sessions of a JSONL root into PostgreSQL, byte for byte; the root must exist.",
    "dsh-todo import ./sessions --database postgresql://localhost/dsh", _arguments("import"), _transfer)
