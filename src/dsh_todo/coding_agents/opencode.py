"""opencode's plans: the ``todo`` table of its SQLite store, and the ``todowrite`` calls in its ``part`` table.

Found by running opencode 1.18.33 headless (decision 0048). Its home is ``$XDG_DATA_HOME/opencode``, else
``~/.local/share/opencode``; the store is ``opencode.db`` there (``opencode-<channel>.db`` for a non-release build),
or ``$OPENCODE_DB`` (absolute, or relative to that folder). One store holds every session:

- ``session(id, parent_id, directory, title, time_updated, ...)``: ``parent_id`` is the session that delegated it
  (its ``task`` tool), ``directory`` the folder it ran in;
- ``todo(session_id, content, status, priority, position, ...)``: the standing list, replaced whole on each write,
  in ``position`` order; opencode checks no status word, so any is kept as written;
- ``message(session_id, time_created, data)``: the last one says whether the turn ended (an assistant message
  ``completed`` with a ``finish`` other than ``tool-calls``);
- ``part(id, session_id, time_created, data)``: one row per tool call, ``data`` a JSON object; a ``todowrite`` call
  is ``{"type": "tool", "tool": "todowrite", "state": {"status", "input": {"todos": [...]}, "output", ...}}``, and
  only a ``completed`` one changed the list (a call refused by its schema is stored with ``error``).

Read-only, without a trace: opencode keeps the store in WAL mode and leaves ``-wal`` and ``-shm`` beside it even
after it exits. A plain ``mode=ro`` connection still rewrites the ``-shm`` index and creates ``-wal``/``-shm`` when
they are missing, so the store is opened by what is beside it (measured in decision 0048):

- no ``-wal``: every row is in the main file: ``immutable=1`` (no lock, nothing created);
- ``-wal`` and ``-shm``: ``readonly_shm=1`` (the index is mapped read-only; opencode may be writing meanwhile);
- ``-wal`` without ``-shm``: the two files are copied into a private temporary folder and read there.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dsh_todo.coding_agents.base import AgentPlanItem, AgentSession, PlanWrite, items

AGENT = "opencode"
TOOL = "todowrite"
ACCEPTED = "completed"
"""A tool part's ``state.status`` once opencode ran the call; a refused call has ``error``."""
STORE_PREFIX = "opencode"
STORE_SUFFIX = ".db"


class OpencodeReader:
    """The :class:`~dsh_todo.coding_agents.base.Reader` of opencode's SQLite store."""

    agent = AGENT

    def default_home(self) -> Path:
        """``$XDG_DATA_HOME/opencode`` when set, else ``~/.local/share/opencode`` (where opencode keeps its data)."""
        base = os.environ.get("XDG_DATA_HOME")
        return (Path(base) if base else Path.home() / ".local" / "share") / "opencode"

    def session_paths(self, home: Path) -> list[Path]:
        """The stores in ``home`` (``opencode.db``, ``opencode-<channel>.db``) and the one ``$OPENCODE_DB`` names:
        relative to ``home``, or absolute (then only for the default home: a home named by option is read as it
        is); one store holds many sessions."""
        try:
            found = sorted(entry for entry in home.iterdir() if entry.name.startswith(STORE_PREFIX)
                           and entry.name.endswith(STORE_SUFFIX) and entry.is_file())
        except OSError:
            found = []
        named = os.environ.get("OPENCODE_DB")
        if named and named != ":memory:":
            store = Path(named) if Path(named).is_absolute() else home / named
            mine = not Path(named).is_absolute() or home == self.default_home()
            if mine and store.is_file() and store not in found:
                found.append(store)
        return found

    def read(self, path: Path) -> list[AgentSession]:
        """Every session the store holds, parents before their children as the store lists them; ``ValueError``
        naming opencode and the file when it is not a store this version knows."""
        try:
            with _opened(path) as db:
                return _sessions(db, path)
        except sqlite3.Error as exc:
            raise ValueError(f"opencode: cannot read {path}: {exc}") from exc


READER = OpencodeReader()


def _uri(path: Path, flag: str | None = None) -> str:
    return f"file:{quote(str(path.resolve()))}?mode=ro" + (f"&{flag}" if flag else "")


