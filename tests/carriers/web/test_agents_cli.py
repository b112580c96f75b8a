"""``dsh-todo web --idle-minutes N``: after how long a card with an item in progress and no write says "idle".

Repro (before): the threshold was fixed at 10 minutes on the command line (``run_web`` took ``idle_minutes``, the
command never passed it), so a person whose agents think for 20 minutes between writes saw every card flagged.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from dsh_todo.carriers.web import app
from dsh_todo.commands import web

pytestmark = pytest.mark.timeout(60)


def test_the_flag_reaches_run_web(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dsh_todo.carriers.web.server as server
    from dsh_todo.cli import main

    seen: dict[str, object] = {}

    def run_web(storage: object, **options: object) -> int:
        seen.update(options)
        return 0

    monkeypatch.setattr(server, "run_web", run_web)
    assert main(["web", "--root", str(tmp_path), "--idle-minutes", "2.5"]) == 0
    assert seen["idle_minutes"] == 2.5
    assert main(["web", "--root", str(tmp_path)]) == 0
    assert seen["idle_minutes"] == app.IDLE_MINUTES == web.IDLE_MINUTES


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf", "nan"])
def test_a_threshold_that_is_not_a_positive_number_is_refused(value: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_todo.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["web", "--root", str(tmp_path), "--idle-minutes", value])
    assert exited.value.code == 2
    assert "--idle-minutes" in capsys.readouterr().err


def test_the_page_is_told_the_threshold(tmp_path: Path) -> None:
    """The page decides "idle" with its own clock from ``idleAfterMs`` in the ``session.list`` answer."""
    command = [sys.executable, "-m", "dsh_todo.cli", "web", "--root", str(tmp_path), "--port", "0",
               "--idle-minutes", "0.5"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        body = json.dumps({"type": "client-request", "rpcId": "l", "method": "session.list", "payload": {}}).encode()
        request = urllib.request.Request(url + "api/session.list", data=body,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=20) as response:
            assert json.loads(response.read())["result"]["value"]["idleAfterMs"] == 30_000
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
