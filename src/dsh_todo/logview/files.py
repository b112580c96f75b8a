"""Session logs on disk under one root, for reading: each file in its own encoding, each session on its own.

The store (:class:`~dsh_todo.harness.persistence.store.JsonlStore`) is a writer's view: one root, one encoding,
and anything unexpected under the root stops it, because a writer must never split a session across two
configurations. A reader has no such risk, so :class:`FileBackend` reads every ``session.jsonl`` and
``session.jsonl.zstd`` in its own encoding, and a damaged or misplaced session is refused on its own while the
others stay readable. DSH's refusals that protect a *session* stay: a session directory holding both files, a log
in the retired flat layout, one id in two project directories, and a log that is not where its header says.
"""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dsh_todo.harness.persistence import (
    CorruptSessionLogError,
    JsonlStore,
    SessionLogError,
    SessionNotFoundError,
    TornTail,
)
from dsh_todo.harness.persistence.header import Meta
from dsh_todo.harness.persistence.paths import Compression, encode_segment
from dsh_todo.jsonutil import js_string
from dsh_todo.logview.health import Refusal
from dsh_todo.logview.scan import Scanned, scan_log

LOG_NAMES: Final[dict[str, Compression]] = {"session.jsonl.zstd": "zstd", "session.jsonl": "none"}
LOCK_NAME: Final = "session.lock"


@dataclass(frozen=True, slots=True)
class Entry:
    """One session of a listing. ``id`` is the id its directory names (what to ask :meth:`FileBackend.read` for);
    ``meta`` is its header (``None`` when unreadable); ``problem`` refuses it before any read."""

    id: str
    cwd: str | None
    meta: Meta | None
    path: Path
    problem: Refusal | None = None

    @property
    def where(self) -> str:
        return str(self.path)


@dataclass(frozen=True, slots=True)
class FileLog:
    """A whole stored log: the shape the store's reads return (``meta``, ``events``, ``torn``)."""

    path: Path
    meta: Meta
    events: list[dict[str, Any]]
    torn: TornTail | None


def decode_segment(name: str) -> str:
    """The id an encoded directory name stands for (the inverse of ``encode_segment``), or the name itself when
    ``encode_segment`` would not have written it."""
    units: list[int] = []
    index = 0
    while index < len(name):
        if name[index] == "~":
            digits = name[index + 1:index + 5]
            if len(digits) != 4 or digits.strip("0123456789ABCDEF"):
                return name
            units.append(int(digits, 16))
            index += 5
        elif ord(name[index]) < 0x80:
            units.append(ord(name[index]))
            index += 1
        else:
            return name
    decoded = b"".join(unit.to_bytes(2, "little") for unit in units).decode("utf-16-le", "surrogatepass")
    return decoded if decoded and encode_segment(decoded) == name else name


def both_encodings(directory: Path) -> Refusal:
    return Refusal("corrupt-log", f"session directory {directory} holds both session.jsonl and session.jsonl.zstd; "
                                  "a session is stored in one encoding: keep the one you want and move the other away")


def flat_layout(path: Path) -> Refusal:
    # DSH's own text (the store raises it too).
    return Refusal("corrupt-log", f"session artifact {js_string(str(path))} uses the unsupported flat-file layout; "
                                  "use a separate root or move it into a project/session directory before loading")


def duplicate(session_id: str) -> Refusal:
    return Refusal("corrupt-log",
                   f'duplicate JSONL session id "{session_id}" appears in multiple project directories')


def session_log(directory: Path) -> Path | None:
    """The log in a session directory (``None`` if it has none); refuses a directory holding both files."""
    found = [directory / name for name in LOG_NAMES if (directory / name).is_file()]
    if len(found) > 1:
        raise both_encodings(directory)
    return found[0] if found else None


