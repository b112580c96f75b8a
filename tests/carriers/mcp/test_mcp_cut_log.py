"""A live log cut by another process while ``dsh-todo mcp`` writes it (issue 34, item 4).

Repro (against main before the fix): ``dsh-todo mcp --compression none --root R``, three accepted ``todo_write``
calls, then ``truncate`` the log to its header (or to half) from another process and send two more calls. The writer
kept acknowledging (``Updated todo list: …``, ``isError: false``), appended after the cut and, at the end of its
input, checkpointed the damaged file: ``sessions`` and ``plan`` said ``ok`` with the newest plan while ``events`` and
``plan --turn 1`` said ``corrupt session log: seq gap in committed region at line 1 (expected 0, got 16)`` (cut to
half: ``unparsable committed event at line 9``), and ``watch`` showed ``plan: none`` while the writer lived.

Now the writer notices that its file is no longer what it made durable (its size, or its identity) and refuses: the
calls after the cut are answered as errors naming the problem, stderr says it once on one line (no traceback), the
server exits 1, nothing more is written to the file, and every reader gives the same verdict on it.

Each case runs the real command in a subprocess over stdio (loopback only: pipes), bounded by deadlines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence.jsonl.zstd import scan_frames
from tests import needs
from tests.carriers.mcp.test_mcp_stdio_wire import Wire

needs.module("mcp")

WAIT = 60.0
CHANGED = "was changed by another process"


def call_line(request_id: int, status: str) -> bytes:
    arguments = json.dumps({"todos": [{"content": f"task {request_id}", "status": status}]})
    return (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"todo_write","arguments":%s}}'
            % (request_id, arguments.encode()))


def cut_point(data: bytes, compression: str, where: str) -> int:
    """Where to cut the log: right after its header (its line; its own frame under zstd), or half way."""
    if where == "half":
        return len(data) // 2
    if compression == "zstd":
        return scan_frames(data, 1).frames[0][1]
    return data.index(b"\n") + 1


def dsh(root: Path, *words: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("DSH_TODO_ROOT", None)
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", *words, "--root", str(root)], capture_output=True,
                          text=True, timeout=WAIT, env=env)


def verdicts(root: Path, session_id: str) -> dict[str, Any]:
    """What ``sessions``, ``plan``, ``events`` and ``plan --turn 1`` say of the session, checked to be one verdict:
    ``sessions``' last column, which every other reader says on stderr when it is not ``ok``."""
    listed = dsh(root, "sessions")
    assert listed.returncode == 0, listed.stderr
    [row] = listed.stdout.splitlines()
    verdict = row.split("\t")[-1]
    plan = dsh(root, "plan", session_id)
    events = dsh(root, "events", session_id)
    turn = dsh(root, "plan", "--turn", "1", session_id)
    for name, done in (("plan", plan), ("events", events), ("plan --turn 1", turn)):
        assert "corrupt session log" not in done.stderr, (name, done.stderr)
        assert "Traceback" not in done.stderr, (name, done.stderr)
        if verdict != "ok":
            assert done.returncode == 0, (name, done.stderr)
            assert done.stderr == f"dsh-todo {name.split()[0]}: {verdict}\n", (name, verdict)
    if verdict == "ok":  # the cut left the header alone: no turn, no plan, no event, said alike
        assert row.split("\t")[1] == "no plan"
        assert (plan.returncode, plan.stdout, plan.stderr) == (0, "(no standing plan)\n", "")
        assert (events.returncode, events.stdout, events.stderr) == (0, "", "")
        assert (turn.returncode, turn.stderr) == (2, "dsh-todo plan: the session has no turn 1 (its turns: none)\n")
    else:  # cut inside a record: the torn tail is ignored by every reader, and the plan before it stands in each
        assert plan.stdout == turn.stdout
        assert "task 1" in plan.stdout
    return {"verdict": verdict, "plan": plan.stdout}


@pytest.mark.parametrize("where", ["header", "half"])
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_log_cut_under_the_writer_is_refused_and_every_reader_agrees(tmp_path: Path, compression: str,
                                                                       where: str) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    root = tmp_path / "sessions"
    wire = Wire(root, cwd, "--compression", compression)
    try:
        wire.handshake("cut")
        for request_id in (1, 2, 3):
            answer = wire.ask(call_line(request_id, "in_progress"))
            assert answer["result"]["isError"] is False
        [log] = list(root.rglob("session*.jsonl*"))
        session_id = log.parent.name
        data = log.read_bytes()
        cut = cut_point(data, compression, where)
        os.truncate(log, cut)

        for request_id in (4, 5):
            answer = wire.ask(call_line(request_id, "completed"))
            assert answer["result"]["isError"] is True, answer
            assert answer["result"]["content"] == [{"type": "text", "text": (
                f"Error: session {session_id}: its log {log.resolve()} {CHANGED} (size {cut}, expected {len(data)}); "
                "nothing more is written to it")}]
        assert log.read_bytes() == data[:cut], "the writer touched a file that is not what it wrote"
        assert not (log.parent / "projections.json").exists()

        # While the writer lives: watch agrees with the readers.
        alive = verdicts(root, session_id)
        watched = dsh(root, "watch", session_id, "--seconds", "1", "--interval", "0.1")
        assert watched.returncode == 0, watched.stderr
        expected_watch = "" if alive["verdict"] == "ok" else f"dsh-todo watch: {alive['verdict']}\n"
        assert watched.stderr == expected_watch
        assert watched.stdout.splitlines()[0] == ("plan: none" if where == "header"
                                                  else "plan: 1 in progress | now: task 1")

        code, _ = wire.close()
        err = wire.stderr_text()
        assert code == 1, err
        assert "Traceback" not in err, err
        said = [line for line in err.splitlines() if CHANGED in line]
        assert said == [f"dsh-todo mcp: session {session_id}: its log {log.resolve()} {CHANGED} (size {cut}, "
                        f"expected {len(data)}); nothing more is written to it"], err
        assert log.read_bytes() == data[:cut]
        assert not (log.parent / "projections.json").exists()
        # Once the writer is gone, its open turn is an interrupted one, closed in memory by every reader alike.
        after = verdicts(root, session_id)
        assert after["plan"] == alive["plan"]
        if where == "header":
            assert after["verdict"] == "ok"
        else:
            assert after["verdict"].startswith(f"{alive['verdict']}; closed the interrupted turn 1 with ")
    finally:
        wire.kill()
