"""Other coding agents' sessions on the board: found in their homes, read again when their files change, pushed live.

The user chooses the agents (``--agents``); each agent's :class:`~dsh_todo.coding_agents.base.Reader` says where its
session files are and reads one. An :class:`AgentWatch` keeps, per file, its stamp (size and mtime, with a SQLite
store's ``-wal``: :func:`~dsh_todo.coding_agents.discover.file_stamp`, the one ``watch`` uses) and the sessions it
held. A poller thread lists and stats every file every :data:`POLL_S` (a stat costs microseconds, a read costs a
parse) and hands only the files whose stamp changed to one
worker thread, one batch at a time, so a burst of writes never queues more than one read per file, and a thousand
idle files cost a thousand stats a tick (about 20 ms for 800 files on a loaded core: 5 % of one core).
What the worker read becomes board rows (:func:`row_of`) and is handed to ``on_change``, which the web app turns
into ``agents/session`` frames on the mux.

Read-only by rule: a home that does not exist is not created, and nothing here opens a file for writing (the
readers read; they never lock). A file the reader cannot read is a row with the reader's one-line reason (the
``refused`` state), never a silently empty plan.

A foreign session also gets a page of its own: its plan writes as a conversation of tool rows
(:func:`synthetic_events`), each followed by a ``todo/write`` carrying the list the write left, so the page's diff
rows and pinned plan strip work for every agent as they do for DSH's ``todo_write``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from dsh_todo.coding_agents import base
from dsh_todo.coding_agents.base import AgentSession, Reader
from dsh_todo.coding_agents.discover import file_stamp

log = logging.getLogger("dsh_todo.web")

POLL_S: Final = 0.25
"""How often every chosen agent's files are listed and stat'ed (a change is on the page within about this plus a
read)."""
FIRST_READ_S: Final = 10.0
"""How long the first ``session.list`` waits for the first reading of every file (a page opened at start-up)."""
SEPARATOR: Final = ":"
"""A foreign session's board id is ``<agent>:<its own id>`` (two agents may use the same id)."""

Stat = tuple[int, ...]
"""What says a file changed: :func:`~dsh_todo.coding_agents.discover.file_stamp`, ``(size, mtime_ns, …)``."""
OnChange = Callable[[list[dict[str, Any]], list[str]], None]
"""``(rows changed or added, board ids removed)``, called on the worker thread."""


def board_id(agent: str, session_id: str) -> str:
    return f"{agent}{SEPARATOR}{session_id}"


def row_of(session: AgentSession) -> dict[str, Any]:
    """A ``session.list`` row for a foreign session, in the shape DSH rows have (plus ``agent`` and its facts)."""
    plan = None if session.plan is None else [item.as_json() for item in session.plan]
    row: dict[str, Any] = {
        "sessionId": board_id(session.agent, session.id), "agent": session.agent, "agentSessionId": session.id,
        "live": session.turn_open is True, "state": "live" if session.turn_open else "ended",
        "lastEventAt": int(session.updated * 1000),
        "projections": {"asOfSeq": len(session.writes) * 3 - 1, "values": {"todos": plan}},
        "waiting": session.waiting, "writes": len(session.writes),
    }
    if session.turn_open is not None:
        row["turnOpen"] = session.turn_open
    if session.project is not None:
        row["cwd"] = session.project
    if session.title:
        row["title"] = session.title
    if session.parent is not None:
        row["parentId"] = board_id(session.agent, session.parent)
    return row


def refused_row(agent: str, path: Path, reason: str, updated: float) -> dict[str, Any]:
    """The row of a file its reader cannot read: the reason is shown, the file is not skipped."""
    return {"sessionId": board_id(agent, str(path)), "agent": agent, "agentSessionId": str(path), "live": False,
            "state": "refused", "lastEventAt": int(updated * 1000), "cwd": str(path.parent),
            "error": {"code": "unreadable", "message": reason}}


def synthetic_events(session: AgentSession) -> list[dict[str, Any]]:
    """A foreign session as events the page shows: per plan write a ``tool/call`` (the agent's tool and raw
    arguments), a ``todo/write`` (the list after it) and a ``tool/result`` (the raw result); seqs from 0."""
    events: list[dict[str, Any]] = []
    fallback = int(session.updated * 1000)

    def add(kind: str, at: int, data: dict[str, Any]) -> None:
        events.append({"type": kind, "seq": len(events), "time": at, "data": data})

    for index, write in enumerate(session.writes):
        at = fallback if write.at is None else int(write.at * 1000)
        call_id = f"plan-{index}"
        arguments = write.arguments if isinstance(write.arguments, str) else json.dumps(write.arguments,
                                                                                          ensure_ascii=False)
        result = write.result if isinstance(write.result, str) or write.result is None else json.dumps(
            write.result, ensure_ascii=False)
        add("tool/call", at, {"callId": call_id, "name": write.tool, "arguments": arguments})
        add("todo/write", at, {"todos": [item.as_json() for item in write.items]})
        add("tool/result", at, {"message": {"role": "tool", "toolCallId": call_id, "isError": False,
                                            "content": [{"type": "text", "text": result or ""}]}})
    return events


