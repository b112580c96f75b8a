"""``--latest [--project DIR]`` for ``plan`` and ``watch``: the most recently written session, found for whoever
cannot name it (issue 21: an MCP client never shows the session id its server chose).

The choice is made once, before the command reads anything, and handed on as what a person would have typed: the
log's path under a root, the session id in a database. So the command's own reading, its verdicts and its errors
are exactly those of ``plan PATH`` (or ``plan ID --database URL``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from dsh_todo.commands.options import open_backend, storage_of
from dsh_todo.harness.errors import CommandError
from dsh_todo.logview import Refusal


def add_latest_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--latest", action="store_true",
                        help="instead of SESSION: the most recently written session under the root")
    parser.add_argument("--project", metavar="DIR",
                        help="with --latest: only sessions that ran in DIR (their working directory)")


def chosen_session(args: argparse.Namespace) -> str:
    """``args.session``, or with ``--latest`` the session to read; a contradiction or no session at all is a
    one-line :class:`CommandError`. With ``--latest`` it also says on stderr which session it chose."""
    if not args.latest:
        if args.project is not None:
            raise CommandError("--project goes with --latest")
        if args.session is None:
            raise CommandError("give a SESSION, or --latest for the most recently written one")
        session: str = args.session
        return session
    if args.session is not None:
        raise CommandError("give a SESSION or --latest, not both")
    storage = storage_of(args)
    try:
        backend = open_backend(storage)
    except Refusal as exc:
        raise CommandError(exc.reason) from None
    try:
        session_id, source = _latest(backend, args.project)
    finally:
        backend.close()
    print(f"dsh-todo {args.command}: the latest session is {session_id} ({source})", file=sys.stderr, flush=True)
    return source if storage.database is None else session_id


def _latest(backend: Any, project: str | None) -> tuple[str, str]:
    """``(id, where)`` of the most recently written session of ``backend`` (of ``project`` only, when given)."""
    wanted = None if project is None else os.path.abspath(project)
    if backend.holds_files and not os.path.isdir(backend.location):
        raise CommandError(f"no sessions under {backend.location} (it does not exist)")
    written = backend.written()
    entries = [entry for entry in backend.stored_sessions() if entry.path is not None or not backend.holds_files]
    entries = [entry for entry in entries if wanted is None or _same_dir(entry.cwd, wanted)]
    stamped = [(written.get(entry.id, -1), entry.id, entry.location) for entry in entries]
    if not stamped:
        of = "" if project is None else f" of the project {project}"
        raise CommandError(f"no sessions{of} under {backend.location}")
    _, session_id, source = max(stamped)
    return session_id, source


def _same_dir(cwd: str | None, wanted: str) -> bool:
    if cwd is None:
        return False
    return os.path.abspath(cwd) == wanted or os.path.realpath(cwd) == os.path.realpath(wanted)
