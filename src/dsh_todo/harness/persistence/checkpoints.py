"""``@deepseek-ai/dsh-session-projection-cache``: projection checkpoints beside each log (SPEC §6.2).

A cold reader (``dsh-todo plan``, a carrier opening a session that is not loaded) wants a session's projections
without folding its whole log. This plugin keeps, beside every persisted log, the projection checkpoint of the
session (``{key: {ver, seq, val}}``, :meth:`~dsh_todo.harness.projections.ProjectionRegistry.checkpoint`) together
with the byte offset in the log where a reader can start decoding to reach the events after it; a cold read then
restores from the rows and folds only the tail.

The file is ``projections.json`` in the session directory::

    {"version": 1, "log": "session.jsonl.zstd", "identity": {"createdAt": …, "cwd"?: …},
     "offset": <int>, "rows": {"todos": {"ver": 2, "seq": <n>, "val": …}}}

``offset`` is the start of a log record (a raw line, or a zstd frame) at or before the one holding event ``seq``:
decoding from there yields events starting at some seq ≤ ``seq`` + 1, and the reader skips what the rows already
cover. Pointing at or before the record (rather than just after it) is what lets a reader prove the checkpoint does
not lead the log: the event ``seq`` must be among the decoded ones.

**It never leads the log.** A checkpoint is written only for an event that is already durable: at every
``turn/end`` the rows are snapshotted (a deep copy of each state; nothing is folded), the write-behind is asked for a
batch ending at that event (:meth:`~.jsonl.JsonlPersistence.flush_soon`: written at once by the writer thread), and
the rows are written from the durability callback once that batch is fsynced, with its offset. ``turn/end`` itself
therefore costs a snapshot and no I/O, and the record a cold reader starts from holds at most one turn (under zstd,
the frame ends at the ``turn/end``). Those batch boundaries are asked for at most once per batch window per session,
so turns that end faster than that (a replay, a benchmark) are batched as usual and the record holds at most one
window of events. Closing a session and disposing the plugin write one more checkpoint, for the
session's last event, once persistence has flushed it. The file is replaced atomically (temporary file, fsync,
rename); a crash leaves the previous checkpoint, which only lags. A session holding an event type this harness does
not know (and not marked ``ignorable``) gets no further checkpoints, so a cold reader always meets such an event in
the tail it reads, and refuses the log exactly as a full read does.

**Validation on read** (:func:`usable_checkpoint`): the file parses and names this log, its identity equals the
log header's ``{createdAt, cwd?}``, the log is where its header says, and ``offset`` lies inside the file. Per row,
:class:`~dsh_todo.harness.projections.ProjectionRegistry` decides: a row whose ``ver`` is not the live unit's
``stateVersion``, whose value fails the unit's state schema, or whose ``seq`` is not covered by the decoded tail
(beyond the log: it would lead) is discarded, and the reader folds that unit from seq 0 instead.

What a checkpointed read trusts: the part of the log before ``offset``. It was durable and clean when the
checkpoint was written and an append-only log does not change it, but a file edited by hand in that region is not
re-verified (a full read would notice).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from dsh_todo.harness.context import Context
from dsh_todo.harness.persistence.chunk_rows import ROW_TYPES
from dsh_todo.harness.persistence.errors import SessionLogError
from dsh_todo.harness.persistence.header import Meta
from dsh_todo.harness.persistence.jsonl import JsonlPersistence
from dsh_todo.harness.persistence.logfile import Batch
from dsh_todo.harness.persistence.paths import Compression
from dsh_todo.harness.persistence.scan import LogScanner, paused_gc
from dsh_todo.harness.persistence.store import JsonlStore, unknown_type_refusal
from dsh_todo.harness.persistence.zstd import FrameError, decode_frame, decode_prefix, scan_frames
from dsh_todo.harness.projections import ProjectionRegistry, Restored
from dsh_todo.harness.session import KNOWN_SESSION_EVENT_TYPES, Event, Session, SessionStore
from dsh_todo.jsonutil import dumps_bytes, loads

log = logging.getLogger("dsh_todo.persistence")

name = "@deepseek-ai/dsh-session-projection-cache"
inject = ["sessions", "session_projections", "session_persistence"]

CHECKPOINT_NAME: Final = "projections.json"
FORMAT_VERSION: Final = 1

Rows = dict[str, dict[str, Any]]


# -- the file -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One ``projections.json``: the rows, and where in ``log`` (a file name) a reader starts decoding."""

    log: str
    identity: dict[str, Any]
    offset: int
    rows: Rows

    def encode(self) -> bytes:
        return dumps_bytes({"version": FORMAT_VERSION, "log": self.log, "identity": self.identity,
                            "offset": self.offset, "rows": self.rows})


