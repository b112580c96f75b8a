"""Moving logs between a JSONL root and PostgreSQL, both ways, without changing a byte that matters.

"Byte-faithful", precisely: event text is the canonical encoding (:func:`dsh_todo.jsonutil.dumps`) both ways, which
for a log DSH or we wrote is the line on disk (packed chunk rows are expanded: the database stores events), and the
header is stored as its exact text. A file's bytes also depend on where its batches were cut, so import records each
event's batch (its zstd frame or, in a raw log, where batches leave no trace, a cut before every line whose first
event could have continued the previous line's delta run) and export replays those batches through the JSONL writer:
the same compression gives the file back byte for byte whenever it is what our writer writes for those batches (every
log DSH or we write); import checks it and reports ``faithful``. Not carried: a torn tail and the lock file; import
commits what ``load`` would (tail cut, interrupted turn closed) into the database only, never into the source root.

Both directions take the session's writer lock on the side they read, so a session still being written is refused
rather than copied half-done, and both refuse to overwrite a session the other side already has.

The one module of persistence that names two backends, so it sits above both folders and neither imports the other's
(decision 0043); the JSONL side's batches are :mod:`.jsonl.batches`'. It loads psycopg (through the PostgreSQL
backend), so the ``import`` and ``export`` commands open it where they decide to, as they open the backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from dsh_todo.harness.event_types import Event
from dsh_todo.harness.persistence.errors import SessionExistsError, not_stored, refuse_unknown_types
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.batches import lock_to_copy, source_batches
from dsh_todo.harness.persistence.jsonl.paths import Compression
from dsh_todo.harness.persistence.jsonl.reading import read_stable
from dsh_todo.harness.persistence.postgres.backend import PgBackend
from dsh_todo.harness.persistence.postgres.schema import check_schema_name
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.jsonutil import dumps


def open_database(url: str, schema: str) -> PgBackend:
    """The database side of a move, connected now: one line for an unreachable database, not one failure per
    session. The schema's name is checked first, so a typo is not reported as a connection failure."""
    check_schema_name(schema)
    backend = PgBackend(url, schema=schema)
    backend.open()
    return backend


@dataclass(frozen=True, slots=True)
class Moved:
    """What happened to one session."""

    session_id: str
    events: int
    batches: int
    faithful: bool | None = None
    """Import only: whether replaying the recorded batches through the JSONL writer reproduces the source file."""
    closers: int = 0
    """Import only: closers appended to end an interrupted turn (as ``load`` would)."""
    cut_bytes: int = 0
    """Import only: bytes of a torn tail left behind."""

    def describe(self, verb: str) -> str:
        text = f"{verb} {self.session_id}: {self.events} events in {self.batches} batches"
        if self.faithful is not None:
            text += ", byte-faithful" if self.faithful else ", events faithful (the file's bytes would differ)"
        if self.cut_bytes:
            text += f", torn tail of {self.cut_bytes} bytes left behind"
        if self.closers:
            text += f", interrupted turn closed with {self.closers} events"
        return text


@dataclass(frozen=True, slots=True)
class Skipped:
    """A session the database already holds exactly as the import would store it: nothing to do."""

    session_id: str

    def describe(self) -> str:
        return f"{self.session_id}: already imported, skipped"


def import_session(source: JsonlBackend, target: PgBackend, session_id: str) -> Moved | Skipped:
    """Copy one JSONL session into the database, committing ``load``'s recovery there (never in the source).

    A session the database already has is :class:`Skipped` when its stored header and events are, text for text,
    what this import would store; any other stored log is refused with both lengths, and left as it is."""
    path = source.find(session_id)
    if path is None:
        raise not_stored(session_id, f"under {source.root}")
    lock = lock_to_copy(path, session_id)
    try:
        stored = source.read_path(path, session_id)
        refuse_unknown_types(session_id, stored.events, path)
        batches, faithful = source_batches(stored)
    finally:
        if lock is not None:
            lock.release()
    torn = stored.torn
    tail = list(torn.recovered) if torn is not None else []
    closers = interrupted_turn_closers(stored.events, stored.meta)
    if tail or closers:
        batches.append([*tail, *closers])
    if target.locate(session_id) is not None:
        return _already_there(target, session_id, stored.meta, [event for batch in batches for event in batch])
    writer = target.create(dict(stored.meta))
    try:
        writer.append_batches(batches)
    finally:
        writer.close()
    cut = len(read_stable(path)) - torn.truncate_to if torn is not None else 0
    return Moved(session_id, len(stored.events) + len(closers), len(batches), faithful, len(closers), cut)


def _already_there(target: PgBackend, session_id: str, meta: Mapping[str, Any],
                   events: Sequence[Event]) -> Skipped:
    there = target.read_stored(session_id)
    if dumps(dict(there.meta)) == dumps(dict(meta)) and [dumps(e) for e in there.events] == [dumps(e) for e in events]:
        return Skipped(session_id)
    raise SessionExistsError(f'session "{session_id}" is already in the database {target.location} with other '
                             f"events ({len(there.events)} there, {len(events)} here); delete it there to import "
                             "this log")


def export_session(source: PgBackend, target: JsonlBackend, session_id: str) -> Moved:
    """Copy one database session into a JSONL root, batch by batch, as the JSONL writer would have written it."""
    if source.locate(session_id) is None:
        raise not_stored(session_id, f"in {source.location}")
    held = source.lock(session_id)  # a session still being written is refused
    try:
        stored = source.read_stored(session_id)
    finally:
        held.close()
    batches = [[event for event, _ in run] for _, run in groupby(zip(stored.events, stored.batches, strict=True),
                                                                   key=lambda pair: pair[1])]
    writer = target.create(dict(stored.meta))
    try:
        for batch in batches:
            writer.append(batch)
    finally:
        writer.close()
    return Moved(session_id, len(stored.events), len(batches))


@dataclass(frozen=True, slots=True)
class Failed:
    """A session that did not move, and why; the other sessions still moved."""

    session_id: str
    error: Exception

    def describe(self) -> str:
        return f"{self.session_id}: {' '.join(str(self.error).split()) or type(self.error).__name__}"


def import_root(root: str | os.PathLike[str], target: PgBackend, *,
                session_ids: Sequence[str] | None = None) -> list[Moved | Skipped | Failed]:
    """Import every session under ``root`` (or the named ones), each log in its own encoding; one result per
    session, failures and sessions already there included."""
    source = JsonlBackend(root)
    return _each(session_ids, source, lambda session_id: import_session(source, target, session_id))


def export_root(source: PgBackend, root: str | os.PathLike[str], *, compression: Compression = "zstd",
                session_ids: Sequence[str] | None = None) -> list[Moved | Skipped | Failed]:
    """Export every database session (or the named ones) into ``root``; one result per session."""
    target = JsonlBackend(root, compression)
    return _each(session_ids, source, lambda session_id: export_session(source, target, session_id))


def _each(session_ids: Sequence[str] | None, source: JsonlBackend | PgBackend,
          move: Callable[[str], Moved | Skipped]) -> list[Moved | Skipped | Failed]:
    """``move`` the named sessions (or every session of ``source``); a failure is that session's result and the
    others still move."""
    results: list[Moved | Skipped | Failed] = []
    for session_id in session_ids or [entry.id for entry in source.stored_sessions()]:
        try:
            results.append(move(session_id))
        except Exception as exc:
            results.append(Failed(session_id, exc))
    return results


__all__ = ["Failed", "Moved", "Skipped", "export_root", "export_session", "import_root", "import_session",
           "open_database"]
