"""A log named by its path: the session directory or its log file, and the root it lives under.

The one place the reader meets files by name: a path (or a ``root``) becomes the JSONL reader of its root
(:class:`~dsh_todo.harness.persistence.jsonl.reader.JsonlReader`), and from there on the log is read through the
contract like any other backend's: each file in its own encoding, with DSH's refusals (both encodings in one
directory, the flat layout, a copy that is not where its header says, one id in two project directories).
"""

from __future__ import annotations

import os
from pathlib import Path

from dsh_todo.harness.persistence.jsonl.paths import LOG_NAMES, decode_segment
from dsh_todo.harness.persistence.jsonl.reader import JsonlReader
from dsh_todo.logview.health import Refusal

LOG_FILES = "session.v4.jsonl[.zstd] or session.jsonl[.zstd]"
"""The log file names, for people."""


def names_a_log(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` is the path of a session log (``session[.v4].jsonl[.zstd]``, or a log of DSH's retired flat
    layout) or of a session folder (a directory holding one). Only then is a SESSION argument read as a path: a file
    or folder that merely bears a session's name (``notes`` in the working directory) never shadows the session.
    A folder that cannot be searched (mode 000) may be one: it is read as a path, and the read says it cannot be."""
    target = Path(source)
    try:
        if not target.is_dir():
            return target.name.endswith((".jsonl", ".jsonl.zstd")) and target.exists()
    except OSError:  # what holds it cannot be searched: no path we can read
        return False
    for name in LOG_NAMES:
        try:
            os.stat(target / name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:  # a folder we may not search may be a session folder: its read says it cannot be read
            pass
        return True
    return False


def not_a_log(source: str | os.PathLike[str]) -> str:
    """Why ``source`` is no log to read by its path, in words: it does not exist, or it is something else."""
    if os.path.lexists(source):
        return f"{os.fspath(source)} is not a session log or session folder"
    return f"{os.fspath(source)} does not exist"


def find_log(path: str | Path) -> Path:
    """A session directory or its log file → the log file (raises :class:`Refusal`)."""
    target = Path(path)
    if target.is_dir():
        backend = JsonlReader(root_of(target / "session.jsonl"))
        log = backend.log_in(target)
        if log is None:
            raise Refusal("not-found", f"{target} holds no session log ({LOG_FILES})")
        return log
    if not target.exists():
        raise Refusal("not-found", f"{target} does not exist")
    if target.name not in LOG_NAMES:
        if target.name.endswith((".jsonl", ".jsonl.zstd")):
            raise JsonlReader.flat_layout(Path(os.path.abspath(target)))
        raise Refusal("not-found", f"{target} is not a session log (expected {LOG_FILES})")
    if target.parent.is_dir():
        JsonlReader(root_of(target)).log_in(target.parent)  # the other encoding beside it refuses the session
    return target


def root_of(log: Path) -> Path:
    """The root a log lives under (``<root>/<project>/<session>/<file>``)."""
    absolute = Path(os.path.abspath(log))
    return absolute.parents[2] if len(absolute.parents) > 2 else absolute.parent


def log_target(source: str | os.PathLike[str]) -> tuple[JsonlReader, Path]:
    """The reader of the root a log path (or session folder) lives under, and the log's absolute path (raises
    :class:`Refusal`)."""
    log = find_log(os.fspath(source))
    return JsonlReader(root_of(log)), Path(os.path.abspath(log))


def backend_at(root: str | os.PathLike[str]) -> JsonlReader:
    """The reader of the session logs under ``root``."""
    return JsonlReader(root)


def session_of(session_id: str | None, log: Path | None) -> str:
    """The session a read is of: the id asked for, else the one the log's folder is named after."""
    if session_id is not None:
        return session_id
    assert log is not None, "a read names a session or a log"
    return decode_segment(log.parent.name)
