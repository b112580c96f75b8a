"""``dsh-todo web``: prints its URL once it answers, serves the root's sessions, stops cleanly on Ctrl+C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Context
from dsh_todo.standard import open_runtime
from tests.carriers.web.conftest import build_fixture_session


def web_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsh_todo.cli", "web", *args]


def test_web_serves_the_root_and_prints_its_url_once_ready(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    ctx = open_runtime(root)
    build_fixture_session(ctx)
    ctx.dispose()
    process = subprocess.Popen(web_command("--root", str(root), "--port", "0"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        with urllib.request.urlopen(url + "?session=fx-alpha", timeout=20) as response:  # answering already
            assert b'<script type="module" src="/static/app.js">' in response.read()
        body = json.dumps({"type": "client-request", "rpcId": "r", "method": "session.history",
                           "payload": {"sessionId": "fx-alpha"}}).encode()
        request = urllib.request.Request(url + "api/session.history", data=body,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=20) as response:
            value = json.loads(response.read())["result"]["value"]
        assert value["projections"]["values"]["todos"][1] == {"content": "实现 fixture 样本", "status": "in_progress"}
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    result = subprocess.run(web_command("--root", str(tmp_path), "--host", "0.0.0.0", "--port", "0"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "pass --token T" in result.stderr


@pytest.mark.slow
def test_demo_web_serves_the_running_demo(tmp_path: Path) -> None:
    """``dsh-todo demo --web``: the session answers as soon as the URL is printed, and the page shows the live
    session's plan while the scripted turns run (paced at 0.4 s a reply, the plan stands for five replies)."""
    command = [sys.executable, "-m", "dsh_todo.cli", "demo", "--web", "--pace", "0.4", "--root", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True, cwd=tmp_path)
    try:
        assert process.stdout is not None
        assert "SCRIPTED" in process.stdout.readline()
        line = process.stdout.readline().strip()
        assert line.startswith("watch it live: http://127.0.0.1:")
        page = line.removeprefix("watch it live: ")
        base, _, query = page.partition("?session=")

        def history() -> dict[str, Any]:
            body = json.dumps({"type": "client-request", "rpcId": "r", "method": "session.history",
                               "payload": {"sessionId": query}}).encode()
            request = urllib.request.Request(base + "api/session.history", data=body,
                                             headers={"content-type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                result: dict[str, Any] = json.loads(response.read())["result"]
                return result

        first = history()  # the printed URL names a session that already exists: no 404, no retry
        assert first["ok"], first
        plan = first["value"]["projections"]["values"]["todos"]
        deadline = time.monotonic() + 60
        while not plan and time.monotonic() < deadline:
            time.sleep(0.05)
            plan = history()["value"]["projections"]["values"]["todos"]
        assert plan, "the page never showed a standing plan while the demo ran"
        while not process.stdout.readline().startswith("done; the page stays up"):  # then it serves until Ctrl-C
            assert process.poll() is None
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_demo_web_prints_its_url_only_once_the_session_exists(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The order itself, in process: a URL printed before ``sessions.create`` 404s for whoever opens it first."""
    import dsh_todo.carriers.web as web
    from dsh_todo.carriers.terminal import PlanPrinter
    from dsh_todo.cli import main

    served: list[Context] = []
    listed_at_print: list[list[str]] = []

    def serve(ctx: Context, **_options: Any) -> tuple[str, Callable[[], None]]:
        served.append(ctx)
        return "http://127.0.0.1:9/", lambda: None

    say = PlanPrinter.say

    def watching_say(self: PlanPrinter, text: str) -> None:
        if text.startswith("watch it live: "):
            listed_at_print.append([session.id for session in served[0].sessions.list()])
        say(self, text)
        if text.startswith("done; the page stays up"):  # the page serves until Ctrl-C: press it
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(web, "serve_in_background", serve)
    monkeypatch.setattr(PlanPrinter, "say", watching_say)
    assert main(["demo", "--web", "--pace", "0", "--root", str(tmp_path)]) == 0
    assert len(listed_at_print) == 1 and len(listed_at_print[0]) == 1
    assert listed_at_print[0][0].startswith("demo-")
