"""The JSONL session backend: :class:`~.reader.JsonlReader` and the writing half, under one root.

:meth:`JsonlBackend.load` and :meth:`JsonlBackend.resume` commit crash recovery under the writer lock (cut the torn
tail, rewrite what an incomplete frame yielded, append an interrupted turn's closers); a second load changes nothing.
Writers (:mod:`.writer`) hold the session's lock (:mod:`.lock`); checkpoints are written beside the log
(:mod:`.checkpoint`); :meth:`JsonlBackend.follow` reads on from where the last read stopped (:mod:`.follow`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from dsh_todo.harness.persistence.contract import (
    Batch,
    Callback,
    Checkpointed,
    LoadedLog,
    Record,
    Rows,
    StoredLog,
    Subscription,
    same_start,
)
from dsh_todo.harness.persistence.errors import RootEncodingError, log_changed, log_exists, refuse_unknown_types
from dsh_todo.harness.persistence.header import SESSION_FORMAT_VERSION, check_meta, log_identity
from dsh_todo.harness.persistence.jsonl.checkpoint import (
    Checkpoint,
    running_digest,
    usable_checkpoint,
    write_checkpoint,
)
from dsh_todo.harness.persistence.jsonl.follow import FileFollow
from dsh_todo.harness.persistence.jsonl.lock import WriterLock
from dsh_todo.harness.persistence.jsonl.paths import (
    LOCK_NAME,
    LOG_NAMES,
    Compression,
    compression_of,
    log_file_name,
    log_path,
)
from dsh_todo.harness.persistence.jsonl.reader import JsonlReader
from dsh_todo.harness.persistence.jsonl.reading import scan_tail
from dsh_todo.harness.persistence.jsonl.writer import JsonlWriter, make_dirs
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.harness.persistence.upgrade import UpgradeError, upgrade_to_v4

log = logging.getLogger(__name__)


class JsonlBackend(JsonlReader):
    """Session logs under ``root``, read (:class:`~.reader.JsonlReader`), recovered and written like DSH does it."""

    _root_encoding: tuple[Compression, Path] | None = None

    carry_forward = True
    """Whether resuming a format-v0 log writes its v4 generation (DSH 0.2's behaviour) rather than appending to the
    v0 file (DSH 0.1's, and ours where DSH 0.2 would refuse the migration): the tests of DSH 0.1's byte-exact
    recovery turn it off."""

    follow_interval = 0.1
    """Seconds between two looks at a followed log (:meth:`follow`)."""

    def load(self, session_id: str) -> LoadedLog:
        """Read the log and commit crash recovery under the writer lock (released again before returning)."""
        loaded, writer = self.resume(session_id)
        writer.close()
        return loaded

    def resume(self, session_id: str) -> tuple[LoadedLog, JsonlWriter]:
        """Like :meth:`load`, but keep the writer lock: returns a writer positioned after the recovered log."""

        def closers(path: Path, stored: StoredLog) -> list[Record]:
            clear_leftovers(path.parent)
            refuse_unknown_types(session_id, stored.events, path)
            return interrupted_turn_closers(stored.events, stored.meta)

        stored, added, writer = self._reopen(session_id, closers, carry_forward=self.carry_forward)
        torn = stored.torn
        loaded = LoadedLog(str(stored.path), stored.meta, [*stored.events, *added], len(stored.events), added,
                           rewrote=torn is not None or bool(added),
                           truncated_to=torn.truncate_to if torn is not None else None, path=stored.path)
        return loaded, writer

    def _reopen(self, session_id: str, closers: Callable[[Path, StoredLog], list[Record]], *,
                carry_forward: bool = False) -> tuple[StoredLog, list[Record], JsonlWriter]:
        """Read the stored log under its writer lock, refused or given its ``closers`` (which may refuse it), and
        commit the recovery: cut the torn tail, then append what a cut frame yielded and the closers. With
        ``carry_forward``, a format v0 log is first carried forward to v4 (:meth:`_carry_forward`)."""
        path = self._require(session_id)
        lock = WriterLock.acquire(path.parent / LOCK_NAME, session_id)
        try:
            stored = self.read_path(path, session_id)
            if carry_forward and stored.meta.get("version") == 0:
                forward = self._carry_forward(path, stored, lock)
                if forward is not None:
                    added = closers(forward.path, forward.stored)
                    forward.writer.append(added)
                    return forward.stored, added, forward.writer
            added = closers(path, stored)
            torn = stored.torn
            recovered = torn.recovered if torn is not None else []
            # Events recovered from a cut zstd frame are in the prefix but not on disk once the frame is cut.
            writer = JsonlWriter(meta=stored.meta, path=path, lock=lock, compression=compression_of(path),
                                 pack_chunks=self.pack_chunks, cursor=len(stored.events) - len(recovered),
                                 materialized=True)
            if torn is not None or added:
                writer.repair(torn.truncate_to if torn is not None else None, [*recovered, *added])
            else:
                writer.found(stored.last_record)
        except BaseException:
            lock.release()
            raise
        return stored, added, writer

    def _carry_forward(self, path: Path, stored: StoredLog, lock: WriterLock) -> _Forward | None:
        """Write the v4 generation of the v0 log at ``path`` beside it, as DSH 0.2 does when it opens a v0 log to
        write (:func:`~..upgrade.upgrade_to_v4`, the same events renumbered and reshaped), and return a writer
        continuing it; the v0 file stays as it was, history. ``None`` when DSH would refuse to carry this log
        forward (then it goes on in v0, which DSH 0.1 reads, and a warning says why)."""
        try:
            header, events = upgrade_to_v4(stored.meta, stored.events)
        except UpgradeError as exc:
            log.warning("session %s stays in log format v0: it cannot be carried forward to v4 (%s)",
                        stored.session_id, exc)
            return None
        if not events:
            return None  # a header alone: nothing to carry; the session goes on in v0
        meta = {key: value for key, value in header.items() if key != "type"}
        target = path.with_name(log_file_name(compression_of(path), SESSION_FORMAT_VERSION))
        writer = JsonlWriter(meta=meta, path=target, lock=lock, compression=compression_of(path), pack_chunks=False,
                             cursor=0, materialized=False)
        writer.append(events)
        return _Forward(target, StoredLog(str(target), meta, events, path=target), writer)

    def create(self, meta: Mapping[str, Any]) -> JsonlWriter:
        """A writer for a new session (``meta`` holds ``id``, ``createdAt`` and optional header fields). The log
        appears only with the first batch; the lock is taken now, so a second writer of the id fails here, not on a
        background flush."""
        check_meta(meta)
        session_id: str = meta["id"]
        cwd = meta.get("cwd")
        if self.find(session_id) is not None:
            raise log_exists(session_id, "on disk")
        version = meta.get("version", SESSION_FORMAT_VERSION)  # a v0 session (asked for) keeps v0's file name
        path = log_path(self.root, cwd, session_id, self.root_encoding(), version)
        while True:
            make_dirs(path.parent)
            try:
                lock = WriterLock.acquire(path.parent / LOCK_NAME, session_id)
                break
            except FileNotFoundError:
                continue  # a writer that never wrote just removed the empty directory; make it again
        try:
            if path.exists():
                raise log_exists(session_id, "on disk")
            # A session is its id under the root, whatever the working directory: a writer of the same id in another
            # project directory (its log not written yet) holds that directory's lock. Checked after taking ours, so
            # of two racing creators at least one sees the other.
            for project in self._project_dirs():
                other = project / path.parent.name
                try:
                    if other != path.parent and (other / LOCK_NAME).exists():
                        WriterLock.probe(other / LOCK_NAME, session_id)
                except PermissionError:
                    continue  # a folder we may not search: no writer of ours can be in it
            clear_leftovers(path.parent)
        except BaseException:
            lock.release()
            raise
        return JsonlWriter(meta={"version": SESSION_FORMAT_VERSION, **meta}, path=path, lock=lock,
                           compression=compression_of(path), pack_chunks=self.pack_chunks, cursor=0, materialized=False)

    def root_encoding(self) -> Compression:
        """The encoding of new logs under this root: the one its logs already have, which ``compression`` must
        match if it was asked for (DSH refuses to work in a root holding logs of the other encoding); else
        ``compression``. Found once a log exists, and kept: a root does not change its encoding."""
        if self._root_encoding is None:
            found = next((path for _, path, problem in self._listing()
                          if problem is None and path.name in LOG_NAMES), None)
            if found is None:
                return self.compression
            self._root_encoding = LOG_NAMES[found.name], found
        encoding, example = self._root_encoding
        if self.compression_chosen and encoding != self.compression:
            raise RootEncodingError(
                f'the session root {self.root} keeps its logs in compression "{encoding}" ({example.name} in '
                f'{example.parent}), not "{self.compression}": DeepSeek Harness keeps one encoding per root, so use '
                f'compression "{encoding}" there or another root')
        return encoding

    def continue_live(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> JsonlWriter:
        """A writer for a live session whose log already exists (persistence remounted while it stayed open). The
        stored events must be exactly the session's first ones, or the log is another session's of the same id and
        is refused. A torn tail is cut, but no closers are added: the turn still runs in memory. The writer's
        ``cursor`` says which live events still need writing."""
        return self._reopen(session_id, lambda _, stored: same_start(session_id, stored.events, events, "on disk"))[2]

    def write_checkpoint(self, session_id: str, header: Mapping[str, Any], rows: Rows, seq: int,
                         batch: Batch) -> None:
        """Replace ``projections.json`` beside the log with ``rows`` and the offset of the record holding ``seq``,
        unless the log no longer holds all of ``batch`` (another process cut it since: the writer refuses it too)."""
        path = self.find(session_id)
        if path is None:
            return
        size = os.stat(path).st_size
        if size < batch.end:
            raise log_changed(session_id, path, f"size {size}, expected at least {batch.end}")
        checkpoint = Checkpoint(path.name, log_identity(header), batch.record_of(seq), rows)
        proof = running_digest(path, checkpoint.offset, checkpoint.sealed())
        write_checkpoint(path, checkpoint._replace(proof=proof))

    def read_checkpointed(self, session_id: str) -> Checkpointed | None:
        """The checkpoint beside the log, if it belongs to it, with the exactly read tail after its offset."""
        path = self.find(session_id)
        if path is None:
            return None
        found = usable_checkpoint(self, path)
        if found is None:
            return None
        meta, checkpoint = found
        tail = scan_tail(path, meta, checkpoint.offset, keep=True)
        if tail is None or not tail.events:
            return None
        return Checkpointed(checkpoint.rows, tail.events, tail.events[0]["seq"])

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        """``callback(events)`` with the events after ``after_seq``: what the log holds now (read on this thread,
        raising the reader's verdict), then whatever any process appends (:class:`~.follow.FileFollow`, a ``stat``
        every ``follow_interval`` seconds). Close the returned subscription to stop."""
        return FileFollow(self, session_id, after_seq, callback, interval=self.follow_interval).start()


class _Forward(NamedTuple):
    """A v0 log carried forward: the v4 generation's path, its log as stored, and the writer continuing it."""

    path: Path
    stored: StoredLog
    writer: JsonlWriter


def clear_leftovers(directory: Path) -> None:
    """Remove the temporary files a killed writer left in a session directory. Called under the writer lock, under
    which alone such files are written: any found belongs to a writer that is gone."""
    for pattern in ("session*.jsonl*.tmp", "projections.json.*.tmp"):
        for leftover in directory.glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
