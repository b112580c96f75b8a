"""Roots the front doors print: a pasteable command stays one shell word per path, a message stays one line (issue 34
item 8). Real processes, a root whose name holds a space, ``$(touch pwned)`` and a newline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_todo.jsonutil import dumps
from dsh_todo.quoting import safe, shell_path, shell_word
from dsh_todo.testing import stop
from tests import needs

AWKWARD = "a b$(touch pwned)\nc"
"""A directory name that splits on a space, runs ``touch`` when pasted unquoted and breaks a line."""

TODO = {"todos": [{"content": "write the plan", "status": "in_progress"}, {"content": "ship", "status": "pending"}]}


def awkward_root(tmp_path: Path) -> Path:
    root = tmp_path / AWKWARD / "sessions"
    root.mkdir(parents=True)
    return root


def cli(*words: str) -> list[str]:
    return [sys.executable, "-m", "dsh_todo.cli", *words]


def paste(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` pasted into ``sh`` in ``cwd``, with ``dsh-todo`` on ``PATH`` (this interpreter's scripts)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("DSH_TODO_ROOT", None)
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def nothing_ran(tmp_path: Path) -> None:
    assert list(tmp_path.rglob("pwned")) == []


@pytest.mark.parametrize("text", ["plain", "a b", "it's", "$(touch pwned)", "a\nb", "tab\there", "\x1b[31m",
                                  "per%cent\\back", "über\u202eevil", "raw\udcff"])
def test_a_shell_word_is_one_line_and_reads_back_as_the_text(text: str, tmp_path: Path) -> None:
    """Whatever the text (but a final newline: :func:`shell_path`'s case), :func:`shell_word` is one line, and
    ``sh`` reads it back as exactly the text (bytes, for a name that is not UTF-8), running nothing."""
    word = shell_word(text)
    assert "\n" not in word and "\r" not in word
    done = subprocess.run(["sh", "-c", f"printf %s {word}"], capture_output=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == text.encode("utf-8", "surrogateescape")
    nothing_ran(tmp_path)


def test_a_shell_path_keeps_a_final_newline(tmp_path: Path) -> None:
    """A directory whose name ends in a newline: the word names it (a final slash keeps the newline)."""
    where = tmp_path / "end\n"
    where.mkdir()
    word = shell_path(where)
    assert "\n" not in word
    done = subprocess.run(["sh", "-c", f"cd {word} && pwd"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{where}\n"  # pwd prints the name, its own newline included, then a newline


def test_mcp_prints_a_command_that_shows_the_plan_when_pasted(tmp_path: Path) -> None:
    """Repro (issue 34 item 8): ``dsh-todo mcp --root R`` printed ``show its plan: dsh-todo plan --root R ID`` with
    ``R`` raw: pasted, a space split it, ``$(…)`` ran, and a newline cut the line in two. Now every stderr line is
    one message and the command, pasted into ``sh``, shows the plan and runs nothing else."""
    needs.module("mcp")
    root = awkward_root(tmp_path)
    requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "todo_write", "arguments": TODO}}]
    done = subprocess.run(cli("mcp", "--root", str(root)), input="".join(dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert all(line.startswith("dsh-todo mcp: ") for line in lines), lines
    assert lines[0].endswith(f", sessions under {safe(root)}")
    [announce] = [line for line in lines if "show its plan: " in line]
    command = announce.split("show its plan: ", 1)[1]
    assert command.startswith(f"dsh-todo plan --root {shell_path(root)} ")
    shown = paste(command, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "write the plan" in shown.stdout and "ship" in shown.stdout
    nothing_ran(tmp_path)


def test_web_says_where_it_serves_on_one_line(tmp_path: Path) -> None:
    """Repro (issue 34 item 8): ``dsh-todo web --root R`` said ``serving the sessions under R`` with ``R`` raw, a
    newline in it cutting the message in two (and the note for a root that does not exist yet too)."""
    root = tmp_path / AWKWARD / "not-yet"
    process = subprocess.Popen(cli("web", "--root", str(root), "--port", "0"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=tmp_path)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("http://127.0.0.1:")
    finally:
        stop(process)
    assert process.stderr is not None
    lines = process.stderr.read().splitlines()
    assert lines[0] == (f"dsh-todo web: the session root {safe(root)} does not exist yet; its sessions will show "
                        "once something writes there")
    assert lines[1] == f"dsh-todo web: serving the sessions under {safe(root)} (Ctrl+C to stop)"
    assert all(line.startswith("dsh-todo web: ") for line in lines), lines


def test_acp_says_where_it_keeps_sessions_on_one_line(tmp_path: Path) -> None:
    """Repro (issue 34 item 8): ``dsh-todo acp``'s banner printed the root raw; a newline in it cut the line."""
    needs.module("acp")
    root = awkward_root(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    with open(os.devnull, "rb") as null:
        done = subprocess.run(cli("acp", "--script", str(script), "--root", str(root)), stdin=null,
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [banner] = done.stderr.splitlines()
    assert banner.startswith("dsh-todo acp: model scripted/")
    assert banner.endswith(f", sessions under {safe(root)}")


def test_sessions_names_a_positional_root_as_one_pasteable_word(tmp_path: Path) -> None:
    """``dsh-todo sessions ROOT`` refuses the positional root with the command to type instead: one line, and the
    command, pasted, lists that root."""
    root = awkward_root(tmp_path)
    done = subprocess.run(cli("sessions", str(root)), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    command = line.split("give the root as an option: ", 1)[1]
    assert command == f"dsh-todo sessions --root {shell_path(root)}"
    listed = paste(command, tmp_path)
    assert listed.returncode == 0, listed.stderr
    nothing_ran(tmp_path)
