"""A disk that fills up at the end of a turn: one line naming the failed write, exit 1, no traceback (issue 22 item 4).

Repro: under a file-size cap that lets every call of a turn be written but not its end (``RLIMIT_FSIZE`` just under
the log's full size, SIGXFSZ ignored, so a write past it fails with ``EFBIG`` as a full disk fails with ``ENOSPC``),
``dsh-todo run`` printed 9 tracebacks (the checkpoint plugin's ``could not checkpoint session … on dispose``, the
context's ``disposer of @deepseek-ai/dsh-session-persistence-jsonl failed``, each with its chained causes) before its
one right line, and exited 2, where the CLI's own table says an OS refusal is 1; ``dsh-todo mcp`` at the end of its
input exited 2 after ``Exception ignored in atexit callback: <bound method WriteBehind.close …>`` and its traceback
(the close failed, so it stayed registered and failed again at exit). Now both say the failed write once, on one
line, and exit 1; ``--debug`` still shows the traceback.
"""

from __future__ import annotations

import json
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from dsh_todo.jsonutil import dumps
from tests import needs

WAIT = 60
TODOS = {"todos": [{"content": f"step {index} of the release", "status": "pending"} for index in range(20)]}
SCRIPT = [{"tool_calls": [{"name": "todo_write", "arguments": dumps(TODOS)}]}, {"text": "Planned. " * 100}]


def capped(limit: int | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that caps every file the child writes at ``limit`` bytes; a write beyond fails with
    ``EFBIG`` (SIGXFSZ, which would kill it instead, is ignored)."""
    if limit is None:
        return None

    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return cap


def dsh_todo(argv: Sequence[str], cwd: Path, *, limit: int | None = None, stdin: bytes = b""
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", *argv], input=stdin.decode(), capture_output=True,
                          text=True, cwd=cwd, preexec_fn=capped(limit), timeout=WAIT)


def log_size(root: Path) -> int:
    [log] = list(root.rglob("session.v4.jsonl"))
    return log.stat().st_size


def run_argv(tmp_path: Path, root: Path) -> list[str]:
    script = tmp_path / "script.json"
    script.write_text(dumps(SCRIPT))
    return ["run", "--compression", "none", "--root", str(root), "--script", str(script), "--session", "s1",
            "plan the release"]


def end_cut_off(tmp_path: Path, argv: Callable[[Path], list[str]], stdin: bytes = b"") -> int:
    """The cap that lets all but the turn's last batch be written: the full log's size, less one byte (measured by a
    run without a cap, in a root of its own)."""
    free = tmp_path / "free"
    done = dsh_todo(argv(free), tmp_path, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return log_size(free) - 1


def test_run_says_the_failed_write_once_and_exits_1(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    limit = end_cut_off(tmp_path, lambda where: run_argv(tmp_path, where))
    done = dsh_todo(run_argv(tmp_path, root), tmp_path, limit=limit)
    assert done.stderr.splitlines() == [
        "tools mounted: todo_write (allowParallelInProgress: true)",
        'dsh-todo run: could not write 5 events of session "s1": [Errno 27] File too large']
    assert done.returncode == 1
    assert log_size(root) <= limit


def test_run_with_debug_shows_the_traceback(tmp_path: Path) -> None:
    limit = end_cut_off(tmp_path, lambda where: run_argv(tmp_path, where))
    done = dsh_todo(["--debug", *run_argv(tmp_path, tmp_path / "sessions")], tmp_path, limit=limit)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "OSError: [Errno 27] File too large" in done.stderr


MCP_LINES = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "full-disk", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "todo_write", "arguments": TODOS}},
]
MCP_INPUT = b"".join(dumps(line).encode() + b"\n" for line in MCP_LINES)


def test_mcp_at_the_end_of_input_says_the_failed_write_once_and_exits_1(tmp_path: Path) -> None:
    """The call is answered (its write fitted); the turn's end does not fit: one line, exit 1."""
    needs.module("mcp")

    def argv(where: Path) -> list[str]:
        return ["mcp", "--compression", "none", "--root", str(where)]

    limit = end_cut_off(tmp_path, argv, MCP_INPUT)
    done = dsh_todo(argv(tmp_path / "sessions"), tmp_path, limit=limit, stdin=MCP_INPUT)
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    assert answers[1]["result"]["content"][0]["text"] == "Updated todo list: 20 pending, 0 in progress, 0 completed."
    lines = done.stderr.splitlines()
    assert len(lines) == 3, done.stderr
    assert lines[0].startswith("dsh-todo mcp: serving todo_write")
    session = re.fullmatch(r"dsh-todo mcp: session (\S+) .*", lines[1])
    assert session is not None, lines[1]
    assert lines[2] == (f'dsh-todo mcp: could not write 1 events of session "{session.group(1)}": '
                        "[Errno 27] File too large")
    assert done.returncode == 1
