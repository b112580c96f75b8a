"""A port in use: one wording and one exit code from every server (issue 23)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize("command", [["web"], ["demo", "--web"], ["mcp", "--http"]])
def test_a_port_in_use_is_one_line_and_exit_2(command: list[str], busy_port: int, tmp_path: Path) -> None:
    """Repro: with 127.0.0.1:P taken, ``dsh-todo web --port P`` said "cannot listen on 127.0.0.1:P: Address already
    in use" and exited 1, ``demo --web --port P`` said "[Errno 98] Address already in use" and exited 1, ``mcp
    --http --port P`` exited 2: three texts, two codes for the same failure."""
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", *command, "--port", str(busy_port),
                           "--root", str(tmp_path / "root")], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1] == f"dsh-todo {command[0]}: cannot listen on 127.0.0.1:{busy_port}: address already in use"
    assert [line for line in lines if "listen" in line] == lines[-1:], done.stderr
    assert done.returncode == 2
    assert not (tmp_path / "root").exists() or not any((tmp_path / "root").iterdir())  # nothing left behind