@contextmanager
def _opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``path`` that writes, locks-for-writing and creates nothing beside it (see the
    module's docstring for why each case is opened the way it is)."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not path.is_file():
        raise sqlite3.OperationalError("no such file")
    if not wal.exists():
        with closing(sqlite3.connect(_uri(path, "immutable=1"), uri=True)) as db:
            yield db
    elif shm.exists():
        with closing(sqlite3.connect(_uri(path, "readonly_shm=1"), uri=True)) as db:
            yield db
    else:
        with tempfile.TemporaryDirectory(prefix="dsh-todo-opencode-") as folder:
            copy = Path(folder) / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, Path(f"{copy}-wal"))
            with closing(sqlite3.connect(_uri(copy), uri=True)) as db:
                yield db


WRITES = """
SELECT session_id, time_created, json_extract(data, '$.state.input'), json_extract(data, '$.state.output'),
       json_extract(data, '$.state.time.end')
FROM part
WHERE data LIKE ? AND json_valid(data) AND json_extract(data, '$.type') = 'tool'
  AND json_extract(data, '$.tool') = ? AND json_extract(data, '$.state.status') = ?
ORDER BY time_created, id
"""
"""The accepted plan writes of every session, oldest first: SQLite picks the few fields out of each part (the
``LIKE`` skips most rows unparsed), so Python parses only each call's arguments."""


def _sessions(db: sqlite3.Connection, path: Path) -> list[AgentSession]:
    plans: dict[str, list[AgentPlanItem]] = {}
    for session_id, content, status in db.execute(
            "SELECT session_id, content, status FROM todo ORDER BY session_id, position"):
        plans.setdefault(session_id, []).append(AgentPlanItem(str(content), str(status)))
    writes: dict[str, list[PlanWrite]] = {}
    for session_id, created, arguments, output, end in db.execute(WRITES, (f'%"{TOOL}"%', TOOL, ACCEPTED)):
        writes.setdefault(session_id, []).append(_write(arguments, output, end if end is not None else created,
                                                        path))
    ended: dict[str, bool] = {}
    for session_id, data in db.execute(
            "SELECT id, (SELECT data FROM message WHERE session_id = session.id"
            " ORDER BY time_created DESC, id DESC LIMIT 1) FROM session"):
        if data is not None:
            ended[session_id] = _ends_turn(data)
    found = []
    for session_id, parent, directory, title, updated in db.execute(
            "SELECT id, parent_id, directory, title, time_updated FROM session ORDER BY time_created, id"):
        own = tuple(writes.get(session_id, ()))
        last = max([float(updated) / 1000, *(write.at for write in own if write.at is not None)])
        plan = plans.get(session_id)
        found.append(AgentSession(
            agent=AGENT, id=str(session_id), path=path, project=directory, updated=last,
            plan=tuple(plan) if plan else None, writes=own, parent=parent, title=title,
            turn_open=None if session_id not in ended else not ended[session_id]))
    return found


def _write(arguments: Any, output: Any, at: Any, path: Path) -> PlanWrite:
    """The plan write of one accepted ``todowrite`` part (its ``state.input`` as JSON text, ``state.output``, when
    it ended in ms); ``ValueError`` when its list is not the shape this version knows."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        value = None
    todos = value.get("todos") if isinstance(value, dict) else None
    if not isinstance(todos, list) or not all(_item(todo) for todo in todos):
        raise ValueError(f"opencode: cannot read {path}: a {TOOL} call whose input.todos is not a list of "
                         f"{{content, status}}: {str(arguments)[:200]}")
    return PlanWrite(items((todo["content"], todo["status"]) for todo in todos),
                     float(at) / 1000 if isinstance(at, (int, float)) else None, TOOL, value, output)


def _ends_turn(data: str) -> bool:
    """Whether a session's last message ends its turn: the model's answer, completed, for a reason other than a
    tool call (``finish`` ``stop``, ``length``, ...)."""
    try:
        message = json.loads(data)
    except ValueError:
        return False
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return False
    time = message.get("time")
    completed = isinstance(time, dict) and isinstance(time.get("completed"), (int, float))
    return completed and message.get("finish") not in (None, "tool-calls")


def _item(todo: Any) -> bool:
    return isinstance(todo, dict) and isinstance(todo.get("content"), str) and isinstance(todo.get("status"), str)
