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
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, groupby, pairwise
from pathlib import Path
from typing import Any

from dsh_todo.harness.persistence.contract import StoredLog
from dsh_todo.harness.persistence.errors import SessionExistsError, not_stored, refuse_unknown_types
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.chunk_rows import ROW_TYPES
from dsh_todo.harness.persistence.jsonl.lock import WriterLock
from dsh_todo.harness.persistence.jsonl.paths import LOCK_NAME, Compression, compression_of
from dsh_todo.harness.persistence.jsonl.reading import read_stable
from dsh_todo.harness.persistence.jsonl.writer import encode_batch, encode_header
from dsh_todo.harness.persistence.jsonl.zstd import decode_frame, scan_frames
from dsh_todo.harness.persistence.postgres.backend import PgBackend
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.jsonutil import dumps, loads

Event = Mapping[str, Any]


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


def _members(line: bytes) -> int:
    """How many events one storage line stands for."""
    record = loads(line)
    if isinstance(record, dict) and record.get("type") in ROW_TYPES:
        return len(record["data"]["dt"]) + 1
    return 1


def _split(events: Sequence[Event], counts: Iterable[int]) -> list[list[Event]]:
    bounds = [0, *accumulate(counts)]
    if bounds[-1] != len(events):
        raise ValueError(f"storage records account for {bounds[-1]} events, the log has {len(events)}")
    return [list(events[start:stop]) for start, stop in pairwise(bounds)]


def _raw_batches(lines: Sequence[bytes], events: Sequence[Event]) -> list[list[Event]]:
    """Batches for a raw log: one per run of lines, cut wherever a delta run could have spanned two lines."""
    batches: list[list[Event]] = []
    for record in _split(events, map(_members, lines)):
        if batches and not (batches[-1][-1].get("type") == "assistant/chunk" == record[0].get("type")):
            batches[-1].extend(record)
        else:
            batches.append(record)
    return batches


def encode_log(meta: Mapping[str, Any], batches: Sequence[Sequence[Event]], compression: Compression) -> bytes:
    """The bytes our JSONL writer produces for ``meta`` and these batches (packed chunk rows in format v0, seq ranges
    in v4, as the writer chooses by the header's version)."""
    v0 = meta.get("version") == 0
    return encode_header(meta, compression) + b"".join(encode_batch(batch, compression, pack_chunks=v0, ranges=not v0)
                                                       for batch in batches)


def source_batches(stored: StoredLog) -> tuple[list[list[Event]], bool]:
    """The kept events of ``stored`` cut into their write batches, and whether re-encoding them gives the file."""
    assert stored.path is not None, "a JSONL backend's logs are files"
    buffer = read_stable(stored.path)
    compression = compression_of(stored.path)
    torn = stored.torn
    kept = stored.events[:len(stored.events) - (len(torn.recovered) if torn is not None else 0)]
    end = torn.truncate_to if torn is not None else len(buffer)
    if compression == "zstd":
        frames = (decode_frame(buffer[start:stop]) for start, stop in scan_frames(buffer[:end]).frames[1:])
        batches = _split(kept, [sum(map(_members, frame.split(b"\n")[:-1])) for frame in frames])
    else:
        lines = buffer[buffer.find(b"\n") + 1:end].split(b"\n")[:-1]
        batches = _raw_batches(lines, kept)
        if encode_log(stored.meta, batches, "none") != buffer[:end]:
            batches = _split(kept, map(_members, lines))  # one batch per line reproduces any packing
    return batches, encode_log(stored.meta, batches, compression) == buffer[:end]


def _jsonl_lock(path: Path, session_id: str) -> WriterLock | None:
    """The JSONL writer lock of a log we read; ``None`` on a read-only root, where no writer can be at work."""
    try:
        return WriterLock.acquire(path.parent / LOCK_NAME, session_id)
    except OSError as exc:
        if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
            return None
        raise


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
    lock = _jsonl_lock(path, session_id)
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


__all__ = ["Failed", "Moved", "Skipped", "encode_log", "export_root", "export_session",
           "import_root", "import_session", "source_batches"]
