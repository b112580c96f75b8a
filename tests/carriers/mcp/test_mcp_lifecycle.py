"""How ``dsh-todo mcp`` ends, the way real clients end it, and what it says about where the session is (issue 21).

Repro (issue 21 item 1): the server handled only ``KeyboardInterrupt``. Codex closes stdin and sends SIGTERM in the
same millisecond, Gemini CLI sends SIGTERM with stdin open, opencode closes stdin and kills 10 ms later, Claude Code
sends SIGINT and SIGTERM 100 ms later: every session ended ``interrupted`` (``sessions`` said ``recovered in memory …
closed the interrupted turn``), SIGTERM and SIGHUP killed the process (exit -15, -1), and Ctrl-C in a terminal aborted
Python 3 times out of 4 (``Fatal Python error: _enter_buffered_busy``, exit 134). Item 4: a client that pipelined two
``tools/call`` s and closed stdin got ``-32000 Connection closed`` for both while the second write was in the log.

Each case runs the real command in a subprocess (or in tmux, for a terminal's Ctrl-C), bounded by deadlines.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.standard import open_runtime
from tests import needs
from tests.carriers.mcp.test_mcp_stdio_wire import Wire

needs.module("mcp")

TODO = b'{"todos":[{"content":"write the plan","status":"in_progress"},{"content":"ship","status":"pending"}]}'
WAIT = 20.0


def call_line(request_id: int, arguments: bytes = TODO) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"todo_write","arguments":%s}}' % (
        request_id, arguments)


def last_turn_end(root: Path) -> dict[str, Any]:
    """The only session under ``root``, read back: its last event must be the turn's end."""
    [log] = list(root.rglob("session*.jsonl*"))
    ctx = open_runtime(root)
    try:
        stored = ctx.session_persistence.read(log.parent.name)
    finally:
        ctx.dispose()
    assert stored.torn is None
    event: dict[str, Any] = stored.events[-1]
    return event