class _Source:
    """One chosen agent: its reader and the home read."""

    __slots__ = ("agent", "home", "reader")

    def __init__(self, agent: str, reader: Reader, home: Path) -> None:
        self.agent = agent
        self.reader = reader
        self.home = home


class AgentWatch:
    """The chosen agents' sessions, kept current by a poller thread (see the module docstring)."""

    def __init__(self, agents: Sequence[str], homes: Mapping[str, Path] | None = None, *,
                 interval: float = POLL_S) -> None:
        self.agents = list(dict.fromkeys(agents))
        self.interval = interval
        self.on_change: OnChange | None = None
        self._sources: list[_Source] = []
        for agent in self.agents:
            reader = base.reader(agent)
            home = (homes or {}).get(agent) or reader.default_home()
            self._sources.append(_Source(agent, reader, Path(home)))
        self._lock = threading.Lock()
        self._stats: dict[Path, Stat] = {}
        self._files: dict[Path, list[dict[str, Any]]] = {}
        self._sessions: dict[str, AgentSession] = {}
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="dsh-todo-agents-read")
        self._pending: Future[None] | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        if not self._sources:
            self._ready.set()
            return
        self._thread = threading.Thread(target=self._run, name="dsh-todo-agents-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- what the app asks ----------------------------------------------------------------------------------

    def rows(self, wait: float = FIRST_READ_S) -> list[dict[str, Any]]:
        """Every foreign session's row (after the first reading of every file, or ``wait`` seconds)."""
        self._ready.wait(wait)
        with self._lock:
            return [row for rows in self._files.values() for row in rows]

    def session(self, board_session_id: str) -> AgentSession | None:
        """The foreign session a board id names, as last read (``None``: not one of them)."""
        with self._lock:
            return self._sessions.get(board_session_id)

    def owns(self, board_session_id: str) -> bool:
        agent, separator, _rest = board_session_id.partition(SEPARATOR)
        return bool(separator) and agent in self.agents

    # -- the poller (its own thread) and the reads (the worker) ---------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._tick()
            except Exception:
                log.exception("reading the other agents' sessions failed; trying again")
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def _tick(self) -> None:
        if self._pending is not None and not self._pending.done():
            return  # one batch at a time: the files it has not read yet still differ at the next tick
        seen: dict[Path, tuple[str, Reader, Stat]] = {}
        for source in self._sources:
            try:
                paths = source.reader.session_paths(source.home)
            except OSError:
                paths = []
            for path in paths:
                stat = file_stamp(path)
                if stat is not None:
                    seen[path] = (source.agent, source.reader, stat)
        with self._lock:
            changed = [(path, agent, reader, stat) for path, (agent, reader, stat) in seen.items()
                       if self._stats.get(path) != stat]
            gone = [path for path in self._stats if path not in seen]
        if not changed and not gone:
            self._ready.set()
            return
        self._pending = self._pool.submit(self._read, changed, gone)

    def _read(self, changed: list[tuple[Path, str, Reader, Stat]], gone: list[Path]) -> None:
        fresh: dict[Path, tuple[Stat, list[dict[str, Any]], list[AgentSession]]] = {}
        for path, agent, reader, stat in changed:
            if self._stop.is_set():
                return
            try:
                sessions = reader.read(path)
                rows = [row_of(session) for session in sessions]
            except (ValueError, OSError) as exc:  # the reader's own refusal: its line is the reason shown
                sessions = []
                rows = [refused_row(agent, path, str(exc), stat[1] / 1e9)]
            except Exception as exc:  # a reader's defect: this file is refused, the others are still read
                log.warning("the %s reader failed on %s", agent, path, exc_info=True)
                sessions = []
                rows = [refused_row(agent, path, f"{agent}: cannot read {path.name}: {exc!r}", stat[1] / 1e9)]
            fresh[path] = (stat, rows, sessions)
        added: list[dict[str, Any]] = []
        removed: list[str] = []
        with self._lock:
            for path in gone:
                self._stats.pop(path, None)
                for row in self._files.pop(path, []):
                    removed.append(row["sessionId"])
                    self._sessions.pop(row["sessionId"], None)
            for path, (stat, rows, sessions) in fresh.items():
                self._stats[path] = stat
                before = {row["sessionId"]: row for row in self._files.get(path, [])}
                after = {row["sessionId"] for row in rows}
                for old in before.keys() - after:
                    removed.append(old)
                    self._sessions.pop(old, None)
                self._files[path] = rows
                for session in sessions:
                    self._sessions[board_id(session.agent, session.id)] = session
                # Only the rows that changed: one store holds every opencode session, and a change to one of them
                # must not send (and redraw on every board) all of them.
                added.extend(row for row in rows if before.get(row["sessionId"]) != row)
        first = not self._ready.is_set()
        self._ready.set()
        callback = self.on_change
        if callback is not None and not first and (added or removed):
            callback(added, removed)
