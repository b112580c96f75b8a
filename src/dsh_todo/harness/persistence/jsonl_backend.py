"""The JSONL session backend: DSH's on-disk layout under one root, read, recovered and written like DSH does it.

Reading has three levels, mirroring DSH's backend and coordinator:

- :meth:`JsonlBackend.read_stored` is the raw backend read: the header, the contiguous good prefix of events and the
  torn-tail marker (where to cut, and which events an incomplete zstd frame still yielded). It refuses corruption.
- :meth:`JsonlBackend.read` is the non-mutating read a viewer wants: the same events, refused if they contain an
  event type this harness does not know and that is not marked ``ignorable``. It never repairs.
- :meth:`JsonlBackend.load` and :meth:`JsonlBackend.resume` commit crash recovery under the writer lock: cut the torn
  tail, rewrite what an incomplete frame yielded, append the closers of an interrupted turn. A second load finds
  nothing to do and leaves the bytes alone.

Each log is read in its own encoding (``session.jsonl`` or ``session.jsonl.zstd``, by its file name), so raw and zstd
logs mix freely under one root; ``compression`` is only the encoding of new logs. A session directory holding both
files, or a log in DSH's retired flat layout, is refused rather than guessed at, so two writers never split one
session.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_todo.harness.persistence.checkpoint_file import read_tail, usable_checkpoint
from dsh_todo.harness.persistence.errors import (
    CorruptSessionLogError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionIdError,
    SessionNotFoundError,
    refuse_unknown_types,
)
from dsh_todo.harness.persistence.header import Meta, check_meta, decode_header
from dsh_todo.harness.persistence.limits import max_line
from dsh_todo.harness.persistence.paths import (
    LOCK_NAME,
    NAME_MAX,
    Compression,
    compression_of,
    decode_segment,
    log_file_name,
    log_path,
    session_dir,
    session_segment,
)
from dsh_todo.harness.persistence.reading import Observer, Scanned, header_frame, scan_log, scan_tail
from dsh_todo.harness.persistence.regular import NotRegularFileError, open_binary, read_bytes
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.harness.persistence.zstd import FrameError, frame_pieces, scan_frames
from dsh_todo.jscompat import js_string
from dsh_todo.jsonutil import loads

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.contract import (
        Batch,
        Callback,
        Checkpointed,
        LoadedLog,
        Rows,
        StoredLog,
        StoredSession,
        Subscription,
    )
    from dsh_todo.harness.persistence.logfile import JsonlWriter

# The writer side (the lock, appends, checkpoint writing) is imported by the methods that write: a reader of logs
# (``dsh-todo plan``) never loads it.


class JsonlBackend:
    """Session logs under ``root``, each read in its own encoding; new ones in ``compression`` (``"zstd"``, DSH's
    default, or ``"none"``).

    ``pack_chunks`` writes delta runs as packed chunk rows (DSH's default); reading always expands them.
    """

    follow_interval = 0.1
    """Seconds between two looks at a followed log (:meth:`follow`)."""

    def __init__(self, root: str | os.PathLike[str], compression: Compression = "zstd", *,
                 pack_chunks: bool = True) -> None:
        if compression not in ("zstd", "none"):
            raise ValueError(f'compression must be "zstd" or "none", not {compression!r}')
        # Absolute once, so a later chdir cannot split one backend across two roots.
        self.root = Path(os.path.abspath(root))
        self.location = str(self.root)
        self.compression: Compression = compression
        self.pack_chunks = pack_chunks
        self._root_checked = False
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"session root {self.root} is not a directory")

    def __repr__(self) -> str:
        return f"JsonlBackend({str(self.root)!r}, {self.compression!r})"

    @property
    def file_name(self) -> str:
        return log_file_name(self.compression)

    # -- locating -------------------------------------------------------------------------------------------

    def path_for(self, session_id: str, cwd: str | None) -> Path:
        """Where the log of ``session_id`` (created in ``cwd``) lives; touches nothing."""
        return log_path(self.root, cwd, session_id, self.compression)

    def find(self, session_id: str) -> Path | None:
        """The log of ``session_id`` (either encoding) in whichever project directory holds it, or ``None`` (also
        for an id no session directory can have)."""
        try:
            encoded = session_segment(session_id)
        except SessionIdError:
            return None
        matches: builtins.list[Path] = []
        for project in self._project_dirs():
            try:
                for suffix in (".jsonl.zstd", ".jsonl"):
                    flat = project / (encoded + suffix)
                    if len(flat.name.encode()) <= NAME_MAX and flat.exists():  # a longer name cannot exist
                        raise self.flat_layout(flat)
            except PermissionError:
                continue  # a project folder we may not search (another user's, in a shared root) holds none of ours
            path = self.log_in(project / encoded)  # this id's own folder unreadable: that is this session's refusal
            if path is not None:
                matches.append(path)
        if len(matches) > 1:
            raise _duplicate(session_id)
        return matches[0] if matches else None

    def locate(self, session_id: str) -> str | None:
        path = self.find(session_id)
        return None if path is None else str(path)

    def stored_sessions(self) -> list[StoredSession]:
        """Every stored session, from headers only. A session that cannot be stored as it is (a log in the flat
        layout, a directory holding both encodings, one id in two project directories) or whose folder cannot be
        read (a symbolic link loop, a folder of mode 000) is listed with its ``problem``: it never hides the others.
        What is not ours to judge is left out: a project folder that cannot be listed (no session in it can be
        named; in a root two users share, folders are created 0700, so it is the other user's) and an unreadable
        session folder another user owns. Whether a listed log reads cleanly is for a read to say."""
        from dataclasses import replace

        from dsh_todo.harness.persistence.contract import StoredSession

        found: list[StoredSession] = []
        for project in self._project_dirs():
            try:
                entries = sorted(os.scandir(project), key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                path = Path(entry.path)
                try:
                    flat = entry.is_file() and entry.name.endswith((".jsonl", ".jsonl.zstd"))
                    log = None if flat or not entry.is_dir() else self.log_in(path)
                except CorruptSessionLogError as problem:
                    found.append(StoredSession(decode_segment(entry.name), None, None, str(path), path, problem))
                    continue
                except OSError as exc:
                    if _owned(entry):
                        unreadable = OSError(exc.errno, exc.strerror, str(path))
                        found.append(StoredSession(decode_segment(entry.name), None, None, str(path), path,
                                                   unreadable))
                    continue
                if flat:
                    name = entry.name.removesuffix(".zstd").removesuffix(".jsonl")
                    found.append(StoredSession(decode_segment(name), None, None, str(path), path,
                                               self.flat_layout(path)))
                elif log is not None:
                    try:
                        meta = self._read_header_only(log)
                    except NotRegularFileError as problem:  # a FIFO or a device where the log belongs
                        found.append(StoredSession(decode_segment(entry.name), None, None, str(log), log, problem))
                        continue
                    except (CorruptSessionLogError, OSError):
                        meta = None  # a header that cannot be read: the read of the whole log says why
                    cwd = meta.get("cwd") if meta is not None else None
                    found.append(StoredSession(decode_segment(entry.name), cwd if isinstance(cwd, str) else None,
                                               meta, str(log), log))
        counts: dict[str, int] = {}
        for item in found:
            counts[item.id] = counts.get(item.id, 0) + 1
        return [replace(item, problem=_duplicate(item.id))
                if counts[item.id] > 1 and item.problem is None else item for item in found]

    def writer_alive(self, session_id: str) -> bool:
        """Whether a live process holds the session's writer lock now (its lock file names a running pid)."""
        path = self.find(session_id)
        return path is not None and writer_alive(path.parent / LOCK_NAME)

    def scan(self, path: Path, *, keep: bool = True, observe: Observer | None = None,
             plan_only: bool = False, unique: bool = False, expand: bool = False) -> Scanned:
        """One exact pass over the log at ``path`` (see :func:`~.reading.scan_log`), refused like :meth:`read`:
        not where its header says, or its id stored twice under this root; both are checked on the header alone,
        before the rest is read (a misplaced copy of a million events is refused at once).

        ``unique`` says the caller has just counted every id under the root (a listing does) and found this one
        once, so it is not looked for again in every project directory: a listing costs one pass over the root,
        not one per session."""
        meta = self._placed(path, None)
        if meta is not None and not unique:
            self.find(str(meta["id"]))  # refuses an id stored in two project directories
        found = scan_log(path, keep=keep, observe=observe, plan_only=plan_only, expand=expand)
        self._check_identity(path, found.meta, None)
        if not unique:
            self.find(str(found.meta["id"]))
        return found

    def scan_checkpointed(self, path: Path, start: Callable[[Rows, int], Observer | None], *,
                          unique: bool = False) -> Scanned | None:
        """The checkpoint beside the log at ``path`` and the tail after it read exactly (events not kept), when the
        checkpoint proves the bytes before its offset unchanged (:mod:`.prefix`); ``None`` whenever anything is off
        (no digest, another digest, a tail a full pass must judge): then :meth:`scan` the whole log. Refused like
        :meth:`scan` when the log is not where its header says, or its id is stored twice (``unique``: as there).

        ``start(rows, offset)`` is called with the checkpoint's rows and offset before the tail is read and returns
        the observer of the tail's events (``None``: the rows are of no use, give up)."""
        meta = self._placed(path, None)
        if meta is None:
            return None
        if not unique:
            self.find(str(meta["id"]))
        found = usable_checkpoint(self, path)
        if found is None or found[1].proof is None:
            return None
        from dsh_todo.harness.persistence.prefix import prefix_digest  # hashlib: only for a log with a checkpoint

        meta, checkpoint = found
        try:
            if prefix_digest(path, checkpoint.offset, checkpoint.sealed()) != checkpoint.proof:
                return None
        except OSError:
            return None
        observe = start(checkpoint.rows, checkpoint.offset)
        if observe is None:
            return None
        return scan_tail(path, meta, checkpoint.offset, observe)

    def _placed(self, path: Path, expected_id: str | None) -> Meta | None:
        """The header of the log at ``path``, checked to be where it says it belongs (``None`` when the header
        cannot be read on its own: the full read then says why)."""
        try:
            meta = self._read_header_only(path)
        except CorruptSessionLogError:
            return None
        if meta is not None:
            self._check_identity(path, meta, expected_id)
        return meta

    # -- reading --------------------------------------------------------------------------------------------

    def read_stored(self, session_id: str) -> StoredLog:
        """The raw backend read: header, good prefix and torn-tail marker. Refuses corruption, repairs nothing."""
        return self.read_path(self._require(session_id), session_id)

    def read(self, session_id: str) -> StoredLog:
        """The non-mutating read: like :meth:`read_stored`, and refuses unknown non-ignorable event types."""
        stored = self.read_stored(session_id)
        refuse_unknown_types(session_id, stored.events, stored.path or stored.location)
        return stored

    def read_path(self, path: Path, session_id: str | None = None) -> StoredLog:
        """Read the log at ``path`` (checked to be where its own header says it belongs under this root). Unknown
        event types are not refused here (that is :meth:`read`'s level)."""
        from dsh_todo.harness.persistence.contract import StoredLog

        self._placed(path, session_id)
        found = scan_log(path, keep=True, refuse_unknown=False)
        self._check_identity(path, found.meta, session_id)
        assert found.events is not None
        return StoredLog(str(path), found.meta, found.events, found.torn, path, found.last_record)

    def read_header(self, path: Path) -> Meta | None:
        """The header of the log at ``path`` alone (its first line or first frame); ``None`` when unreadable."""
        return self._read_header_only(path)

    def check_location(self, path: Path, meta: Meta) -> None:
        """Refuse a log that is not where its own header says it belongs under this root (as reads do)."""
        self._check_identity(path, meta, None)

    # -- recovering and writing -----------------------------------------------------------------------------

    def load(self, session_id: str) -> LoadedLog:
        """Read the log and commit crash recovery under the writer lock (released again before returning)."""
        loaded, writer = self.resume(session_id)
        writer.close()
        return loaded

    def resume(self, session_id: str) -> tuple[LoadedLog, JsonlWriter]:
        """Like :meth:`load`, but keep the writer lock: returns a writer positioned after the recovered log."""
        from dsh_todo.harness.persistence.contract import LoadedLog
        from dsh_todo.harness.persistence.lock import WriterLock
        from dsh_todo.harness.persistence.logfile import JsonlWriter

        path = self._require(session_id)
        lock = WriterLock.acquire(path.parent / LOCK_NAME, session_id)
        try:
            clear_leftovers(path.parent)
            stored = self.read_path(path, session_id)
            refuse_unknown_types(session_id, stored.events, path)
            closers = interrupted_turn_closers(stored.events)
            torn = stored.torn
            recovered = torn.recovered if torn is not None else []
            # Events recovered from a cut zstd frame are in the prefix but not on disk once the frame is cut.
            writer = JsonlWriter(meta=stored.meta, path=path, lock=lock, compression=compression_of(path),
                               pack_chunks=self.pack_chunks, cursor=len(stored.events) - len(recovered),
                               materialized=True)
            if torn is not None or closers:
                writer.repair(torn.truncate_to if torn is not None else None, [*recovered, *closers])
            else:
                writer.found(stored.last_record)
        except BaseException:
            lock.release()
            raise
        loaded = LoadedLog(str(path), stored.meta, [*stored.events, *closers], len(stored.events), closers,
                           rewrote=torn is not None or bool(closers),
                           truncated_to=torn.truncate_to if torn is not None else None, path=path)
        return loaded, writer

    def create(self, meta: Mapping[str, Any]) -> JsonlWriter:
        """A writer for a new session (``meta`` holds ``id``, ``createdAt`` and optional header fields).

        The log file appears only with the first appended batch; the writer lock is taken now, so a second writer
        of the same id fails here rather than on a background flush.
        """
        from dsh_todo.harness.persistence.lock import WriterLock
        from dsh_todo.harness.persistence.logfile import JsonlWriter, make_dirs

        check_meta(meta)
        session_id: str = meta["id"]
        cwd = meta.get("cwd")
        if self.find(session_id) is not None:
            raise SessionExistsError(
                f'session "{session_id}" already has a log on disk; load it to go on with it, or pick another id')
        path = self.path_for(session_id, cwd)
        while True:
            make_dirs(path.parent)
            try:
                lock = WriterLock.acquire(path.parent / LOCK_NAME, session_id)
                break
            except FileNotFoundError:
                continue  # a writer that never wrote just removed the empty directory; make it again
        try:
            if path.exists():
                raise SessionExistsError(f'session "{session_id}" already has a log on disk; '
                                         "load it to go on with it, or pick another id")
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
        return JsonlWriter(meta={"version": 0, **meta}, path=path, lock=lock, compression=self.compression,
                         pack_chunks=self.pack_chunks, cursor=0, materialized=False)

    def continue_live(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> JsonlWriter:
        """A writer for a live session whose log already exists (persistence remounted while it stayed open).

        The stored events must be exactly the session's first events, or the log belongs to another session of the
        same id and is refused. A torn tail is cut (and what a cut frame yielded rewritten), but no closers are
        added: the turn is not interrupted, it is still running in memory. The writer's ``cursor`` says which live
        events still need writing.
        """
        from dsh_todo.harness.persistence.lock import WriterLock
        from dsh_todo.harness.persistence.logfile import JsonlWriter
        from dsh_todo.jsonutil import dumps_bytes

        path = self._require(session_id)
        lock = WriterLock.acquire(path.parent / LOCK_NAME, session_id)
        try:
            stored = self.read_path(path, session_id)
            count = len(stored.events)
            if count > len(events) or any(dumps_bytes(a) != dumps_bytes(b)
                                          for a, b in zip(stored.events, events, strict=False)):
                raise SessionExistsError(f'session "{session_id}" already has a log on disk; '
                                         "load it to go on with it, or pick another id")
            torn = stored.torn
            recovered = torn.recovered if torn is not None else []
            writer = JsonlWriter(meta=stored.meta, path=path, lock=lock, compression=compression_of(path),
                               pack_chunks=self.pack_chunks, cursor=count - len(recovered), materialized=True)
            if torn is not None:
                writer.repair(torn.truncate_to, recovered)
            else:
                writer.found(stored.last_record)
        except BaseException:
            lock.release()
            raise
        return writer

    # -- checkpoints, following, closing --------------------------------------------------------------------

    def write_checkpoint(self, session_id: str, header: Mapping[str, Any], rows: Rows, seq: int,
                         batch: Batch) -> None:
        """Replace ``projections.json`` beside the log with ``rows`` and the offset of the record holding ``seq``."""
        from dsh_todo.harness.persistence.checkpoint_file import Checkpoint, identity_of, write_checkpoint
        from dsh_todo.harness.persistence.prefix import running_digest

        path = self.find(session_id)
        if path is None:
            return
        checkpoint = Checkpoint(path.name, identity_of(header), batch.record_of(seq), rows)
        proof = running_digest(path, checkpoint.offset, checkpoint.sealed())
        write_checkpoint(path, checkpoint._replace(proof=proof))

    def read_checkpointed(self, session_id: str) -> Checkpointed | None:
        """The checkpoint beside the log, if it belongs to it, with the exactly read tail after its offset."""
        from dsh_todo.harness.persistence.contract import Checkpointed

        path = self.find(session_id)
        if path is None:
            return None
        found = usable_checkpoint(self, path)
        if found is None:
            return None
        meta, checkpoint = found
        seqs = [row["seq"] for row in checkpoint.rows.values() if isinstance(row, dict) and type(row.get("seq")) is int]
        tail = read_tail(path, compression_of(path), meta, checkpoint.offset, min(seqs, default=None))
        return None if tail is None else Checkpointed(checkpoint.rows, tail.events, tail.base)

    def follow(self, session_id: str, after_seq: int, callback: Callback) -> Subscription:
        """``callback(events)`` with the events after ``after_seq``: what the log holds now (read on this thread,
        raising the reader's verdict), then whatever any process appends, read from where the last read stopped
        (:class:`~dsh_todo.harness.persistence.tail.FileFollow`, a ``stat`` every ``follow_interval`` seconds on a
        background thread). Close the returned subscription to stop."""
        from dsh_todo.harness.persistence.tail import FileFollow

        return FileFollow(self, session_id, after_seq, callback, interval=self.follow_interval).start()

    def close(self) -> None:
        """Nothing to let go of: every writer holds its own file and lock."""

    # -- helpers --------------------------------------------------------------------------------------------

    def _require(self, session_id: str) -> Path:
        path = self.find(session_id)
        if path is None:
            raise SessionNotFoundError(f'session "{session_id}" has no stored log under {self.root}')
        return path

    def _project_dirs(self) -> Iterator[Path]:
        try:
            entries = sorted(os.scandir(self.root), key=lambda entry: entry.name)
        except FileNotFoundError:
            return
        for entry in entries:
            try:
                folder = entry.is_dir()
            except OSError:  # not a folder we can enter (a symbolic link loop): no sessions in it
                continue
            if folder:
                yield Path(entry.path)

    def _session_dirs(self, project: Path) -> builtins.list[Path]:
        dirs: builtins.list[Path] = []
        for entry in sorted(os.scandir(project), key=lambda entry: entry.name):
            if entry.is_file() and (entry.name.endswith(".jsonl") or entry.name.endswith(".jsonl.zstd")):
                raise self.flat_layout(Path(entry.path))
            if entry.is_dir():
                dirs.append(Path(entry.path))
        return dirs

    def _check_identity(self, path: Path, meta: Meta, expected_id: str | None) -> None:
        if expected_id is not None and meta["id"] != expected_id:
            raise CorruptSessionLogError(
                f'corrupt session log "{path}": requested id "{expected_id}" does not match header id "{meta["id"]}"')
        try:
            expected = session_dir(self.root, meta.get("cwd"), meta["id"]) / path.name
        except ValueError as exc:
            raise CorruptSessionLogError(
                f'corrupt session log "{path}": header id cannot name a storage path') from exc
        if path != expected and not _same_file(path, expected):
            cwd = meta.get("cwd")
            where = f"cwd {js_string(cwd)}" if isinstance(cwd, str) else "no cwd"
            raise CorruptSessionLogError(
                f"{path} is not where its header puts it: the header names session {js_string(meta['id'])} "
                f"({where}), whose log belongs at {expected}; a copied log keeps its original id, so move it to that "
                "place (under this root or another) to read it")

    def _read_header_only(self, path: Path) -> Meta | None:
        """The header of a log without reading the rest: the first line, or the first zstd frame."""
        with open_binary(path) as file:
            if compression_of(path) == "none":
                first = file.readline(max_line() + 1)
                if not first.endswith(b"\n"):
                    return None
                record = first
            else:
                content = b""
                while True:
                    chunk = file.read(8192)
                    if not chunk:
                        return None
                    content += chunk
                    scan = scan_frames(content, max_frames=1)
                    if scan.frames:
                        start, end = scan.frames[0]
                        try:
                            record = header_frame(frame_pieces(content[start:end], 1 << 20))
                        except FrameError as exc:
                            raise CorruptSessionLogError(
                                "corrupt Zstandard session log: header frame failed validation") from exc
                        break
        try:
            return decode_header(loads(record[:-1]))
        except (ValueError, CorruptSessionLogError, SessionFormatUnsupportedError):
            return None

    def log_in(self, directory: Path) -> Path | None:
        """The log in a session directory, whichever its encoding; a directory holding both is refused, and one
        that cannot be searched (mode 000, a symbolic link loop) raises the ``OSError`` naming it."""
        try:
            found = [directory / log_file_name(c) for c in ("zstd", "none") if _exists(directory / log_file_name(c))]
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(directory)) from None
        if len(found) > 1:
            raise CorruptSessionLogError(
                f"session directory {directory} holds both session.jsonl and session.jsonl.zstd; a session is "
                "stored in one encoding: keep the one you want and move the other away")
        return found[0] if found else None

    @staticmethod
    def flat_layout(path: Path) -> CorruptSessionLogError:
        return CorruptSessionLogError(
            f"{js_string(str(path))} is a session log in the retired flat layout; move it to "
            f"{js_string(str(_unflattened(path)))} to read it")


def _unflattened(path: Path) -> Path:
    """Where a flat ``<project>/<id>.jsonl[.zstd]`` log belongs: ``<project>/<id>/session.jsonl[.zstd]``."""
    name = path.name
    stem = name[:name.index(".jsonl")] if ".jsonl" in name else name
    return path.parent / stem / f"session{name[len(stem):]}"


def _duplicate(session_id: str) -> CorruptSessionLogError:
    return CorruptSessionLogError(f'duplicate JSONL session id "{session_id}" appears in multiple project directories')


def writer_alive(lock: Path) -> bool:
    """Whether a writer holds the lock at ``lock`` now: the kernel's word where it gives one (a stale file left by
    a killed writer names a pid another process may have by now), else whether the pid the file names runs."""
    held = flock_held(lock)
    if held is not None:
        return held
    try:
        pid = int(read_bytes(lock).decode("ascii").strip() or "0")
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


PROC_LOCKS = "/proc/locks"


def flock_held(path: Path) -> bool | None:
    """Whether any process holds a ``flock`` on the file at ``path`` now, asked of the kernel without taking one
    (Linux's ``/proc/locks``; probing with a shared lock could make a writer's exclusive attempt fail at that very
    moment); ``None`` where the kernel does not say, for the caller to judge another way. Here, not in ``lock``: a
    reader asks this, and a reader does not import the writer side (decision 0014)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    wanted = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        with open(PROC_LOCKS, "rb") as file:
            table = file.read()
    except OSError:
        return None
    for line in table.decode("ascii", "replace").splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's line reads "1: -> FLOCK …" and holds nothing
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            return True
    return False


def clear_leftovers(directory: Path) -> None:
    """Remove the temporary files a killed writer left in a session directory (a half-published log, a checkpoint
    being replaced). Called with the writer lock held: every such file is written only under it, so any found then
    belongs to a writer that is gone."""
    for pattern in ("session.jsonl*.tmp", "projections.json.*.tmp"):
        for leftover in directory.glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; an error other than its absence (a loop, a folder we may not search) is raised."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def _owned(entry: os.DirEntry[str]) -> bool:
    """Whether this process's user owns ``entry`` (itself, not what a link points to)."""
    try:
        return entry.stat(follow_symlinks=False).st_uid == os.geteuid()
    except OSError:
        return False


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
