"""How ``dsh-todo run``, ``acp`` and ``web`` end on SIGTERM, SIGINT and SIGHUP (issue 22 item 9, issue 21's lifecycle).

Repro (issue 22 item 9): with a model request in flight, ``dsh-todo run`` died of SIGTERM (exit -15) and SIGHUP (exit
-1) and left its turn open: ``dsh-todo sessions`` then said ``recovered in memory (the log is unchanged): closed the
interrupted turn 1 with step/end, turn/end``. ``dsh-todo acp`` did the same, and ``dsh-todo web`` died of SIGHUP
(exit -1) and of a second signal while it was closing. Only SIGINT (``KeyboardInterrupt``) closed the turn.

Now every stop signal ends the work as the end of input does: a turn in progress ends ``aborted``, the log is
flushed and its writer lock let go (the reader's verdict is ``ok`` and the session is not live), later signals change
nothing, and the process exits with its documented status: ``run`` 128 + the signal's number (130 for SIGINT, as
Ctrl-C always gave, 143 for SIGTERM, 129 for SIGHUP), ``acp`` and ``web`` 0 (a server its client or person stopped).

Each case runs the real command in a subprocess (or in tmux, for a terminal's Ctrl-C) against a model endpoint on
127.0.0.1 that accepts the request and never answers, bounded by deadlines.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

from dsh_todo.jsonutil import dumps
from dsh_todo.logview import read_session
from tests import needs

WAIT = 20.0
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]
NAMES = ["TERM", "INT", "HUP"]
BURST = (signal.SIGINT, signal.SIGTERM, signal.SIGTERM, signal.SIGHUP)
ABORTED = {"kind": "aborted", "reason": {"kind": "user"}}
COMPLETED = {"kind": "completed"}


@contextmanager
def stalled_model() -> Iterator[socket.socket]:
    """An OpenAI-compatible endpoint on 127.0.0.1 that takes requests and never answers: a model request stays in
    flight, so the turn is in progress for as long as the test wants. Yields the listening socket."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(WAIT)
    try:
        yield server
    finally:
        server.close()


