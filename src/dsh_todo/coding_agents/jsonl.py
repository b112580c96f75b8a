"""What the readers of JSONL transcripts share: records one line at a time, and their timestamps.

A transcript may be hundreds of megabytes and is being appended to while we read it: it is read line by line
(never whole), and a last line without its newline yet is a record still being written, left for the next read.
"""

from __future__ import annotations

import itertools
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from dsh_todo.coding_agents.base import AgentSession

_Fold = TypeVar("_Fold")


def records(path: Path, agent: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``path``, one per line, in order; a complete line that is not one raises ``ValueError``
    naming ``agent`` and the file (a format this version cannot read), a partial last line is skipped."""
    return Lines(agent).read(path)


class Lines:
    """Where a reader got to in one file, so that the next read goes on from there: the file's identity, the byte
    after the last complete line, and that line's number. A file replaced or cut shorter is read from the start
    (:attr:`restarted` says so, and the caller starts its fold again)."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.identity: tuple[int, int] | None = None
        self.offset = 0
        self.number = 0
        self.restarted = False

    def read(self, path: Path) -> Iterator[dict[str, Any]]:
        """The records after the last complete line read so far (see :func:`records`)."""
        with path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            identity = (stat.st_dev, stat.st_ino)
            self.restarted = self.identity is not None and (identity != self.identity or stat.st_size < self.offset)
            if self.restarted:
                self.offset = self.number = 0
            self.identity = identity
            handle.seek(self.offset)
            for line in handle:
                if not line.endswith(b"\n"):
                    return  # still being written: read again once it is whole
                self.offset += len(line)
                self.number += 1
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    raise ValueError(cannot(self.agent, path, f"line {self.number} is not JSON")) from None
                if not isinstance(record, dict):
                    raise ValueError(cannot(self.agent, path, f"line {self.number} is not a JSON object"))
                yield record


def fed(lines: Lines, path: Path, fold: Any, fresh: Callable[[], Any]) -> Any:
    """``fold`` (or, when the file was replaced or cut, ``fresh()``) after seeing the records of ``path`` that
    ``lines`` has not read yet; ``fold`` has a ``see(record)`` method."""
    iterator = lines.read(path)
    first = next(iterator, None)  # opens the file: now lines.restarted says whether it is the one read before
    if lines.restarted:
        fold = fresh()
    for record in itertools.chain([] if first is None else [first], iterator):
        fold.see(record)
    return fold


class FoldingReader(ABC, Generic[_Fold]):
    """A :class:`~dsh_todo.coding_agents.base.Reader` whose file is one transcript folded record by record (Claude
    Code's, Codex's): :meth:`read` reads it whole, :meth:`read_more` only the lines written since the last call, so a
    live board or ``watch`` never reads a long transcript again. A subclass says how a fold starts and which sessions
    a fold holds."""

    agent: str

    @abstractmethod
    def _fold(self, path: Path) -> _Fold:
        """A fold that has seen nothing of ``path`` yet (it has a ``see(record)`` method, see :func:`fed`)."""

    @abstractmethod
    def _sessions(self, path: Path, fold: _Fold) -> list[AgentSession]:
        """The sessions ``fold`` holds once it has seen ``path``'s records so far."""

    def read(self, path: Path) -> list[AgentSession]:
        return self.read_more(path, None)[0]

    def read_more(self, path: Path, state: Any) -> tuple[list[AgentSession], Any]:
        """:meth:`read`, going on from ``state`` (what the last call returned; ``None`` the first time): only the
        lines written since are read. Returns the sessions and the state for the next call."""
        lines, fold = state if state is not None else (Lines(self.agent), self._fold(path))
        fold = fed(lines, path, fold, lambda: self._fold(path))
        return self._sessions(path, fold), (lines, fold)


def cannot(agent: str, path: Path, why: str) -> str:
    """The one line saying that ``agent``'s file ``path`` does not read as this version knows it."""
    return f"{agent}: cannot read {path}: {why} (a format this version of dsh-todo does not know)"


def epoch(stamp: Any) -> float | None:
    """An ISO 8601 timestamp (``2026-12-06T05:29:55.573Z``) as epoch seconds, ``None`` when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def mtime(path: Path) -> float:
    """When ``path`` last changed (epoch seconds), 0 when it is gone."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