class FileBackend:
    """The sessions under ``root``, read-only, any mix of raw and zstd logs."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.abspath(root))

    def __repr__(self) -> str:
        return f"FileBackend({str(self.root)!r})"

    # -- the backend interface ------------------------------------------------------------------------------

    def read(self, session_id: str) -> FileLog:
        """The stored log of ``session_id`` (no repair, unknown types refused, as the store's ``read``)."""
        found = self.read_path(self.locate(session_id))
        assert found.events is not None
        torn = None if found.torn_at is None else TornTail(found.torn_at, found.events[found.count
                                                                                      - found.cut_frame_events:])
        return FileLog(found.path, found.meta, found.events, torn)

    def list(self) -> builtins.list[Entry]:
        """Every session under the root, from headers only; a session refused on sight carries its ``problem``."""
        entries: builtins.list[Entry] = []
        for project in self._projects():
            for item in sorted(os.scandir(project), key=lambda entry: entry.name):
                path = Path(item.path)
                if item.is_file() and item.name.endswith((".jsonl", ".jsonl.zstd")):
                    name = item.name.removesuffix(".zstd").removesuffix(".jsonl")
                    entries.append(Entry(decode_segment(name), None, None, path, flat_layout(path)))
                elif item.is_dir():
                    entries.extend(self._entry(path))
        names: dict[str, int] = {}
        for entry in entries:
            names[entry.id] = names.get(entry.id, 0) + 1
        return [Entry(e.id, e.cwd, e.meta, e.path, duplicate(e.id)) if names[e.id] > 1 and e.problem is None else e
                for e in entries]

    def writer_alive(self, session_id: str) -> bool:
        try:
            return writer_alive(self.locate(session_id))
        except (SessionLogError, Refusal, OSError):
            return False

    # -- reading files --------------------------------------------------------------------------------------

    def locate(self, session_id: str) -> Path:
        """The log of ``session_id``; refuses an id stored twice, in both encodings, or in the flat layout."""
        try:
            encoded = encode_segment(session_id)
        except ValueError:
            raise SessionNotFoundError(f'session "{session_id}" has no stored log under {self.root}') from None
        matches: builtins.list[Path] = []
        for project in self._projects():
            for suffix in (".jsonl.zstd", ".jsonl"):
                if (project / (encoded + suffix)).is_file():
                    raise flat_layout(project / (encoded + suffix))
            log = session_log(project / encoded) if (project / encoded).is_dir() else None
            if log is not None:
                matches.append(log)
        if len(matches) > 1:
            raise duplicate(session_id)
        if not matches:
            raise SessionNotFoundError(f'session "{session_id}" has no stored log under {self.root}')
        return matches[0]

    def read_path(self, log: Path, *, keep: bool = True) -> Scanned:
        """Read the log file ``log`` (under this root) in its own encoding, then check it is where its header says
        and that its id is stored nowhere else under the root. Raises the store's errors, or :class:`Refusal`."""
        found = scan_log(log, LOG_NAMES[log.name], keep=keep)
        self.check_placed(log, found.meta)
        others = [p for p in self._projects() if p != log.parent.parent and (p / log.parent.name).is_dir()
                  and any((p / log.parent.name / name).is_file() for name in LOG_NAMES)]
        if others:
            raise duplicate(str(found.meta["id"]))
        return found

    def check_placed(self, log: Path, meta: Meta) -> None:
        """Refuse a log that is not where its own header puts it (a copy in another session directory, say)."""
        store = JsonlStore(self.root, LOG_NAMES[log.name])
        try:
            expected = store.path_for(meta["id"], meta.get("cwd"))
        except ValueError:
            raise CorruptSessionLogError(
                f'corrupt session log "{log}": header id cannot name a storage path') from None
        if log == expected or _same_file(log, expected):
            return
        cwd = meta.get("cwd")
        where = f"cwd {js_string(cwd)}" if isinstance(cwd, str) else "no cwd"
        raise Refusal("corrupt-log",
                      f"{log} is not where its header puts it: the header names session {js_string(meta['id'])} "
                      f"({where}), whose log belongs at {expected}; a copied log keeps its original id, so move it "
                      "to that place (under this root or another) to read it")

    # -- helpers --------------------------------------------------------------------------------------------

    def _projects(self) -> builtins.list[Path]:
        try:
            entries = sorted(os.scandir(self.root), key=lambda entry: entry.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [Path(entry.path) for entry in entries if entry.is_dir()]

    def _entry(self, directory: Path) -> builtins.list[Entry]:
        name = decode_segment(directory.name)
        try:
            log = session_log(directory)
        except Refusal as problem:
            return [Entry(name, None, None, directory, problem)]
        if log is None:
            return []
        try:
            meta = JsonlStore(self.root, LOG_NAMES[log.name]).read_header(log)
        except (SessionLogError, OSError):
            meta = None
        cwd = meta.get("cwd") if meta is not None else None
        return [Entry(name, cwd if isinstance(cwd, str) else None, meta, log)]


def find_log(path: str | Path) -> Path:
    """A session directory or its ``session.jsonl[.zstd]`` → the log file (raises :class:`Refusal`)."""
    target = Path(path)
    if target.is_dir():
        log = session_log(target)
        if log is None:
            raise Refusal("not-found", f"{target} holds no session.jsonl or session.jsonl.zstd")
        return log
    if not target.exists():
        raise Refusal("not-found", f"{target} does not exist")
    if target.name not in LOG_NAMES:
        if target.name.endswith((".jsonl", ".jsonl.zstd")):
            raise flat_layout(Path(os.path.abspath(target)))
        raise Refusal("not-found", f"{target} is not a session log (expected session.jsonl or session.jsonl.zstd)")
    if target.parent.is_dir():
        session_log(target.parent)  # the other encoding beside it refuses the session
    return target


def root_of(log: Path) -> Path:
    """The root a log lives under (``<root>/<project>/<session>/<file>``)."""
    absolute = Path(os.path.abspath(log))
    return absolute.parents[2] if len(absolute.parents) > 2 else absolute.parent


def writer_alive(log: Path) -> bool:
    """Whether a live process holds the log's writer lock (the lock file exists and names a running pid)."""
    try:
        pid = int((log.parent / LOCK_NAME).read_text(encoding="ascii").strip() or "0")
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


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
