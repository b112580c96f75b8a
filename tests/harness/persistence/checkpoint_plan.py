"""The cold plan read as the persistence tests hold it: the reader's own ``read_plan`` (a projection checkpoint whose
proof holds, else one checked pass), raising the full read's error on a refused log, beside the exact full read
(``read_session``) it must always agree with.

``read_session`` here reads through the backend directly (every event kept, unknown types refused), so the two
sides of every comparison come from different code: the reader's passes on one side, the backend's read on the
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from dsh_todo.harness.persistence import interrupted_turn_closers
from dsh_todo.harness.persistence.errors import refuse_unknown_types
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.paths import Compression
from dsh_todo.harness.persistence.jsonl.reader import writer_alive as store_writer_alive
from dsh_todo.logview import read_plan as reader_plan
from dsh_todo.tool_todo.projection import TODOS_UNIT, parse_todos

LOG_NAMES: Final[dict[str, Compression]] = {"session.v4.jsonl.zstd": "zstd", "session.v4.jsonl": "none",
                                            "session.jsonl.zstd": "zstd", "session.jsonl": "none"}
"""The log file names, newest format first (a directory DSH migrated holds both generations)."""


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
    """A session directory or its log file (``session[.v4].jsonl[.zstd]``) → the log file."""
    target = Path(path)
    if target.is_dir():
        for name in LOG_NAMES:
            if (target / name).is_file():
                return target / name
        raise LogPathError(f"{target} holds no session log")
    if not target.exists():
        raise LogPathError(f"{target} does not exist")
    if target.name not in LOG_NAMES:
        raise LogPathError(f"{target} is not a session log (expected one of {', '.join(LOG_NAMES)})")
    return target


def store_for(log: Path) -> JsonlBackend:
    """The store whose root holds ``log`` (``<root>/<project>/<session>/<file>``)."""
    return JsonlBackend(log.resolve().parents[2], LOG_NAMES[log.name])


def writer_alive(log: Path) -> bool:
    """Whether a live process holds the log's writer lock (the store's own check)."""
    return store_writer_alive(log.parent / "session.lock")


def read_session(path: str | Path) -> SessionView:
    log = find_log(path)
    stored = store_for(log).read_path(log.resolve())
    refuse_unknown_types(stored.session_id, stored.events, stored.location)
    events: list[dict[str, Any]] = list(stored.events)
    live = writer_alive(log)
    closers: Sequence[dict[str, Any]] = [] if live else interrupted_turn_closers(events, stored.meta)
    return SessionView(log, dict(stored.meta), events + list(closers), live, len(closers))


PlanSource = Literal["checkpoint", "scan", "full"]


@dataclass(frozen=True)
class PlanView:
    """A session's standing plan, as of ``as_of_seq`` (its last stored event), and how it was read."""

    path: Path
    meta: dict[str, Any]
    plan: list[Any] | None
    as_of_seq: int
    source: PlanSource


def read_plan(path: str | Path) -> PlanView:
    """The reader's standing plan of a log and how it was read; a log the reader refuses raises the full read's
    error."""
    log = find_log(path)
    view = reader_plan(log)
    if view.health.refused or view.meta is None:
        read_session(log)  # raises why
        raise AssertionError(f"the reader refused {log} ({view.health.describe()}) but the full read did not")
    return PlanView(log, dict(view.meta), view.plan, view.as_of_seq, view.source)
