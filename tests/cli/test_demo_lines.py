"""The demo's last lines are commands a person can paste as printed, and the ``plan`` one shows a plan (issue 23)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PLAN_OF_TURN_1 = [
    "To-dos: 5 completed",
    "  [x] Read the request pipeline",
    "  [x] Choose a limiter design",
    "  [x] Implement the rate limiter",
    "  [x] Document the limits",
    "  [x] Run the test suite",
]


def demo(cwd: Path, root: Path, **env: str) -> tuple[str, list[str]]:
    """Run the demo; its session id and the lines after ``look at it again:``."""
    environ = {key: value for key, value in os.environ.items() if key not in ("UV_RUN_RECURSION_DEPTH", "UV")}
    environ.update(env)
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "demo", "--root", str(root)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=environ, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (session_id,) = [path.name for path in root.glob("*/*")]
    return session_id, lines[lines.index("look at it again:") + 1:]


def expected(prefix: str, root: Path, session_id: str) -> list[str]:
    where = f"--root {shlex.quote(str(root))}"
    return [
        "  the plan turn 1 ended with (the second turn's start cleared the standing plan):",
        f"    {prefix} plan {where} {session_id} --turn 1",
        "  every event of the session, one JSON object per line:",
        f"    {prefix} events {where} {session_id}",
        f"  the page (then open http://127.0.0.1:8766/?session={session_id}):",
        f"    {prefix} web {where}",
    ]


def test_the_last_lines_run_as_printed(tmp_path: Path) -> None:
    """Repro: ``dsh-todo demo`` ended with ``dsh-todo plan --root … ID``, which printed "(no standing plan)" (the
    demo's second turn clears the plan), and ``dsh-todo web --root …   (then open /?session=ID)``, which a shell
    refuses as pasted."""
    bin_dir = str(Path(sys.executable).parent)  # where the environment's dsh-todo script is
    session_id, lines = demo(tmp_path, tmp_path / "root", PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    assert lines == expected("dsh-todo", tmp_path / "root", session_id)
    plan = subprocess.run(shlex.split(lines[1]), capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")})
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == PLAN_OF_TURN_1
    events = subprocess.run(shlex.split(lines[3]), capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")})
    assert events.returncode == 0, events.stderr
    assert events.stdout.count('"type":"todo/write"') == 5


def test_under_uv_run_the_lines_say_uv_run(tmp_path: Path) -> None:
    """Repro: ``uv run dsh-todo demo`` (the README's first command) ended with ``dsh-todo plan …``, and a shell
    answers ``dsh-todo: command not found``: the script is only in the project's environment. Inside the project
    the lines say ``uv run dsh-todo``; from anywhere else ``uv run --project DIR dsh-todo``."""
    venv = str(REPO_ROOT / ".venv")
    session_id, lines = demo(REPO_ROOT / "src", tmp_path / "inside", UV_RUN_RECURSION_DEPTH="1", VIRTUAL_ENV=venv)
    assert lines == expected("uv run dsh-todo", tmp_path / "inside", session_id)
    session_id, lines = demo(tmp_path, tmp_path / "outside", UV_RUN_RECURSION_DEPTH="1", VIRTUAL_ENV=venv)
    assert lines == expected(f"uv run --project {shlex.quote(str(REPO_ROOT))} dsh-todo", tmp_path / "outside",
                             session_id)


def test_without_a_dsh_todo_on_path_the_lines_name_the_interpreter(tmp_path: Path) -> None:
    """Where no ``dsh-todo`` script is on ``PATH`` (the package run as ``python -m dsh_todo.cli``), the lines say
    that, with this interpreter."""
    session_id, lines = demo(tmp_path, tmp_path / "root", PATH=str(tmp_path / "empty"))
    assert lines == expected(f"{shlex.quote(sys.executable)} -m dsh_todo.cli", tmp_path / "root", session_id)


@pytest.mark.skipif(shutil.which("uv") is None or Path(sys.prefix) != REPO_ROOT / ".venv",
                    reason="needs uv and the project's own .venv")
def test_the_uv_line_runs_from_elsewhere(tmp_path: Path) -> None:
    venv = str(REPO_ROOT / ".venv")
    _, lines = demo(tmp_path, tmp_path / "root", UV_RUN_RECURSION_DEPTH="1", VIRTUAL_ENV=venv)
    plan = subprocess.run(shlex.split(lines[1]), capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "UV_NO_SYNC": "1"})
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == PLAN_OF_TURN_1


def test_plan_of_a_turn_that_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_todo.cli import main

    demo(tmp_path, tmp_path / "root")
    (log,) = (tmp_path / "root").glob("*/*/session.v4.jsonl.zstd")
    assert main(["plan", str(log), "--turn", "3"]) == 2
    assert capsys.readouterr().err.splitlines() == ["dsh-todo plan: the session has no turn 3 (its turns: 1, 2)"]
    assert main(["plan", str(log), "--turn", "2", "--json"]) == 0
    assert capsys.readouterr().out == "null\n"
