"""``dsh-todo web --root DIR`` where DIR does not exist: said once on stderr, and the page waits for it (issue 23).

The choice (documented in the README's command table): keep serving. ``web`` is a page a person leaves open, often
started before the agent whose ``mcp``/``run`` creates the root; exiting would make them restart it in order.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from dsh_todo.standard import open_runtime


def session_ids(url: str) -> list[str]:
    body = json.dumps({"type": "client-request", "rpcId": "l", "method": "session.list", "payload": {}}).encode()
    request = urllib.request.Request(url + "api/session.list", data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=20) as response:
        listing = json.loads(response.read())["result"]["value"]
    return [row["sessionId"] for row in listing["sessions"]]


def test_a_missing_root_is_said_and_waited_for(tmp_path: Path) -> None:
    """Repro: ``dsh-todo web --root ./typo`` served an empty list without a word, so a mistyped root looked like a
    root with no sessions."""
    root = tmp_path / "not-yet"
    process = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "web", "--root", str(root), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None and process.stderr is not None
        url = process.stdout.readline().strip()
        assert process.stderr.readline().rstrip("\n") == (
            f"dsh-todo web: the session root {root} does not exist yet; its sessions will show once something "
            "writes there")
        assert session_ids(url) == []
        ctx = open_runtime(root)
        try:
            ctx.sessions.create("late", cwd="/p").append("turn/start", {"turn": 1})
        finally:
            ctx.dispose()
        assert "late" in session_ids(url)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
