"""How the reading commands (``plan``, ``events``, ``sessions``, ``watch``) find a session and report its verdict."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from dsh_todo.carriers.terminal import safe
from dsh_todo.commands.options import open_backend, storage_of
from dsh_todo.harness.errors import CommandError
from dsh_todo.logview import Refusal
from dsh_todo.logview.files import names_a_log


def reading_of(args: argparse.Namespace, source: str) -> dict[str, Any]:
    """How to read ``source``: as a session id under ``--root`` or in ``--database`` when one is given and stores
    it; else as a path when it is a session log or session folder; else as a session id where sessions live
    (``$DSH_TODO_DATABASE_URL``, ``$DSH_TODO_ROOT``, the default root). So a file or folder in the working
    directory that bears a session's name never shadows it."""
    if not names_a_log(source):
        return backend_of(args)
    if args.root is None and args.database is None:
        return {}
    reading = backend_of(args)
    try:
        stored = reading["backend"].locate(source) is not None
    except Exception:  # the id is stored, but not in a way that can be read: the read says why
        stored = True
    if not stored:
        close(reading)
        return {}
    return reading


def backend_of(args: argparse.Namespace) -> dict[str, Any]:
    """The reader's backend for the storage options, or the reader's refusal as a one-line error."""
    try:
        return {"backend": open_backend(storage_of(args))}
    except Refusal as exc:
        raise CommandError(exc.reason) from None


def close(reading: dict[str, Any]) -> None:
    backend = reading.get("backend")
    if backend is not None:
        backend.close()


def note(args: argparse.Namespace, view: Any) -> None:
    """Refuse (exit 2) or, for a recovered log, say what recovery did; both in one line on stderr."""
    health = view.health
    if health.refused:
        raise CommandError(health.reason)
    if health.state == "recovered":
        print(f"dsh-todo {args.command}: {safe(health.reason)}", file=sys.stderr)


def view_of(args: argparse.Namespace, read: Callable[..., Any]) -> Any:
    """``read(session, ...)`` of the session the arguments name, refused or noted as :func:`note` says."""
    reading = reading_of(args, args.session)
    try:
        view = read(args.session, **reading)
    finally:
        close(reading)
    note(args, view)
    return view
