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
from dsh_todo.harness.persistence.jsonl_backend import JsonlBackend
from dsh_todo.jsonutil import loads
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
    if isinstance(backend, JsonlBackend):
        if not backend.root.is_dir():
            raise CommandError(f"no sessions under {backend.root} (it does not exist)")
        entries = [entry for entry in backend.stored_sessions()
                   if entry.path is not None and (wanted is None or _same_dir(entry.cwd, wanted))]
        stamped = [(_written(entry.path), entry.id, str(entry.path)) for entry in entries]
    else:
        cwds = {} if wanted is None else {entry.id: entry.cwd for entry in backend.stored_sessions()}
        stamped = [(written, session_id, backend.location) for session_id, written in _database_times(backend)
                   if wanted is None or _same_dir(cwds.get(session_id), wanted)]
    if not stamped:
        where = backend.root if isinstance(backend, JsonlBackend) else backend.location
        of = "" if project is None else f" of the project {project}"
        raise CommandError(f"no sessions{of} under {where}")
    _, session_id, source = max(stamped)
    return session_id, source


def _same_dir(cwd: str | None, wanted: str) -> bool:
    if cwd is None:
        return False
    return os.path.abspath(cwd) == wanted or os.path.realpath(cwd) == os.path.realpath(wanted)


def _written(path: Any) -> int:
    """When a log was last written: its modification time (a missing or unreadable one sorts first)."""
    try:
        return int(os.stat(path).st_mtime_ns)
    except OSError:
        return -1


def _database_times(backend: Any) -> list[tuple[str, int]]:
    """Every stored session's id and the time of its last event (milliseconds), in one query."""
    query = (f"SELECT DISTINCT ON (session_id) session_id, event FROM {backend.tables.events} "
             "ORDER BY session_id, seq DESC")
    rows = backend.run(lambda conn: conn.execute(query).fetchall())
    found: list[tuple[str, int]] = []
    for session_id, text in rows:
        try:
            stamp = loads(text).get("time")
        except (ValueError, AttributeError):
            stamp = None
        found.append((str(session_id), stamp if type(stamp) is int else -1))
    return found
