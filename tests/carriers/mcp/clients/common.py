"""What every framework test here plays through its own MCP client against ``dsh-todo mcp``, and what it must leave.

One agent run, scripted in the framework's own model kind: an accepted list (:data:`ACCEPTED`), then a call our
registry refuses (:data:`REFUSED`, a status the schema does not allow), then a final text. Each test then asserts
what the framework handed its model (our tool, our result texts) and, through :func:`stored_run`, what the server
left on disk and in the process table.

:class:`ServerWatch` is how a test sees the server process a framework started: every framework here spawns it
through the MCP SDK's stdio client, which calls :func:`anyio.open_process`; the watch wraps that call (and
``os.kill``/``os.killpg``) to keep the process object and each signal sent to it, without changing either.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.jsonutil import dumps, loads
from dsh_todo.logview import SessionView, list_sessions, read_session
from dsh_todo.testing import memory_context
from tests.adapters.scenario import CANONICAL, FINAL_TEXT, RAW, TEXT

__all__ = ["ACCEPTED", "CANONICAL", "DEADLINE", "FINAL_TEXT", "REFUSED", "TEXT_OF", "ServerWatch", "arguments",
           "assert_exited", "native_tool", "server_command", "stored_run", "stored_session", "watch_server"]

ACCEPTED = RAW["c1"]
"""The accepted call's arguments, as the model writes them (compact JSON, untrimmed contents)."""
REFUSED = RAW["c4"]
"""A call the registry refuses before the tool runs: ``status`` is not one the schema allows."""
TEXT_OF = {ACCEPTED: TEXT["c1"], REFUSED: TEXT["c4"]}
"""Exactly what the model must read back for each call (SPEC §2, §4.1)."""
DEADLINE = 60
"""Seconds one whole run may take (start, three model turns, two calls, shutdown) before the test fails."""


def arguments(raw: str) -> dict[str, Any]:
    """The call's arguments as a JSON object, for frameworks whose fake model hands the loop objects, not text."""
    value = loads(raw)
    assert isinstance(value, dict)
    return value


def native_tool() -> dict[str, Any]:
    """``todo_write`` as the native registry offers it: ``name``, ``description``, ``parameters`` (our schema)."""
    with memory_context() as ctx:
        [schema] = ctx.tools.schemas()
    return loads(dumps(schema))


def server_command(root: Path) -> tuple[str, list[str]]:
    """``dsh-todo mcp --root ROOT``: the installed console script beside this interpreter, as a user's config names
    it (``command``, ``args``)."""
    script = Path(sys.executable).with_name("dsh-todo")
    assert script.exists(), f"{script} is missing: the project is not installed in this environment"
    return str(script), ["mcp", "--root", str(root)]


@dataclass
class ServerWatch:
    """The server processes spawned while the watch was installed, and the signals sent to them (with the time
    since that process started)."""

    processes: list[Any] = field(default_factory=list)
    started: list[float] = field(default_factory=list)
    signals: list[tuple[int, str, float]] = field(default_factory=list)
    stdin_closed: list[tuple[int, float]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"stdin closed (pid, s after spawn): {self.stdin_closed}; signals sent: {self.signals}"

    def note_signal(self, target: int, sig: int) -> None:
        for process, started in zip(self.processes, self.started, strict=True):
            if target == process.pid and sig != 0:
                self.signals.append((process.pid, signal.Signals(sig).name, time.monotonic() - started))

    @property
    def process(self) -> Any:
        assert len(self.processes) == 1, f"expected one server process, the framework started {len(self.processes)}"
        return self.processes[0]


@contextmanager
def watch_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerWatch]:
    """Install a :class:`ServerWatch` for the ``with`` block (see the module's docstring)."""
    watch = ServerWatch()
    real_open, real_kill, real_killpg = anyio.open_process, os.kill, os.killpg

    async def open_process(command: Any, **kwargs: Any) -> Any:
        process = await real_open(command, **kwargs)
        started = time.monotonic()
        watch.processes.append(process)
        watch.started.append(started)
        stdin = process.stdin
        real_aclose = stdin.aclose

        async def aclose() -> None:
            watch.stdin_closed.append((process.pid, time.monotonic() - started))
            await real_aclose()

        stdin.aclose = aclose
        return process

    def kill(pid: int, sig: int) -> None:
        watch.note_signal(pid, sig)
        real_kill(pid, sig)

    def killpg(pgid: int, sig: int) -> None:
        watch.note_signal(pgid, sig)
        real_killpg(pgid, sig)

    monkeypatch.setattr(anyio, "open_process", open_process)
    monkeypatch.setattr(os, "kill", kill)
    monkeypatch.setattr(os, "killpg", killpg)
    yield watch
    monkeypatch.setattr(anyio, "open_process", real_open)
    monkeypatch.setattr(os, "kill", real_kill)
    monkeypatch.setattr(os, "killpg", real_killpg)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (the SDK starts the server as a session leader: pgid == pid)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stored_run(root: Path, watch: ServerWatch) -> SessionView:
    """What the run left: the server exited 0 by itself and nothing of its process group is left; the root holds
    one session, read by dsh_todo's own reader with the verdict ``ok`` (no recovery: its turn ended ``completed``)
    and the accepted list standing; its writer lock is released. Returns the session as the reader shows it."""
    process = watch.process
    assert_exited(process.returncode, process.pid, str(watch))
    return stored_session(root)


def assert_exited(returncode: int | None, pid: int, why: str = "") -> None:
    """The server exited 0 and no process of its group is left."""
    assert returncode == 0, f"the server exited {returncode}; {why}"
    assert not group_alive(pid), "a process of the server's group is still running"


def stored_session(root: Path, calls: tuple[str, ...] = (ACCEPTED, REFUSED)) -> SessionView:
    """The one session under ``root``, as :func:`stored_run` requires it; ``calls`` are the arguments of the
    ``tool/call`` events it must hold, in order (a client that checks the schema itself never sends ``REFUSED``),
    each advertised by an ``assistant/message`` just before it (DSH 0.2 refuses to resume a log without)."""
    [listed] = list_sessions(JsonlBackend(root))
    assert listed.session_id is not None
    view = read_session(listed.session_id, root=root)
    assert view.health.describe() == "ok", view.health
    assert view.closers == 0 and not view.live
    events = view.events
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "completed"}
    assert [e["type"] for e in events].count("turn/start") == 1
    assert [e["data"]["arguments"] for e in events if e["type"] == "tool/call"] == list(calls)
    advertised = [(before["type"], before["data"]["step"], before["data"].get("message", {}).get("content"))
                  for before, event in pairwise(events) if event["type"] == "tool/call"]
    assert advertised == [("assistant/message", e["data"]["step"],
                           [{"type": "tool-call", "id": e["data"]["callId"], "name": e["data"]["name"],
                             "arguments": e["data"]["arguments"]}])
                          for e in events if e["type"] == "tool/call"]
    assert view.plan == CANONICAL
    assert [e["data"]["todos"] for e in events if e["type"] == "todo/write"] == [CANONICAL]
    return view
