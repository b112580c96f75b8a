"""Our side of the interop tests: ``dsh-todo`` run as a person runs it (a subprocess of this interpreter), reading
and writing under DSH's own JSONL root (``$DSH_HOME/sessions``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["dsh_todo", "events", "listing", "new_session_id", "plan", "run_script", "web_rows"]

SECONDS = 120


def dsh_todo(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``dsh-todo ARGS`` (``python -m dsh_todo.cli``), finished; its output and exit status, never raised."""
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=SECONDS, stdin=subprocess.DEVNULL)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args[3:]} exited {done.returncode}: {done.stderr.strip()[-1500:]}"
    return done.stdout


def plan(root: Path, session_id: str | None = None, *, latest: bool = False) -> Any:
    """``dsh-todo plan --json --root ROOT ID`` (or ``--latest``), parsed."""
    target = ["--latest"] if latest else [str(session_id)]
    return json.loads(_ok(dsh_todo("plan", "--json", "--root", root, *target)))


def events(root: Path, session_id: str) -> list[dict[str, Any]]:
    """``dsh-todo events --root ROOT ID``, one parsed event per line (recovery's closers last)."""
    return [json.loads(line) for line in _ok(dsh_todo("events", "--root", root, session_id)).splitlines()]


def listing(root: Path) -> dict[str, str]:
    """``dsh-todo sessions --root ROOT``: each listed session's verdict (its tab-separated line's last field)."""
    out = _ok(dsh_todo("sessions", "--root", root))
    return {line.split("\t")[0]: line.split("\t")[-1] for line in out.splitlines() if "\t" in line}


def new_session_id() -> str:
    """An id shaped like DSH's own (``session-<uuid4>``)."""
    return f"session-{uuid.uuid4()}"


def run_script(root: Path, cwd: Path, session_id: str, replies: Sequence[dict[str, Any]], prompt: str,
               *extra: str) -> subprocess.CompletedProcess[str]:
    """``dsh-todo run --script FILE --root ROOT --session ID PROMPT`` in ``cwd`` (the script beside ``cwd``)."""
    script = cwd.parent / f"{session_id}-{abs(hash(prompt)):x}.json"
    script.write_text(json.dumps(list(replies)), encoding="utf-8")
    return dsh_todo("run", "--script", script, "--root", root, "--session", session_id, *extra, prompt, cwd=cwd)


def web_rows(root: Path) -> list[dict[str, Any]]:
    """The rows of ``dsh-todo web --root ROOT``'s session list (``POST /api/session.list``)."""
    process = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "web", "--root", str(root), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), f"dsh-todo web printed {url!r}"
        body = json.dumps({"type": "client-request", "rpcId": "r", "method": "session.list", "payload": {}})
        request = urllib.request.Request(url + "api/session.list", data=body.encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=SECONDS) as response:
            answer = json.loads(response.read())
        assert answer["result"]["ok"], answer
        return list(answer["result"]["value"]["sessions"])
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
