"""A collector that refuses, fails or never answers costs one line on stderr and no wait at exit (issue 34, item 6).

Repro: ``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 dsh-todo run "plan it" --script s.json --telemetry full``
(nothing listens there) printed the SDK's retry lines (``Transient error HTTPConnectionPool(host='127.0.0.1',
port=9): Max retries exceeded … retrying in 0.86s.``, 4 or 5 of them, and about 7 every 8 s in an MCP server's
stderr), then ``provider shutdown exceeded 3000ms``: every exit waited the whole drain bound (a one-turn ``run``
3.4 s instead of 0.19 s), and that bound could only be set in a composition file. Now the first failure is said once,
in our words; the SDK's lines go to ``--debug``; a collector known to be down is not waited for at exit; and
``DSH_TODO_TELEMETRY_SHUTDOWN_TIMEOUT_MILLIS`` sets the bound for one that never answers.

Each case runs the real command in a subprocess against a loopback port; promptness is the subprocess's timeout
(generous, far below what a wait on the collector would cost), not a timed assertion.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests import needs

needs.module("opentelemetry.sdk")

from dsh_todo.harness.telemetry.collector import SDK_LOGGERS, Watch
from tests.cli.test_telemetry import SCRIPT, environment

PROMPT_S = 25
"""The subprocess's deadline: a run that waited on the collector (retries over minutes, a 10-minute bound) fails it."""
OURS = ("telemetry full: ", "tools mounted: ", "session ")
"""The lines a ``run`` with telemetry says whatever the collector does: the disclosure, the tools, the session."""


@pytest.fixture
def refusing() -> Iterator[str]:
    """A loopback port that refuses connections: bound, never listening (so nobody else takes it meanwhile)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def failing() -> Iterator[str]:
    """A collector that answers every export ``500 Internal Server Error``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A collector that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def run(tmp_path: Path, base: str, **env: str) -> list[str]:
    """``dsh-todo run`` of the scripted turn with ``--telemetry full`` to ``base``; what stderr says about
    telemetry beyond the disclosure. The turn itself must go as without telemetry."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "run", "plan it", "--script", str(script),
                           "--root", str(tmp_path / "root"), "--single-active", "--telemetry", "full"],
                          capture_output=True, text=True, timeout=PROMPT_S, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          env=environment(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=base, **env))
    assert done.returncode == 0, done.stderr
    assert "DONE" in done.stdout
    return [line for line in done.stderr.splitlines() if not line.startswith(OURS)]


def unreachable(base: str, reason: str) -> list[list[str]]:
    return [[f"telemetry: cannot export to the collector at {base}/v1/{signal}: {reason}; telemetry is dropped "
             "until it answers"] for signal in ("logs", "traces")]


# A 10-minute bound and a 10-minute export timeout: the exit must not wait for a collector known to be down.
DOWN = {"DSH_TODO_TELEMETRY_SHUTDOWN_TIMEOUT_MILLIS": "600000", "OTEL_EXPORTER_OTLP_TIMEOUT": "600"}


def test_a_refusing_collector_is_said_once_and_not_waited_for(tmp_path: Path, refusing: str) -> None:
    assert run(tmp_path, refusing, **DOWN) in unreachable(refusing, "Connection refused")


def test_a_collector_answering_500_is_said_once_and_not_waited_for(tmp_path: Path, failing: str) -> None:
    assert run(tmp_path, failing, **DOWN) in unreachable(failing, "answered Internal Server Error")


def test_a_collector_that_never_answers_costs_the_bound_the_variable_sets(tmp_path: Path, blackhole: str) -> None:
    """The export in flight at exit waits for an answer that never comes: the drain gives up at the bound set by
    the variable (1 s, where the export itself may take 10 minutes), says so once, and the process ends."""
    lines = run(tmp_path, blackhole, DSH_TODO_TELEMETRY_SHUTDOWN_TIMEOUT_MILLIS="1000",
                OTEL_EXPORTER_OTLP_TIMEOUT="600")
    assert lines == ["session-telemetry-otel: provider shutdown exceeded 1000ms; records still queued are lost"]


def test_a_bad_bound_is_refused_in_one_line(tmp_path: Path, refusing: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "run", "plan it", "--script", str(script),
                           "--root", str(tmp_path / "root"), "--telemetry", "full"],
                          capture_output=True, text=True, timeout=PROMPT_S, cwd=tmp_path,
                          env=environment(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=refusing,
                                          DSH_TODO_TELEMETRY_SHUTDOWN_TIMEOUT_MILLIS="soon"),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("DSH_TODO_TELEMETRY_SHUTDOWN_TIMEOUT_MILLIS must be a positive finite "
                                        "number no greater than 2147483647, got 'soon'"), done.stderr
    assert "Traceback" not in done.stderr


def test_down_is_said_again_only_after_it_recovered(caplog: pytest.LogCaptureFixture) -> None:
    watch = Watch()
    with caplog.at_level(logging.WARNING, logger="dsh_todo.telemetry"):
        watch.failed("http://c/v1/logs", "Connection refused")
        watch.failed("http://c/v1/traces", "Connection refused")
        watch.failed("http://c/v1/logs", "Connection refused")
        watch.answered("http://c/v1/logs")
        watch.failed("http://c/v1/logs", "timed out")  # traces still down: the same episode
        watch.answered("http://c/v1/logs")
        watch.answered("http://c/v1/traces")
        assert not watch.down
        watch.failed("http://c/v1/traces", "answered Bad Gateway")
    assert [r.getMessage() for r in caplog.records] == [
        "telemetry: cannot export to the collector at http://c/v1/logs: Connection refused; telemetry is dropped "
        "until it answers",
        "telemetry: cannot export to the collector at http://c/v1/traces: answered Bad Gateway; telemetry is "
        "dropped until it answers"]


def test_another_pipelines_sdk_lines_are_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    """Only our pipeline's threads are quieted: an application's own exporter keeps its lines."""
    Watch()
    with caplog.at_level(logging.WARNING):
        logging.getLogger(SDK_LOGGERS[1]).warning("Transient error %s encountered while exporting span batch", "x")
    assert [r.getMessage() for r in caplog.records] == ["Transient error x encountered while exporting span batch"]
