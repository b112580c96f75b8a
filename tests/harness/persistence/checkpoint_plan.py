"""The cold plan read that trusts a projection checkpoint: what ``dsh_todo.logview.read_plan`` did before the reader
gave every read a verdict, kept here to test the checkpoint and fast-scan machinery of the persistence package.

The reader no longer uses it: a checkpoint vouches for the bytes before its offset without reading them, and the
envelope-only fast scan does not parse what follows a line's envelope, so neither can prove the verdict the exact
read gives (see ``dsh_todo.logview.reader``). The checkpoints and the scan are still the persistence package's
features, and these tests still hold them to "the same plan as the exact read" on the logs they are meant for.
``read_session`` here is the exact read that raises on a refused log, as that code did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from dsh_todo.harness.persistence import JsonlBackend, SessionLogError, interrupted_turn_closers
from dsh_todo.harness.persistence.checkpoint_file import usable_checkpoint
from dsh_todo.harness.persistence.errors import refuse_unknown_types
from dsh_todo.harness.persistence.fastscan import LastOf, scan_last_of
from dsh_todo.harness.persistence.jsonl_backend import writer_alive as store_writer_alive
from dsh_todo.harness.persistence.paths import Compression
from dsh_todo.harness.projections import ProjectionRegistry
from dsh_todo.tool_todo.projection import TODOS_UNIT, parse_todos

LOG_NAMES: Final[dict[str, Compression]] = {"session.jsonl.zstd": "zstd", "session.jsonl": "none"}

PLAN_EVENT_TYPES: Final = frozenset({"todo/write", "turn/start"})
"""The only event types the ``todos`` fold reacts to. Each one sets the state whatever it was (the list written, or
``None``), so the fold's result is decided by the last of them alone: the fast scan parses just that one."""


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
    closers: Sequence[dict[str, Any]] = [] if live else interrupted_turn_closers(events)
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
    """The standing plan of a log: what ``read_session(path).plan`` returns, without reading the whole log when
    that can be avoided (see the module docstring). Errors are the full read's."""
    log = find_log(path)
    resolved = log.resolve()
    store = store_for(log)
    view = _plan_from_checkpoint(log, resolved, store) or _plan_from_scan(log, resolved, store)
    if view is not None:
        return view
    full = read_session(log)
    return PlanView(log, full.meta, full.plan, len(full.events) - full.closers - 1, "full")


def _todos_registry() -> ProjectionRegistry:
    registry = ProjectionRegistry()
    registry.register(TODOS_UNIT)
    return registry


def _plan_after(state: Any, scan: LastOf, after_seq: int) -> list[Any] | None:
    last = scan.last
    if last is not None and last["seq"] > after_seq:
        state = TODOS_UNIT.apply(state, last)
    return parse_todos(state)


def _plan_from_checkpoint(log: Path, resolved: Path, store: JsonlBackend) -> PlanView | None:
    found = usable_checkpoint(store, resolved)
    if found is None:
        return None
    meta, checkpoint = found
    row = checkpoint.rows.get(TODOS_UNIT.key)
    # The registry's own usability rule: the live stateVersion, a value its state schema accepts, a sane seq.
    if _todos_registry().restore_floor({TODOS_UNIT.key: row}) == 0 or not isinstance(row, dict):
        return None
    seq: int = row["seq"]
    tail = scan_last_of(resolved, store.compression, PLAN_EVENT_TYPES, offset=checkpoint.offset)
    # The tail must start no later than just after the row, and reach the row's event (else the row leads the log).
    if tail is None or tail.first_seq > seq + 1 or tail.end_seq <= seq:
        return None
    return PlanView(log, dict(meta), _plan_after(row["val"], tail, seq), tail.end_seq - 1, "checkpoint")


def _plan_from_scan(log: Path, resolved: Path, store: JsonlBackend) -> PlanView | None:
    scan = scan_last_of(resolved, store.compression, PLAN_EVENT_TYPES)
    if scan is None or scan.meta is None:
        return None
    try:
        store.check_location(resolved, scan.meta)
    except SessionLogError:
        return None
    return PlanView(log, dict(scan.meta), _plan_after(TODOS_UNIT.init(), scan, -1), scan.end_seq - 1, "scan")
