"""The bytes of one session log and their file mechanics: lazy creation, durable appends, crash repair, all under the
writer lock.

A batch's bytes are its canonical lines (a packed chunk row where possible in format v0, runs of ``sourceEventSeqs``
as ranges in v4), or exactly one zstd frame holding them (:func:`encode_batch`); the log's first bytes are its header
line, in its own frame under zstd (:func:`encode_header`). They are the writer's to make: the PostgreSQL export and
the format tests write a log's bytes through the same functions.

A log never exists half-made: the header and first batch go to a temporary file, fsynced, published with ``link()``
(which fails if the log exists; ``rename()`` would replace another writer's log). Every later batch is appended and
fsynced before the call returns; if the write or fsync fails, the file is cut back, so a retry cannot duplicate
seqs. The log stays open while the lock is held (opening it per batch cost more than the write: decision 0016) and
is closed before the lock goes, or after a failed append. Repair truncates a torn tail and appends the recovered
events and synthetic closers as one more batch (one more zstd frame), as DSH does.

The lock binds writers of this harness, not every process: another one can cut the file (``truncate``), replace it
or remove it while the writer holds it open. Appending then would land after bytes the writer never wrote (or in a
file no reader looks at), and the call would be acknowledged and checkpointed as durable. So before each append the
writer checks that the path still names the file it opened and that its size is where its last durable batch ended,
and after the fsync that its batch ended where it should; on a mismatch it raises
:class:`~dsh_todo.harness.errors.SessionLogChangedError` and refuses every later append, touching the file no more.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from dsh_todo.harness.persistence.contract import Batch
from dsh_todo.harness.persistence.errors import (
    SessionLogChangedError,
    log_changed,
    log_exists,
    seq_mismatch,
    writer_closed,
)
from dsh_todo.harness.persistence.header import Meta, header_line
from dsh_todo.harness.persistence.jsonl.chunk_rows import pack_chunk_runs
from dsh_todo.harness.persistence.jsonl.lock import WriterLock
from dsh_todo.harness.persistence.jsonl.paths import Compression
from dsh_todo.harness.persistence.jsonl.regular import open_fd, temporary, write_all
from dsh_todo.harness.persistence.jsonl.zstd import compress_frame
from dsh_todo.harness.persistence.seq_ranges import compact
from dsh_todo.jsonutil import dumps_bytes, dumps_lines


def batch_plaintext(events: Iterable[Mapping[str, Any]], *, pack_chunks: bool = True, ranges: bool = False) -> bytes:
    """The JSONL text of one batch, each record (a packed chunk row where possible, or an event verbatim) on its own
    ``\\n``-terminated line; with ``ranges`` (format v4), runs in ``sourceEventSeqs`` stored as ranges."""
    if ranges:
        events = [_ranged(event) for event in events]
    return dumps_lines(pack_chunk_runs(events) if pack_chunks else list(events))


def _ranged(event: Mapping[str, Any]) -> Mapping[str, Any]:
    seqs = event.get("sourceEventSeqs")
    if seqs is None or len(seqs) < 3:  # nothing to compact (a call's result names one call)
        return event
    return {**event, "sourceEventSeqs": compact(seqs)}


def header_plaintext(meta: Mapping[str, Any]) -> bytes:
    return dumps_bytes(header_line(meta)) + b"\n"


def encode_batch(events: Iterable[Mapping[str, Any]], compression: Compression, *, pack_chunks: bool = True,
                 ranges: bool = False) -> bytes:
    """The bytes appended to a log for one batch: plain lines, or exactly one zstd frame holding them."""
    plaintext = batch_plaintext(events, pack_chunks=pack_chunks, ranges=ranges)
    return compress_frame(plaintext) if compression == "zstd" else plaintext


def encode_header(meta: Mapping[str, Any], compression: Compression) -> bytes:
    """The first bytes of a log: the header line, in its own frame under zstd."""
    header = header_plaintext(meta)
    return compress_frame(header) if compression == "zstd" else header


def fsync_dir(path: Path) -> None:
    """Make a new or removed directory entry in ``path`` survive a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> None:
    """``mkdir -p`` with mode 0700, fsyncing the parent of every directory it creates."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
        fsync_dir(directory.parent)


class JsonlWriter:
    """Appends to one session's log while holding its writer lock. ``cursor`` is the next seq the log expects;
    ``last_batch`` says where the most recent durable batch landed (``None`` until one is known)."""

    _fd: int | None = None
    """The log, open for appending since the first append (``None``: not open; :meth:`close` closes it)."""

    _size: int | None = None
    """The log's size as this writer left it durable (``None``: not known yet; taken when the log is opened)."""

    _file: tuple[int, int] | None = None
    """The device and inode of the log this writer writes (``None``: not known yet; taken when it is opened)."""

    _changed: str | None = None
    """Why the log takes no more appends: another process changed it (:meth:`_refuse`)."""

    def __init__(self, *, meta: Meta, path: Path, lock: WriterLock, compression: Compression, pack_chunks: bool,
                 cursor: int, materialized: bool) -> None:
        self.meta = meta
        self.session_id: str = meta["id"]
        self.path = path
        self.compression: Compression = compression
        self.pack_chunks = pack_chunks and meta.get("version") == 0
        """Packed chunk rows are format v0's alone."""
        self.compact_ranges = meta.get("version") != 0
        """Format v4 stores runs of ``sourceEventSeqs`` as ranges (:mod:`..seq_ranges`)."""
        self.cursor = cursor
        self.materialized = materialized
        self.last_batch: Batch | None = None
        self._lock = lock

    @property
    def open(self) -> bool:
        return self._lock.held

    def append(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Make ``events`` durable as one batch; they must continue the log's seq exactly."""
        if not events:
            return
        if not self._lock.held:
            raise writer_closed(self.session_id)
        if self._changed is not None:
            raise SessionLogChangedError(self._changed)
        seqs = [event.get("seq") for event in events]
        expected = list(range(self.cursor, self.cursor + len(seqs)))
        if seqs != expected:  # (one comparison in C; the loop below only finds what to say)
            index = next(i for i, (seq, want) in enumerate(zip(seqs, expected, strict=True)) if seq != want)
            raise seq_mismatch(self.session_id, expected[index], seqs[index], index)
        data = encode_batch(events, self.compression, pack_chunks=self.pack_chunks,
                                ranges=self.compact_ranges)
        if self.materialized:
            start = self._append_bytes(data)
        else:
            header = encode_header(self.meta, self.compression)
            self._materialize(header + data)
            self.materialized = True
            start = len(header)
        self._landed(start, data, len(events))

    def found(self, last_record: int | None) -> None:
        """The log already holds ``cursor`` durable events, the last in the record starting at ``last_record``
        (as a read found it): remember that as ``last_batch``, with only the last event addressable."""
        stat = os.stat(self.path)
        self._size, self._file = stat.st_size, (stat.st_dev, stat.st_ino)
        if last_record is not None and self.cursor > 0:
            last = self.cursor - 1
            self.last_batch = Batch(last, last, last_record, stat.st_size, last_record)

    def _landed(self, start: int, data: bytes, count: int) -> None:
        end = start + len(data)
        # The last line of a raw batch is the record holding its last event (plain, or the packed row it ends).
        last_record = start if self.compression == "zstd" else data.rfind(b"\n", 0, len(data) - 1) + 1 + start
        self.last_batch = Batch(self.cursor, self.cursor + count - 1, start, end, last_record)
        self.cursor += count
        self._size = end

    def repair(self, truncate_to: int | None, events: Sequence[Mapping[str, Any]]) -> None:
        """Commit a crash repair: cut the torn tail (if any), then append ``events`` as one batch."""
        if truncate_to is not None:
            fd = open_fd(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, truncate_to)
                os.fsync(fd)
                stat = os.fstat(fd)
                self._size, self._file = truncate_to, (stat.st_dev, stat.st_ino)
            finally:
                os.close(fd)
        if events:
            data = encode_batch(events, self.compression, pack_chunks=self.pack_chunks,
                                ranges=self.compact_ranges)
            self._landed(self._append_bytes(data), data, len(events))

    def close(self) -> None:
        """Close the log and release the lock. A session that never wrote leaves no session directory behind."""
        try:
            self._close_log()
        finally:
            if self._lock.held:
                self._lock.release()
                if not self.materialized:
                    with contextlib.suppress(OSError):
                        self.path.parent.rmdir()

    def _append_bytes(self, data: bytes) -> int:
        """Append and fsync ``data``; returns the offset it starts at. On failure the log is cut back and closed;
        a log another process changed (:meth:`_intact`) is closed and not touched."""
        try:
            fd = self._fd
            if fd is None:
                fd = self._fd = open_fd(self.path, os.O_WRONLY | os.O_APPEND)
            before = self._intact(fd)
            try:
                write_all(fd, data)
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, before)
                os.fsync(fd)
                raise
            after = os.fstat(fd).st_size
            if after != before + len(data):  # cut or grown by someone else while we wrote: where did ours land?
                self._refuse(f"size {after}, expected {before + len(data)}")
        except BaseException:
            self._close_log()
            raise
        return before

    def _intact(self, fd: int) -> int:
        """The size of the log open as ``fd``, once it is known to be the file this writer wrote, as it left it: the
        path still names it, and it ends where the last durable batch did. Else :meth:`_refuse`."""
        stat = os.fstat(fd)
        file = (stat.st_dev, stat.st_ino)
        if self._file is None:
            self._file = file
        if self._size is None:
            self._size = stat.st_size
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            self._refuse("it was removed")
        if file != self._file or (named.st_dev, named.st_ino) != file:
            self._refuse("it is another file now")
        if stat.st_size != self._size:
            self._refuse(f"size {stat.st_size}, expected {self._size}")
        return stat.st_size

    def _refuse(self, what: str) -> NoReturn:
        """The log is not what this writer made durable: refuse this append and every later one."""
        error = log_changed(self.session_id, self.path, what)
        self._changed = str(error)
        raise error

    def _close_log(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _materialize(self, content: bytes) -> None:
        if self.path.exists():
            raise log_exists(self.session_id, "on disk")
        with temporary(self.path, content) as tmp:
            stat = os.stat(tmp)
            self._size, self._file = len(content), (stat.st_dev, stat.st_ino)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                raise log_exists(self.session_id, "on disk") from None
            fsync_dir(self.path.parent)