def verdict(root: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "sessions", "--root", str(root)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [row] = done.stdout.splitlines()
    return row.split("\t")[-1]


def ended_cleanly(wire: Wire, root: Path) -> None:
    code = wire.process.wait(WAIT)
    err = wire.stderr_text()
    assert code == 0, err
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    end = last_turn_end(root)
    assert end["type"] == "turn/end" and end["data"]["reason"] == {"kind": "completed"}
    assert verdict(root) == "ok"


@pytest.fixture
def served(tmp_path: Path) -> tuple[Wire, Path]:
    cwd = tmp_path / "project"
    cwd.mkdir()
    wire = Wire(tmp_path / "sessions", cwd)
    wire.handshake("lifecycle")
    answer = wire.ask(call_line(1))
    assert answer["result"]["content"][0]["text"] == "Updated todo list: 1 pending, 1 in progress, 0 completed."
    return wire, tmp_path / "sessions"


@pytest.mark.parametrize("stdin", ["open", "closed"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["TERM", "INT", "HUP"])
def test_a_signal_ends_the_turn_completed_and_exits_0(served: tuple[Wire, Path], signum: int, stdin: str) -> None:
    wire, root = served
    try:
        if stdin == "closed":
            assert wire.process.stdin is not None
            wire.process.stdin.close()
        wire.process.send_signal(signum)
        ended_cleanly(wire, root)
    finally:
        wire.kill()


def test_signals_in_a_burst_end_it_once(served: tuple[Wire, Path]) -> None:
    """Claude Code's way: SIGINT, then SIGTERM shortly after, while the server is already ending."""
    wire, root = served
    try:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGTERM, signal.SIGHUP):
            wire.process.send_signal(signum)
            time.sleep(0.005)
        ended_cleanly(wire, root)
    finally:
        wire.kill()


def test_pipelined_calls_then_the_end_of_input_are_answered_with_their_results(tmp_path: Path) -> None:
    """Item 4: both calls were written, so both are answered with their results, not ``Connection closed``."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    wire = Wire(tmp_path / "sessions", cwd)
    try:
        wire.handshake("pipelining")
        second = (b'{"todos":[{"content":"write the plan","status":"completed"},'
                  b'{"content":"ship","status":"in_progress"}]}')
        assert wire.process.stdin is not None
        wire.process.stdin.write(call_line(1) + b"\n" + call_line(2, second) + b"\n")
        wire.process.stdin.flush()
        code, rest = wire.close()
        answers = [json.loads(line) for line in rest.splitlines()]
        assert code == 0
        assert [answer["id"] for answer in answers] == [1, 2]
        assert [answer["result"]["content"][0]["text"] for answer in answers] == [
            "Updated todo list: 1 pending, 1 in progress, 0 completed.",
            "Updated todo list: 0 pending, 1 in progress, 1 completed."]
        assert last_turn_end(tmp_path / "sessions")["data"]["reason"] == {"kind": "completed"}
    finally:
        wire.kill()


def test_the_session_is_announced_once_with_a_command_that_shows_it(served: tuple[Wire, Path]) -> None:
    """Item 5: no client shows the model (or the person) the result's ``_meta``; the server says on stderr, once,
    where the session is and the command that shows its plan, and that command runs as printed."""
    wire, root = served
    wire.ask(call_line(2))
    code, _ = wire.close()
    assert code == 0
    lines = [line for line in wire.stderr_text().splitlines() if line.startswith("dsh-todo mcp: session ")]
    assert len(lines) == 1, wire.stderr_text()
    command = lines[0].split("show its plan: ", 1)[1]
    words = shlex.split(command)
    assert words[:4] == ["dsh-todo", "plan", "--root", str(root.resolve())]
    shown = subprocess.run([sys.executable, "-m", "dsh_todo.cli", *words[1:]], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "write the plan" in shown.stdout and "ship" in shown.stdout


PROBE = """
import atexit, sys
atexit.register(lambda: print("SDK loaded:", any(m.split(".")[0] in ("mcp", "mcp_types", "pydantic")
                                                 for m in sys.modules), file=sys.stderr))
from dsh_todo.cli import main
raise SystemExit(main())
"""


@pytest.mark.parametrize("unusual", [False, True], ids=["plain", "unusual-request"])
def test_a_plain_session_never_imports_the_sdk(tmp_path: Path, unusual: bool) -> None:
    """Item 3: importing the SDK took about a second before ``initialize`` was answered. A client that speaks the
    handshake and the hot methods never makes the server import it; the first request the direct path declines
    does, and is answered by the SDK (``resources/list``: ``Method not found``)."""
    root = tmp_path / "sessions"
    process = subprocess.Popen([sys.executable, "-c", PROBE, "mcp", "--root", str(root)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    lines = [b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
             b'"capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}',
             b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
             b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', call_line(2)]
    if unusual:
        lines.append(b'{"jsonrpc":"2.0","id":3,"method":"resources/list"}')
    out, err = process.communicate(b"\n".join(lines) + b"\n", timeout=60)
    answers = {answer["id"]: answer for answer in map(json.loads, out.splitlines())}
    assert process.returncode == 0, err
    assert answers[2]["result"]["content"][0]["text"] == "Updated todo list: 1 pending, 1 in progress, 0 completed."
    assert f"SDK loaded: {unusual}".encode() in err
    if unusual:
        assert answers[3]["error"]["code"] == -32601


@pytest.mark.parametrize("attempt", range(4))
def test_ctrl_c_in_a_terminal_ends_it_cleanly(tmp_path: Path, attempt: int) -> None:
    """Ctrl-C on ``dsh-todo mcp`` in a real terminal (tmux): exit 0, the turn completed, no ``Fatal Python
    error`` (which 3 of 4 tries gave when a thread was inside the buffered stdin's read at shutdown)."""
    needs.program("tmux", "the Ctrl-C tests type into a real terminal")
    root = tmp_path / "sessions"
    status = tmp_path / "status"
    socket = f"dsh-todo-test-{os.getpid()}-{attempt}"
    command = (f"{shlex.quote(sys.executable)} -m dsh_todo.cli mcp --root {shlex.quote(str(root))} "
               f"2>{shlex.quote(str(tmp_path / 'err'))}; echo $? > {shlex.quote(str(status))}")
    tmux = ["tmux", "-L", socket]
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", "-c", str(tmp_path), command],
                   check=True, timeout=30)
    try:
        deadline = time.monotonic() + WAIT
        while not (tmp_path / "err").exists() or b"serving" not in (tmp_path / "err").read_bytes():
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        initialize = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                      '"capabilities":{},"clientInfo":{"name":"tty","version":"1"}}}')
        for line in (initialize, call_line(1).decode()):
            subprocess.run([*tmux, "send-keys", "-t", "0", "-l", line], check=True, timeout=30)
            subprocess.run([*tmux, "send-keys", "-t", "0", "Enter"], check=True, timeout=30)
        while not list(root.rglob("session*.jsonl*")):
            assert time.monotonic() < deadline, "the call was not logged"
            time.sleep(0.05)
        time.sleep(0.1)
        subprocess.run([*tmux, "send-keys", "-t", "0", "C-c"], check=True, timeout=30)
        while not status.exists() or not status.read_text().strip():
            assert time.monotonic() < deadline, "the server did not stop on Ctrl-C"
            time.sleep(0.05)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
    err = (tmp_path / "err").read_text()
    assert status.read_text().strip() == "0", err
    assert "Fatal Python error" not in err and "Traceback" not in err, err
    assert last_turn_end(root)["data"]["reason"] == {"kind": "completed"}