def identity_of(header: Mapping[str, Any]) -> dict[str, Any]:
    """``{createdAt, cwd?}`` of a log header (or of a session's header fields)."""
    identity: dict[str, Any] = {"createdAt": header.get("createdAt")}
    if header.get("cwd") is not None:
        identity["cwd"] = header["cwd"]
    return identity


def checkpoint_path(log_path: Path) -> Path:
    return log_path.parent / CHECKPOINT_NAME


def read_checkpoint(log_path: Path) -> Checkpoint | None:
    """The checkpoint beside ``log_path`` if it is well-formed and names that log; ``None`` otherwise."""
    try:
        value = loads(checkpoint_path(log_path).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("version") != FORMAT_VERSION or value.get("log") != log_path.name:
        return None
    identity, offset, rows = value.get("identity"), value.get("offset"), value.get("rows")
    if not isinstance(identity, dict) or type(offset) is not int or offset < 1 or not isinstance(rows, dict):
        return None
    return Checkpoint(log_path.name, identity, offset, rows)


def write_checkpoint(log_path: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint beside ``log_path`` atomically (temporary file, fsync, rename).

    The directory is not fsynced: a rename lost in a power cut leaves the previous checkpoint, which only lags.
    """
    target = checkpoint_path(log_path)
    tmp = target.with_name(f"{CHECKPOINT_NAME}.{secrets.token_hex(6)}.tmp")
    data = checkpoint.encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def usable_checkpoint(store: JsonlStore, log_path: Path) -> tuple[Meta, Checkpoint] | None:
    """The log's header and its checkpoint, if the checkpoint belongs to this log and points inside it.

    Row-level checks (version, schema, seq within the log) are the projection registry's; see the module docstring.
    """
    checkpoint = read_checkpoint(log_path)
    if checkpoint is None:
        return None
    try:
        meta = store.read_header(log_path)
        if meta is None or identity_of(meta) != checkpoint.identity:
            return None
        store.check_location(log_path, meta)
        if checkpoint.offset > os.stat(log_path).st_size:
            return None
    except (OSError, SessionLogError):
        return None
    return meta, checkpoint


# -- reading a tail exactly -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tail:
    """The events decoded from a checkpoint's offset to the end of the log (crash tail excluded, as reads do)."""

    base: int
    events: list[dict[str, Any]]


def _first_seq(plaintext: bytes) -> int | None:
    end = plaintext.find(b"\n")
    try:
        first = loads(plaintext[:end if end >= 0 else len(plaintext)])
    except ValueError:
        return None
    if not isinstance(first, dict):
        return None
    seq = first.get("seq0") if first.get("type") in ROW_TYPES else first.get("seq")
    return seq if type(seq) is int and seq >= 0 else None


def read_tail(log_path: Path, compression: Compression, meta: Meta, offset: int) -> Tail | None:
    """Every event from ``offset`` on, read with the exact rules of a full read; ``None`` when anything is off
    (a misplaced offset, a damaged tail, an unknown event type): the caller reads the whole log then, which reports
    exactly what a full read reports."""
    try:
        with open(log_path, "rb") as file:
            if offset < 1 or (compression == "none" and os.pread(file.fileno(), 1, offset - 1) != b"\n"):
                return None
            file.seek(offset)
            data = file.read()
        with paused_gc():
            events = _tail_events(data, compression, meta)
    except (OSError, SessionLogError, FrameError):
        return None
    if events is None or not events:
        return None
    try:
        unknown_type_refusal(str(meta["id"]), events, log_path)
    except SessionLogError:
        return None
    return Tail(events[0]["seq"], events)


def _tail_events(data: bytes, compression: Compression, meta: Meta) -> list[dict[str, Any]] | None:
    return _zstd_tail(data, meta) if compression == "zstd" else _raw_tail(data, meta)


def _raw_tail(data: bytes, meta: Meta) -> list[dict[str, Any]] | None:
    base = _first_seq(data)
    if base is None:
        return None
    scanner = LogScanner.continuing(meta, base)
    scanner.feed(data)
    return scanner.events


def _zstd_tail(data: bytes, meta: Meta) -> list[dict[str, Any]] | None:
    """Like the full zstd read: complete frames must hold complete lines; an incomplete last frame yields what its
    whole blocks decode."""
    scan = scan_frames(data)
    if not scan.frames:
        return None
    plaintexts = [decode_frame(data[start:end]) for start, end in scan.frames]
    base = _first_seq(plaintexts[0])
    if base is None:
        return None
    scanner = LogScanner.continuing(meta, base)
    for plaintext in plaintexts:
        scanner.feed(plaintext)
    if not scanner.clean:
        return None
    if scan.torn_start is not None:
        scanner.feed(decode_prefix(data[scan.torn_start:]))
    return scanner.events


# -- the service --------------------------------------------------------------------------------------------------


class _Pending:
    """Rows snapshotted at a ``turn/end`` (``seq``), waiting for that event to become durable."""

    __slots__ = ("header", "rows", "seq")

    def __init__(self, seq: int, rows: Rows, header: Mapping[str, Any]) -> None:
        self.seq = seq
        self.rows = rows
        self.header = dict(header)


class ProjectionCache:
    """The ``session_projection_cache`` service: writes checkpoints for live sessions, restores cold ones."""

    def __init__(self, sessions: SessionStore, projections: ProjectionRegistry,
                 persistence: JsonlPersistence) -> None:
        self.sessions = sessions
        self.projections = projections
        self.persistence = persistence
        self.store = persistence.store
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._durable: dict[str, Batch] = {}
        self._written: dict[str, int] = {}
        self._checked: dict[str, int] = {}
        self._tainted: set[str] = set()
        self._cut_at: dict[str, float] = {}
        self._closed = False

    # -- cold reads -----------------------------------------------------------------------------------------

    def restore(self, session_id: str) -> Restored:
        """The projections of a stored session, from its checkpoint and the tail after it when one is usable,
        else from the whole log. The events are as stored (no interrupted-turn closers); refusals and corruption
        errors are a full read's."""
        path = self.store.find(session_id)
        if path is not None:
            found = usable_checkpoint(self.store, path)
            if found is not None:
                meta, checkpoint = found
                tail = read_tail(path, self.store.compression, meta, checkpoint.offset)
                if tail is not None:
                    with contextlib.suppress(ValueError):
                        return self.projections.restore(checkpoint.rows, tail.events, tail.base)
        stored = self.store.read(session_id)
        return self.projections.restore({}, stored.events, 0)

    # -- live sessions --------------------------------------------------------------------------------------

    def on_event(self, session: Session, event: Event) -> None:
        """At ``turn/end``: snapshot the rows now, write them once the batch holding this event is durable."""
        if event["type"] != "turn/end" or self._closed:
            return
        seq: int = event["seq"]
        rows = self._rows(session, seq)
        if rows is None:
            return
        with self._lock:
            durable = self._durable.get(session.id)
            if durable is None or durable.last_seq < seq:
                self._pending[session.id] = _Pending(seq, rows, session.header)
                durable = None
        if durable is None:
            # A batch boundary right after the turn/end, written by the writer thread: the checkpoint's record
            # (its line, or its zstd frame) then holds at most this turn, which bounds what a cold reader decodes.
            # At most one per batch window: turns ending faster than that (a replay, a benchmark) batch as usual.
            now = time.monotonic()
            if now - self._cut_at.get(session.id, -math.inf) >= self.persistence.batch_delay:
                self._cut_at[session.id] = now
                self.persistence.flush_soon(session.id, seq)
        elif durable.first_seq <= seq:  # the writer thread made this event durable before we got here
            self._write(session.id, session.header, seq, rows, durable)

    def on_written(self, session_id: str, batch: Batch) -> None:
        """A batch of ``session_id`` is durable: write the pending checkpoint if the batch holds its event."""
        with self._lock:
            self._durable[session_id] = batch
            pending = self._pending.get(session_id)
            if pending is None or pending.seq > batch.last_seq:
                return
            del self._pending[session_id]
        if pending.seq >= batch.first_seq:
            self._write(session_id, pending.header, pending.seq, pending.rows, batch)

    def on_close(self, session: Session) -> None:
        """A session closed (persistence has flushed it): checkpoint its last event, then forget it."""
        try:
            self._final(session)
        finally:
            self._forget(session.id)

    def close(self) -> None:
        """The plugin's dispose: checkpoint every live persisted session at its last event."""
        if self._closed:
            return
        self._closed = True
        for session in self.sessions.list():
            try:
                if not self.persistence.closed:
                    self.persistence.flush(session.id)
                self._final(session)
            except Exception:
                log.warning('could not checkpoint session "%s" on dispose', session.id, exc_info=True)

    # -- internals ------------------------------------------------------------------------------------------

    def _final(self, session: Session) -> None:
        seq = session.seq - 1
        if seq < 0:
            return
        with self._lock:
            durable = self._durable.get(session.id)
            self._pending.pop(session.id, None)
        if durable is None or durable.last_seq != seq:
            return  # not (all) durable: the previous checkpoint stands
        rows = self._rows(session, seq)
        if rows is not None:
            self._write(session.id, session.header, seq, rows, durable)

    def _rows(self, session: Session, seq: int) -> Rows | None:
        """The registry's checkpoint of ``session`` as of ``seq`` (its last event), or ``None`` if none is due."""
        if session.seq - 1 != seq or not self._clean_through(session, seq):
            return None
        rows = self.projections.checkpoint(session)
        if not rows or any(row["seq"] != seq for row in rows.values()):
            return None
        return rows

    def _clean_through(self, session: Session, seq: int) -> bool:
        """No event up to ``seq`` has a type this harness would refuse (checked incrementally)."""
        if session.id in self._tainted:
            return False
        start = self._checked.get(session.id, 0)
        known = KNOWN_SESSION_EVENT_TYPES
        for event in session.events[start:seq + 1]:
            if event["type"] not in known and event.get("ignorable") is not True:
                self._tainted.add(session.id)
                return False
        self._checked[session.id] = seq + 1
        return True

    def _write(self, session_id: str, header: Mapping[str, Any], seq: int, rows: Rows, batch: Batch) -> None:
        """Write ``rows`` (as of ``seq``, which ``batch`` holds) unless a checkpoint as recent is already there."""
        with self._write_lock:
            if self._written.get(session_id, -1) >= seq:
                return
            path = self.store.path_for(session_id, header.get("cwd"))
            checkpoint = Checkpoint(path.name, identity_of(header), batch.record_of(seq), rows)
            try:
                write_checkpoint(path, checkpoint)
            except OSError:
                log.warning('could not write the projection checkpoint of session "%s"', session_id, exc_info=True)
                return
            self._written[session_id] = seq

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._pending.pop(session_id, None)
            self._durable.pop(session_id, None)
        self._written.pop(session_id, None)
        self._checked.pop(session_id, None)
        self._cut_at.pop(session_id, None)
        self._tainted.discard(session_id)


def apply(ctx: Context) -> None:
    persistence = ctx.get("session_persistence")  # seen through this plugin's scope
    if not isinstance(getattr(persistence, "store", None), JsonlStore):
        log.warning("%s needs the JSONL session persistence; another backend is mounted, so it does nothing", name)
        return
    cache = ProjectionCache(ctx.sessions, ctx.session_projections, cast("JsonlPersistence", persistence))
    ctx.sessions.listen(cache.on_event)
    ctx.sessions.on_close(cache.on_close)
    persistence.on_written(cache.on_written)
    ctx.provide("session_projection_cache", cache)
    ctx.on_dispose(cache.close)
