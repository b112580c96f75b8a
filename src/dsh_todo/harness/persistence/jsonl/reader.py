"""The read half of the JSONL session backend: DSH's on-disk layout under one root, listed and read like DSH reads it.

Two levels, as DSH's backend: :meth:`JsonlReader.read_stored` is the raw read (header, good prefix, torn-tail
marker; it refuses corruption), :meth:`JsonlReader.read` the viewer's read (the same, refused at an unknown event
type that is not ``ignorable``). :meth:`JsonlReader.scan` is the one exact pass a reader of plans and verdicts runs
(:mod:`.reading`), from the projection checkpoint when its proof holds. Committing recovery and writing are the
other half (:mod:`.backend`), which a process that only reads never imports (decision 0014).

Each log is read in the encoding its file name says, so raw and zstd logs mix under one root. A session directory
holding both, or a log in DSH's retired flat layout, is refused rather than guessed at: two writers never split one
session.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from dsh_todo.harness.persistence.contract import Observer, Record, Scan, Start, StoredLog, StoredSession
from dsh_todo.harness.persistence.errors import (
    CorruptSessionLogError,
    SessionFormatUnsupportedError,
    SessionIdError,
    not_stored,
    refuse_unknown_types,
)
from dsh_todo.harness.persistence.header import Meta, parse_header_record
from dsh_todo.harness.persistence.interest import Interest
from dsh_todo.harness.persistence.jsonl.checkpoint import prefix_digest, usable_checkpoint
from dsh_todo.harness.persistence.jsonl.paths import (
    LOCK_NAME,
    LOG_NAMES,
    NAME_MAX,
    Compression,
    check_version,
    compression_of,
    decode_segment,
    log_path,
    session_dir,
    session_segment,
)
from dsh_todo.harness.persistence.jsonl.reading import Scanned, header_record, open_turn_before, scan_log, scan_tail
from dsh_todo.harness.persistence.jsonl.regular import NotRegularFileError, open_binary, read_bytes
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.jscompat import js_string


class JsonlReader:
    """Session logs under ``root``, read, each in its own encoding; :class:`~.backend.JsonlBackend` writes new ones
    in ``compression`` (``"zstd"``, DSH's default, or ``"none"``; by default the encoding the root's logs already
    have), delta runs as packed rows with ``pack_chunks`` (format v0 only)."""

    holds_files = True

    def __init__(self, root: str | os.PathLike[str], compression: Compression | None = None, *,
                 pack_chunks: bool = True) -> None:
        if compression not in ("zstd", "none", None):
            raise ValueError(f'compression must be "zstd" or "none", not {compression!r}')
        # Absolute once, so a later chdir cannot split one backend across two roots.
        self.root = Path(os.path.abspath(root))
        self.location = str(self.root)
        self.compression: Compression = compression or "zstd"
        self.compression_chosen = compression is not None
        """Whether ``compression`` was asked for; if not, a new log takes the root's encoding (zstd in a root
        holding no log yet), as DSH keeps one encoding per root."""
        self.pack_chunks = pack_chunks
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"session root {self.root} is not a directory")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r}, {self.compression!r})"

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
        """Every stored session, from headers only. One that cannot be stored as it is (the flat layout, both
        encodings in one directory, one id in two project directories) or whose folder cannot be read (a link loop,
        mode 000) is listed with its ``problem``, never hiding the others. What is not ours to judge is left out: a
        project folder that cannot be listed (in a root two users share, folders are 0700: the other user's) and an
        unreadable session folder another user owns. Whether a listed log reads cleanly is for a read to say."""
        found: list[StoredSession] = []
        for session_id, path, problem in self._listing():
            meta = None
            if problem is None:
                try:
                    meta = _header(path)
                except NotRegularFileError as exc:  # a FIFO or a device where the log belongs
                    problem = exc
                except OSError:
                    pass  # a header that cannot be read: the read of the whole log says why
            cwd = meta.get("cwd") if meta is not None else None
            found.append(StoredSession(session_id, cwd if isinstance(cwd, str) else None, meta, str(path), path,
                                       problem))
        counts: dict[str, int] = {}
        for item in found:
            counts[item.id] = counts.get(item.id, 0) + 1
        return [replace(item, problem=_duplicate(item.id))
                if counts[item.id] > 1 and item.problem is None else item for item in found]

    def _listing(self) -> Iterator[tuple[str, Path, Exception | None]]:
        """What :meth:`stored_sessions` lists, headers unread: each session's id and log, or the folder or flat
        file that holds it with the problem that refuses it."""
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
                    yield decode_segment(entry.name), path, problem
                    continue
                except OSError as exc:
                    if _owned(entry):
                        yield decode_segment(entry.name), path, OSError(exc.errno, exc.strerror, str(path))
                    continue
                if flat:
                    name = entry.name.removesuffix(".zstd").removesuffix(".jsonl")
                    yield decode_segment(name), path, self.flat_layout(path)
                elif log is not None:
                    yield decode_segment(entry.name), log, None

    def written(self) -> dict[str, int]:
        """When each listed log was last written: its modification time in nanoseconds (a log that cannot be
        stat'ed is left out). No header is read: the caller lists the sessions it wants anyway."""
        stamps: dict[str, int] = {}
        for session_id, path, _ in self._listing():
            with contextlib.suppress(OSError):
                stamps[session_id] = os.stat(path).st_mtime_ns
        return stamps

    def writer_alive(self, session_id: str) -> bool:
        """Whether a live process holds the session's writer lock now (its lock file names a running pid)."""
        path = self.find(session_id)
        return path is not None and writer_alive(path.parent / LOCK_NAME)

    def scan(self, session_id: str, observe: Observer | None = None, *, keep: bool = False,
             wanted: Interest | None = None, expand: bool = False, where: Path | None = None,
             listed: bool = False) -> Scan:
        """The contract's one exact pass (:meth:`scan_path` over the log of ``session_id``, or ``where``), with the
        closers recovery would append unless the log's writer lock is held now."""
        path = where if where is not None else self._require(session_id)
        found = self.scan_path(path, keep=keep, observe=observe, wanted=wanted, unique=listed, expand=expand)
        live = writer_alive(path.parent / LOCK_NAME)  # the pass proved the log is this id's one log
        return Scan(found.meta, found.count, found.events, [] if live else found.closers(), live, found.torn_at,
                    found.cut_frame_events)

    def scan_path(self, path: Path, *, keep: bool = True, observe: Observer | None = None,
                  wanted: Interest | None = None, unique: bool = False, expand: bool = False) -> Scanned:
        """One exact pass over the log at ``path`` (:func:`~.reading.scan_log`), refused like :meth:`read` when not
        where its header says or its id is stored twice under this root: both checked on the header first (a
        misplaced copy of a million events is refused at once). ``unique``: the caller (a listing) just counted every
        id under the root and found this one once, so it is not looked for again in every project directory."""
        meta = self.read_header(path)
        if meta is not None and not unique:
            self.find(str(meta["id"]))  # refuses an id stored in two project directories
        found = scan_log(path, keep=keep, observe=observe, wanted=wanted, expand=expand)
        self._check_identity(path, found.meta, None)
        if not unique:
            self.find(str(found.meta["id"]))
        return found

    def scan_checkpointed(self, session_id: str, start: Start, *, where: Path | None = None,
                          listed: bool = False) -> Scan | None:
        """The contract's checkpointed read: the tail after the checkpoint beside the log, read exactly (events not
        kept) when the checkpoint proves the bytes before its offset unchanged (:func:`~.checkpoint.prefix_digest`),
        with the closers recovery would append: from the tail when it holds a turn boundary, else from the turn open
        at the checkpoint's offset read back from there (:func:`~.reading.open_turn_before`). ``None`` whenever
        anything is off (no digest, another digest, a tail a full pass must judge, an open turn starting too far
        back): then :meth:`scan` the whole log. Refused like :meth:`scan_path` (``listed``: its ``unique``).

        ``start(rows, offset)`` is called with the checkpoint's rows and offset before the tail is read and returns
        the observer of the tail's events (``None``: the rows are of no use, give up)."""
        path = where if where is not None else self._require(session_id)
        meta = self.read_header(path)
        if meta is None:
            return None
        if not listed:
            self.find(str(meta["id"]))
        found = usable_checkpoint(self, path)
        if found is None or found[1].proof is None:
            return None
        meta, checkpoint = found
        try:
            if prefix_digest(path, checkpoint.offset, checkpoint.sealed()) != checkpoint.proof:
                return None
        except OSError:
            return None
        inner = start(checkpoint.rows, checkpoint.offset)
        if inner is None:
            return None
        unbounded: list[Record] = []
        bounded: list[bool] = []

        def observe(events: list[Record], types: list[Any]) -> None:
            if not bounded:
                if "turn/start" in types or "turn/end" in types:
                    bounded.append(True)
                    unbounded.clear()
                else:
                    unbounded.extend(events)
            inner(events, types)

        tail = scan_tail(path, meta, checkpoint.offset, observe)
        if tail is None:
            return None
        live = writer_alive(path.parent / LOCK_NAME)
        if live:
            closers: list[Record] = []
        elif bounded:
            closers = tail.closers()
        else:
            before = open_turn_before(path, checkpoint.offset)
            if before is None:
                return None
            closers = interrupted_turn_closers([*before, *unbounded], tail.meta) if before else []
        return Scan(tail.meta, tail.count, None, closers, live)

    def read_header(self, path: Path, expected_id: str | None = None) -> Meta | None:
        """The header of the log at ``path`` alone (its first line or first frame), checked to be where it says it
        belongs (``None`` when it cannot be read on its own: a full read then says why)."""
        meta = _header(path)
        if meta is not None:
            self._check_identity(path, meta, expected_id)
        return meta

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
        self.read_header(path, session_id)
        found = scan_log(path, keep=True, refuse_unknown=False)
        self._check_identity(path, found.meta, session_id)
        assert found.events is not None
        return StoredLog(str(path), found.meta, found.events, found.torn, path, found.last_record)

    def close(self) -> None:
        """Nothing to let go of: every writer holds its own file and lock."""

    def _require(self, session_id: str) -> Path:
        path = self.find(session_id)
        if path is None:
            raise not_stored(session_id, f"under {self.root}")
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

    def log_in(self, directory: Path) -> Path | None:
        """The log in a session directory, whichever its encoding: the newest format version there (a directory
        DSH migrated keeps the older generation beside it). A directory holding both encodings is refused, and one
        that cannot be searched (mode 000, a symbolic link loop) raises the ``OSError`` naming it."""
        try:
            found = [directory / name for name in LOG_NAMES if _exists(directory / name)]
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(directory)) from None
        if len({LOG_NAMES[path.name] for path in found}) > 1:
            raw, zstd = (next(path.name for path in found if LOG_NAMES[path.name] == c) for c in ("none", "zstd"))
            raise CorruptSessionLogError(
                f"session directory {directory} holds both {raw} and {zstd}; a session is "
                "stored in one encoding: keep the one you want and move the other away")
        return found[0] if found else None

    @staticmethod
    def flat_layout(path: Path) -> CorruptSessionLogError:
        return CorruptSessionLogError(
            f"{js_string(str(path))} is a session log in the retired flat layout; move it to "
            f"{js_string(str(_unflattened(path)))} to read it")


def _header(path: Path) -> Meta | None:
    """The header of a log without reading the rest; ``None`` when it cannot be read on its own."""
    with open_binary(path) as file:
        try:
            meta = parse_header_record(header_record(file, compression_of(path) == "zstd"))
            check_version(path, meta)
            return meta
        except (CorruptSessionLogError, SessionFormatUnsupportedError):
            return None


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
    """Whether any process holds a ``flock`` on the file at ``path`` now, asked of the kernel's ``/proc/locks``
    (probing with a shared lock could make a writer's exclusive attempt fail at that moment); ``None`` where the
    kernel does not say. Here, not in ``lock``: a reader does not import the writer side (decision 0014)."""
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
