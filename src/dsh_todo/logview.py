"""Reading one session log from the outside, as ``plan``, ``events``, ``sessions`` and ``watch`` do.

A reader never writes: it does the non-mutating read and, when no writer holds the log, appends the interrupted-turn
closers in memory, so what it shows is exactly what a ``load`` would produce without touching the file. While a
writer is alive (its lock file names a running process) the open turn is genuinely in progress and is shown as is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_todo.harness.persistence import JsonlStore, interrupted_turn_closers
from dsh_todo.harness.persistence.store import unknown_type_refusal
from dsh_todo.tool_todo.projection import TODOS_UNIT, parse_todos

LOG_NAMES = {"session.jsonl.zstd": "zstd", "session.jsonl": "none"}


class LogPathError(ValueError):
    """The path names no session log."""


@dataclass(frozen=True)
class SessionView:
    path: Path
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    live: bool
    closers: int

    @property
    def plan(self) -> list[Any] | None:
        """The standing plan (the ``todos`` projection value; ``None`` when no plan stands)."""
        return parse_todos(TODOS_UNIT.fold(self.events))


def find_log(path: str | Path) -> Path:
    """A session directory or its ``session.jsonl[.zstd]`` → the log file."""
    target = Path(path)
    if target.is_dir():
        for name in LOG_NAMES:
            if (target / name).is_file():
                return target / name
        raise LogPathError(f"{target} holds no session.jsonl or session.jsonl.zstd")
    if not target.exists():
        raise LogPathError(f"{target} does not exist")
    if target.name not in LOG_NAMES:
        raise LogPathError(f"{target} is not a session log (expected session.jsonl or session.jsonl.zstd)")
    return target


def store_for(log: Path) -> JsonlStore:
    """The store whose root holds ``log`` (``<root>/<project>/<session>/<file>``)."""
    return JsonlStore(log.resolve().parents[2], LOG_NAMES[log.name])  # type: ignore[arg-type]


def writer_alive(log: Path) -> bool:
    """Whether a live process holds the log's writer lock (the lock file exists and names a running pid)."""
    lock = log.parent / "session.lock"
    try:
        pid = int(lock.read_text(encoding="ascii").strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_session(path: str | Path) -> SessionView:
    log = find_log(path)
    stored = store_for(log).read_path(log.resolve())
    unknown_type_refusal(stored.session_id, stored.events, stored.path)
    events: list[dict[str, Any]] = list(stored.events)
    live = writer_alive(log)
    closers: Sequence[dict[str, Any]] = [] if live else interrupted_turn_closers(events)
    return SessionView(log, dict(stored.meta), events + list(closers), live, len(closers))