def model_env(server: socket.socket) -> dict[str, str]:
    port = server.getsockname()[1]
    return {**os.environ, "DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "PYTHONUNBUFFERED": "1"}


def wait_for_request(server: socket.socket) -> socket.socket:
    """The connection of the first model request, once its whole head has arrived (the turn is then in progress)."""
    conn, _ = server.accept()
    conn.settimeout(WAIT)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = conn.recv(65536)
        assert chunk, "the model request was not sent"
        received += chunk
    return conn


def spawn(argv: Sequence[str], cwd: Path, env: dict[str, str], stdin: int | IO[Any] = subprocess.PIPE
          ) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", *argv], cwd=cwd, env=env, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def signal_it(process: subprocess.Popen[bytes], signals: Sequence[int], stdin: str) -> None:
    """Close its stdin first when asked (``closed``), then send ``signals`` 5 ms apart."""
    if stdin == "closed" and process.stdin is not None:
        process.stdin.close()
        process.stdin = None  # so that communicate() does not flush it
    for number in signals:
        process.send_signal(number)
        time.sleep(0.005)


def finished(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """Its exit status and stderr, after checking stderr holds no traceback and no fatal error."""
    try:
        _, err = process.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"still running {WAIT} s after the signal: {err.decode(errors='replace')}") from None
    text = err.decode(errors="replace")
    assert "Traceback" not in text and "Fatal Python error" not in text, text
    return process.returncode, text


def ended(root: Path, reason: dict[str, Any]) -> None:
    """The only session under ``root``, read as every command reads it: stored as closed (no recovery), no writer
    alive, its last event the turn's end with ``reason``."""
    [log] = list(root.rglob("session*.jsonl*"))
    view = read_session(log.parent)
    assert view.health.ok, view.health.describe()
    assert view.closers == 0 and not view.live
    last = view.events[-1]
    assert last["type"] == "turn/end" and last["data"]["reason"] == reason, last


def kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(WAIT)


# -- dsh-todo run -----------------------------------------------------------------------------------------------


def run_in_flight(tmp_path: Path, server: socket.socket, stdin: str) -> subprocess.Popen[bytes]:
    """``dsh-todo run`` with its first model request in flight."""
    process = spawn(["run", "--root", str(tmp_path / "sessions"), "--session", "s1", "plan the release"], tmp_path,
                    model_env(server), stdin=subprocess.PIPE if stdin == "open" else subprocess.DEVNULL)
    try:
        wait_for_request(server)
    except BaseException:
        kill(process)
        raise
    return process


@pytest.mark.parametrize("stdin", ["open", "closed"])
@pytest.mark.parametrize("signum", SIGNALS, ids=NAMES)
def test_run_ends_its_turn_aborted_and_exits_128_plus_the_signal(tmp_path: Path, signum: int, stdin: str) -> None:
    with stalled_model() as server:
        process = run_in_flight(tmp_path, server, stdin)
        try:
            signal_it(process, [signum], stdin)
            code, err = finished(process)
        finally:
            kill(process)
    assert code == 128 + signum, err
    assert err.splitlines()[-1] == "turn ended: aborted", err
    ended(tmp_path / "sessions", ABORTED)


def test_run_ends_once_on_a_burst_of_signals(tmp_path: Path) -> None:
    """SIGINT, then SIGTERM twice and SIGHUP while it is closing: the first one decides, the others change nothing."""
    with stalled_model() as server:
        process = run_in_flight(tmp_path, server, "open")
        try:
            signal_it(process, BURST, "open")
            code, err = finished(process)
        finally:
            kill(process)
    assert code == 130, err
    ended(tmp_path / "sessions", ABORTED)


def test_run_ctrl_c_in_a_terminal(tmp_path: Path) -> None:
    """Ctrl-C on ``dsh-todo run`` in a real terminal (tmux) while the model is asked: exit 130, the turn aborted,
    nothing but our lines on stderr."""
    needs.program("tmux", "the Ctrl-C tests type into a real terminal")
    status, err_file = tmp_path / "status", tmp_path / "err"
    socket_name = f"dsh-todo-test-{os.getpid()}-run"
    tmux = ["tmux", "-L", socket_name]
    with stalled_model() as server:
        env = model_env(server)
        exports = " ".join(f"{name}={shlex.quote(env[name])}" for name in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"))
        command = (f"env {exports} {shlex.quote(sys.executable)} -m dsh_todo.cli run --root "
                   f"{shlex.quote(str(tmp_path / 'sessions'))} hello 2>{shlex.quote(str(err_file))}; "
                   f"echo $? > {shlex.quote(str(status))}")
        subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", "-c", str(tmp_path), command],
                       check=True, timeout=30)
        try:
            wait_for_request(server)
            subprocess.run([*tmux, "send-keys", "-t", "0", "C-c"], check=True, timeout=30)
            deadline = time.monotonic() + WAIT
            while not status.exists() or not status.read_text().strip():
                assert time.monotonic() < deadline, "run did not stop on Ctrl-C"
                time.sleep(0.05)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
    err = err_file.read_text()
    assert status.read_text().strip() == "130", err
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    ended(tmp_path / "sessions", ABORTED)


# -- dsh-todo acp -----------------------------------------------------------------------------------------------


def rpc(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"


class Acp:
    """``dsh-todo acp`` in a subprocess, spoken to line by line."""

    def __init__(self, tmp_path: Path, env: dict[str, str], script: Path | None = None) -> None:
        argv = ["acp", "--root", str(tmp_path / "sessions")]
        if script is not None:
            argv += ["--script", str(script)]
        self.process = spawn(argv, tmp_path, env)
        self.cwd = tmp_path

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()

    def answer(self, request_id: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, "the agent closed stdout"
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message

    def new_session(self) -> str:
        self.send(rpc(0, "initialize", {"protocolVersion": 1}))
        self.answer(0)
        self.send(rpc(1, "session/new", {"cwd": str(self.cwd), "mcpServers": []}))
        session_id: str = self.answer(1)["result"]["sessionId"]
        return session_id

    def prompt(self, session_id: str, request_id: int = 2) -> None:
        self.send(rpc(request_id, "session/prompt", {"sessionId": session_id,
                                                      "prompt": [{"type": "text", "text": "plan the release"}]}))


@pytest.mark.parametrize("stdin", ["open", "closed"])
@pytest.mark.parametrize("signum", SIGNALS, ids=NAMES)
def test_acp_ends_a_prompt_in_progress_aborted_and_exits_0(tmp_path: Path, signum: int, stdin: str) -> None:
    with stalled_model() as server:
        agent = Acp(tmp_path, model_env(server))
        try:
            agent.prompt(agent.new_session())
            wait_for_request(server)
            signal_it(agent.process, [signum], stdin)
            code, err = finished(agent.process)
        finally:
            kill(agent.process)
    assert code == 0, err
    ended(tmp_path / "sessions", ABORTED)


@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGINT], [signal.SIGHUP], list(BURST)],
                         ids=["TERM", "INT", "HUP", "burst"])
def test_acp_idle_ends_with_its_last_turn_completed_and_exits_0(tmp_path: Path, signals: list[int]) -> None:
    """Between prompts there is no turn to end: the last one stays ``completed``, the log flushed and let go."""
    script = tmp_path / "script.json"
    script.write_text(dumps([{"text": "Planned."}]))
    agent = Acp(tmp_path, dict(os.environ), script)
    try:
        agent.prompt(agent.new_session())
        assert agent.answer(2)["result"] == {"stopReason": "end_turn"}
        signal_it(agent.process, signals, "open")
        code, err = finished(agent.process)
    finally:
        kill(agent.process)
    assert code == 0, err
    ended(tmp_path / "sessions", COMPLETED)


# -- dsh-todo web -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGINT], [signal.SIGHUP], list(BURST)],
                         ids=["TERM", "INT", "HUP", "burst"])
def test_web_stops_cleanly_and_exits_0(tmp_path: Path, signals: list[int]) -> None:
    """SIGTERM and SIGHUP stop the page's server as Ctrl-C does; a burst stops it once."""
    process = spawn(["web", "--port", "0", "--root", str(tmp_path / "sessions")], tmp_path, dict(os.environ))
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith(b"http://127.0.0.1:")
        signal_it(process, signals, "open")
        code, err = finished(process)
    finally:
        kill(process)
    assert code == 0, err
