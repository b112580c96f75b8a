"""``dsh-todo demo --web`` keeps the page up after the demo ends, until Ctrl-C, whatever stdin is (issue 23)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

DONE = "done; the page stays up until you press Ctrl-C (or the process gets SIGTERM)"


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_page_stays_up_after_the_demo_when_stdin_is_no_terminal(tmp_path: Path, stop: int) -> None:
    """Repro: ``dsh-todo demo --web </dev/null`` (an IDE's run button, a script, ``nohup``) stopped the page the
    moment the scripted turns ended, without a word: whoever opened the printed URL found nothing there. Only a
    terminal on stdin kept it up."""
    command = [sys.executable, "-m", "dsh_todo.cli", "demo", "--web", "--pace", "0.01", "--root", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True, cwd=tmp_path)
    try:
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, f"the demo ended: {lines[-3:]} {process.stderr.read() if process.stderr else ''}"
            lines.append(line.rstrip("\n"))
            if lines[-1] == DONE:
                break
        url = next(line for line in lines if line.startswith("watch it live: ")).removeprefix("watch it live: ")
        assert "look at it again:" in lines  # the commands are printed before the wait, not after Ctrl-C
        time.sleep(1.0)
        assert process.poll() is None, "the page went down after the demo"
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
        process.send_signal(stop)
        assert process.wait(timeout=20) == 0
        assert "Traceback" not in (process.stderr.read() if process.stderr else "")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
