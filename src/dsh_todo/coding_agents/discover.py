"""Every chosen agent's sessions, read from its home (or the one named instead), and one session found by id.

Only through :func:`dsh_todo.coding_agents.base.reader`, so an agent's module is imported only when it is chosen.
A file that does not read is not dropped: it becomes a session with no plan whose ``extra["error"]`` is the
reader's line (naming the agent and the file), so a new release that changes its format shows as such.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from dsh_todo.coding_agents.base import AgentSession, Reader, reader


def home_of(agent: str, homes: Mapping[str, Path] | None = None) -> Path:
    """The home read for ``agent``: the one named in ``homes``, else the agent's own default."""
    named = (homes or {}).get(agent)
    return named if named is not None else reader(agent).default_home()


def read_file(found: Reader, path: Path) -> list[AgentSession]:
    """The sessions of one file; one that does not read becomes a session carrying the error (see the module)."""
    return read_on(found, path, None)[0]


def read_on(found: Reader, path: Path, state: Any) -> tuple[list[AgentSession], Any]:
    """The sessions of one file and what to go on from next time: through the reader's ``read_more(path, state)``
    where it has one (the lines written since ``state`` only), else its ``read``. A file that does not read becomes
    a session carrying the error, and the next read starts over."""
    more = getattr(found, "read_more", None)
    try:
        if more is None:
            return found.read(path), None
        sessions, state = more(path, state)
        return list(sessions), state
    except FileNotFoundError:
        return [], None  # gone between the listing and the read
    except (ValueError, OSError) as exc:
        try:
            updated = path.stat().st_mtime
        except OSError:
            updated = 0.0
        return [AgentSession(found.agent, path.stem, path, None, updated, None, extra={"error": str(exc)})], None


def discover(agents: Iterable[str], homes: Mapping[str, Path] | None = None) -> list[AgentSession]:
    """The sessions of every agent in ``agents``, each from its home (see :func:`home_of`), most recent first."""
    return Discovery(agents, homes).sessions()


class Discovery:
    """:func:`discover` asked again and again (a live board, ``watch``): each call lists the homes, but reads only
    the files whose size or mtime changed since the last call (or a folder their reader named in
    ``extra["watch"]``, such as Claude Code's task list), keeping the rest as they were read; a reader with
    ``read_more`` reads only the lines written since. Files gone are forgotten."""

    def __init__(self, agents: Iterable[str], homes: Mapping[str, Path] | None = None) -> None:
        self.agents = list(agents)
        self.homes = dict(homes or {})
        self._read: dict[tuple[str, Path], tuple[Any, list[AgentSession], Any]] = {}
        self.reads = 0
        """How many files the calls so far have read (the rest came from what was kept)."""

    def sessions(self) -> list[AgentSession]:
        """Every chosen agent's sessions now, most recently changed first."""
        sessions: list[AgentSession] = []
        kept: dict[tuple[str, Path], tuple[Any, list[AgentSession], Any]] = {}
        for agent in self.agents:
            found = reader(agent)
            for path in found.session_paths(home_of(agent, self.homes)):
                before = self._read.get((agent, path))
                stamp = _stamp(path, before[1] if before is not None else [])
                if before is not None and before[0] == stamp:
                    read, state = before[1], before[2]
                else:  # stamped before the read: a change during it is read next time
                    read, state = read_on(found, path, before[2] if before is not None else None)
                    self.reads += 1
                    if _folders(read) != _folders(before[1] if before is not None else []):
                        stamp = _stamp(path, read)
                kept[agent, path] = (stamp, read, state)
                sessions += read
        self._read = kept
        sessions.sort(key=lambda session: session.updated, reverse=True)
        return sessions


def _stamp(path: Path, read: list[AgentSession]) -> Any:
    """What says a file (and the folders its sessions' reader watches) changed: sizes and mtimes."""
    return (file_stamp(path), [folder_stamp(folder) for folder in _folders(read)])


def _folders(read: list[AgentSession]) -> list[str]:
    return sorted({str(folder) for session in read for folder in session.extra.get("watch", ())})


SQLITE_SUFFIXES: Final = (".db", ".sqlite", ".sqlite3")
"""A store with one of these suffixes may be SQLite, whose writes land in its ``-wal`` first."""


def file_stamp(path: Path) -> tuple[int, ...] | None:
    """What says a file changed (here, in ``watch`` and on the board): its size and mtime (ns), and for a SQLite
    store those of its ``-wal`` too (``-1`` without one): a running opencode's writes land in the ``-wal``, leaving
    the store as it was, and once a checkpoint has emptied the ``-wal`` it is written again from its start at the
    same size, which only its mtime says. ``None`` when the file is gone."""
    try:
        stat = path.stat()
    except OSError:
        return None
    if path.suffix not in SQLITE_SUFFIXES:
        return (stat.st_size, stat.st_mtime_ns)
    try:
        wal = os.stat(f"{path}-wal")
    except OSError:
        return (stat.st_size, stat.st_mtime_ns, -1, -1)
    return (stat.st_size, stat.st_mtime_ns, wal.st_size, wal.st_mtime_ns)


def folder_stamp(folder: str | Path) -> list[tuple[str, tuple[int, ...] | None]]:
    """What says a folder's files changed: each entry's name and :func:`file_stamp`, by name; ``[]`` when the
    folder cannot be listed."""
    return sorted((entry.name, file_stamp(Path(entry.path))) for entry in _entries(folder))


def _entries(folder: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:
        return []


def find(agents: Iterable[str], homes: Mapping[str, Path] | None, session_id: str) -> AgentSession | None:
    """The session named ``session_id`` (its id, or the path of its file) among ``agents``' homes, ``None`` when
    none holds it. Files whose names hold the id are read first; the rest only when none of them has it and the
    reader does not say (``names_hold_ids = True``) that a session's file name always holds its id."""
    chosen = list(agents)
    candidate = Path(session_id)
    for agent in chosen:
        found = reader(agent)
        paths = found.session_paths(home_of(agent, homes))
        if candidate.is_file():
            target = candidate.resolve()
            named = [path for path in paths if path.resolve() == target]
            for path in named:
                sessions = read_file(found, path)
                if sessions:
                    return sessions[0]
            continue
        likely = [path for path in paths if session_id in path.name]
        rest = [] if getattr(found, "names_hold_ids", False) else [path for path in paths if path not in likely]
        for group in (likely, rest):
            for path in group:
                for session in read_file(found, path):
                    if session.id == session_id:
                        return session
    return None
