"""``--agents`` / ``--agent-home`` on ``sessions``, ``plan`` and ``watch``, run as a person runs them (a subprocess),
against the saved Claude Code and Codex homes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.coding_agents.common import CLAUDE_TASKS, CLAUDE_TODOWRITE, CODEX_HOME, copy_home, snapshot
from tests.coding_agents.test_readers import CLAUDE_MAIN, CLAUDE_SUB, CLAUDE_TASKS_MAIN, CODEX_MAIN, CODEX_SUB

HOMES = ["--agent-home", f"claude={CLAUDE_TODOWRITE}", "--agent-home", f"codex={CODEX_HOME}"]


def dsh_todo(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("DSH_TODO_")}
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**environ, **(env or {})}, timeout=60, check=False)


def test_plan_json_of_an_agent_session_is_a_dsh_plan(tmp_path: Path) -> None:
    done = dsh_todo("plan", "--agents", "claude", "--agent-home", f"claude={CLAUDE_TODOWRITE}", CLAUDE_MAIN, "--json",
                    cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    # The exact text a DSH session's plan --json prints: compact JSON, {content, status} items in order.
    assert done.stdout == ('[{"content":"Reproduce the bug","status":"completed"},'
                           '{"content":"Fix the parser","status":"completed"}]\n')
    sub = dsh_todo("plan", "--agents", "claude,codex", *HOMES, CODEX_SUB, "--json", cwd=tmp_path)
    assert json.loads(sub.stdout) == [{"content": "Run the tests", "status": "in_progress"},
                                      {"content": "Report the result", "status": "pending"}]


def test_plan_json_is_null_for_a_session_without_a_plan(tmp_path: Path) -> None:
    home = copy_home(CLAUDE_TASKS, tmp_path)
    [sub] = [path.stem.removeprefix("agent-") for path in home.rglob("agent-*.jsonl")]
    done = dsh_todo("plan", "--agents", "claude", "--agent-home", f"claude={home}", sub, "--json", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "null\n")


def test_plan_by_file_path_and_for_a_person(tmp_path: Path) -> None:
    path = CLAUDE_TASKS / "projects" / "-home-dev-project" / f"{CLAUDE_TASKS_MAIN}.jsonl"
    done = dsh_todo("plan", "--agents", "claude", "--agent-home", f"claude={CLAUDE_TASKS}", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    head, *lines = done.stdout.splitlines()
    assert head.startswith(f"{CLAUDE_TASKS_MAIN}: claude · project /home/dev/project · changed 20")
    assert lines == ["To-dos: 1 completed · 1 in progress", "  [x] Reproduce the bug", "  [>] Fix the parser"]


def test_an_unknown_status_is_shown_as_written(tmp_path: Path) -> None:
    home = copy_home(CLAUDE_TASKS, tmp_path)
    task = home / "tasks" / CLAUDE_TASKS_MAIN / "2.json"
    task.write_text(json.dumps({**json.loads(task.read_text()), "status": "blocked"}))
    done = dsh_todo("plan", "--agents", "claude", "--agent-home", f"claude={home}", CLAUDE_TASKS_MAIN, cwd=tmp_path)
    assert done.stdout.splitlines()[1:] == ["To-dos: 1 completed · 1 pending", "  [x] Reproduce the bug",
                                            "  [?] Fix the parser (blocked)"]


def test_sessions_lists_the_agents_sessions_with_agent_project_and_last_change(tmp_path: Path) -> None:
    done = dsh_todo("sessions", "--agents", "claude,codex", *HOMES, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert [row[0] for row in rows if row[0] in (CLAUDE_MAIN, CLAUDE_SUB)] == [CLAUDE_MAIN, CLAUDE_SUB]
    by_id = {row[0]: row for row in rows}
    assert set(by_id) == {CLAUDE_MAIN, CLAUDE_SUB, CODEX_MAIN, CODEX_SUB}
    assert by_id[CODEX_MAIN][1] == "2 completed"
    assert by_id[CODEX_SUB][1] == "1 in progress · 1 pending"
    assert by_id[CODEX_SUB][3].startswith("codex · project /home/dev/project · changed 20")
    assert by_id[CODEX_SUB][3].endswith(f" · subagent of {CODEX_MAIN}")
    assert by_id[CLAUDE_MAIN][2].endswith(f"{CLAUDE_MAIN}.jsonl")


def test_the_choice_comes_from_the_environment_and_defaults_to_none(tmp_path: Path) -> None:
    chosen = dsh_todo("sessions", *HOMES, cwd=tmp_path, env={"DSH_TODO_AGENTS": "codex"})
    assert {line.split("\t")[0] for line in chosen.stdout.splitlines()} == {CODEX_MAIN, CODEX_SUB}
    default = dsh_todo("plan", *HOMES, CODEX_MAIN, "--json", cwd=tmp_path)
    assert default.returncode == 2 and CODEX_MAIN in default.stderr  # not read unless chosen


def test_a_bad_agents_value_is_one_line_and_exit_2(tmp_path: Path) -> None:
    expected = ("dsh-todo sessions: unknown agent 'claud': choose all, none or a comma list of "
                "claude,codex,gemini,opencode\n")
    done = dsh_todo("sessions", "--agents", "claude,claud", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", expected)
    from_env = dsh_todo("sessions", cwd=tmp_path, env={"DSH_TODO_AGENTS": "claud"})
    assert (from_env.returncode, from_env.stderr) == (2, expected)
    web = dsh_todo("web", "--agents", "claude,claud", "--port", "0", cwd=tmp_path)
    assert (web.returncode, web.stderr) == (2, expected.replace("sessions:", "web:"))
    home = dsh_todo("plan", "--agents", "claude", "--agent-home", "claude", "x", cwd=tmp_path)
    assert (home.returncode, home.stderr) == (2, "dsh-todo plan: --agent-home takes AGENT=DIR, not 'claude'\n")


def test_the_commands_never_write_into_an_agent_home(tmp_path: Path) -> None:
    homes = {"claude": copy_home(CLAUDE_TASKS, tmp_path / "c"), "codex": copy_home(CODEX_HOME, tmp_path / "x")}
    options = [word for agent, home in homes.items() for word in ("--agent-home", f"{agent}={home}")]
    before = {agent: snapshot(home) for agent, home in homes.items()}
    dsh_todo("sessions", "--agents", "claude,codex", *options, cwd=tmp_path)
    dsh_todo("plan", "--agents", "claude,codex", *options, CLAUDE_TASKS_MAIN, cwd=tmp_path)
    dsh_todo("watch", "--agents", "claude,codex", *options, CODEX_MAIN, "--seconds", "0.3", cwd=tmp_path)
    assert {agent: snapshot(home) for agent, home in homes.items()} == before


def test_watch_prints_each_plan_change_an_agent_writes(tmp_path: Path) -> None:
    home = copy_home(CODEX_HOME, tmp_path)
    [path] = [path for path in home.rglob("rollout-*.jsonl") if CODEX_MAIN in path.name]
    environ = {key: value for key, value in os.environ.items() if not key.startswith("DSH_TODO_")}
    watch = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "watch", "--agents", "codex", "--agent-home",
                              f"codex={home}", CODEX_MAIN, "--interval", "0.05", "--seconds", "2.5"],
                             cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert watch.stdout is not None
    try:
        first = watch.stdout.readline()
        assert first == "plan: 2 completed\n"
        arguments = json.dumps({"plan": [{"step": "Reproduce the bug", "status": "completed"},
                                         {"step": "Fix the parser", "status": "completed"},
                                         {"step": "Ship it", "status": "in_progress"}]})
        with path.open("a") as handle:
            for payload in ({"type": "function_call", "name": "update_plan", "call_id": "c9", "arguments": arguments},
                            {"type": "function_call_output", "call_id": "c9", "output": "Plan updated"}):
                handle.write(json.dumps({"timestamp": "2026-12-06T06:00:00.000Z", "type": "response_item",
                                         "payload": payload}) + "\n")
        written = time.monotonic()
        second = watch.stdout.readline()
        assert second == "plan: 2 completed · 1 in progress | now: Ship it\n"
        assert time.monotonic() - written < 1.5
    finally:
        _, err = watch.communicate(timeout=10)
    assert (watch.returncode, err) == (0, "")


def test_web_hands_the_choice_to_run_web(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dsh_todo.carriers.web.server as server
    from dsh_todo.cli import main

    seen: dict[str, object] = {}

    def run_web(storage: object, **options: object) -> int:
        seen.update(options)
        return 0

    monkeypatch.setattr(server, "run_web", run_web)
    monkeypatch.delenv("DSH_TODO_AGENTS", raising=False)
    assert main(["web", "--root", str(tmp_path), "--agents", "codex,claude", "--agent-home", f"codex={tmp_path}"]) == 0
    assert (seen["agents"], seen["agent_homes"]) == (["codex", "claude"], {"codex": tmp_path})
    assert main(["web", "--root", str(tmp_path)]) == 0
    assert (seen["agents"], seen["agent_homes"]) == ([], {})


def test_sessions_lists_ours_first_then_the_agents_and_plan_still_reads_ours(tmp_path: Path) -> None:
    from tests.cli.test_latest import write_sessions

    root = tmp_path / "sessions"
    write_sessions(root, [("ours-1", str(tmp_path), "Write the parser")])
    done = dsh_todo("sessions", "--root", str(root), "--agents", "codex", *HOMES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["ours-1", CODEX_MAIN, CODEX_SUB]
    ours = dsh_todo("plan", "--root", str(root), "--agents", "codex", *HOMES, "ours-1", "--json", cwd=tmp_path)
    assert ours.stdout == '[{"content":"Write the parser","status":"in_progress"}]\n'
    missing = dsh_todo("sessions", "--root", str(tmp_path / "none"), "--agents", "codex", *HOMES, cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (2, f"dsh-todo sessions: {tmp_path / 'none'} is not a directory\n")


OPENCODE_WRITER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA wal_autocheckpoint = 0")
for position in (1, 2):
    db.execute("UPDATE todo SET status = 'completed' WHERE session_id = ? AND position = ?", (sys.argv[2], position))
    db.commit()
    print("written", flush=True)
    sys.stdin.readline()
"""
"""A stand-in for a running opencode: its store in WAL mode, each write left in the ``-wal`` (no checkpoint)."""


def test_watch_sees_an_opencode_write_that_only_reached_the_wal(tmp_path: Path) -> None:
    """Repro: ``watch --agents opencode`` stamped only ``opencode.db``; a write that lands in the ``-wal`` (every
    write of a running opencode between checkpoints) left the store's size and mtime as they were, so the plan
    change was never printed. The board had its own stamp with the ``-wal`` in it; now both use one."""
    from tests.coding_agents.test_opencode import MAIN_ID, STORE

    home = tmp_path / "opencode"
    home.mkdir()
    shutil.copyfile(STORE, home / STORE.name)
    writer = subprocess.Popen([sys.executable, "-c", OPENCODE_WRITER, str(home / STORE.name), MAIN_ID],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdin is not None and writer.stdout is not None
    environ = {key: value for key, value in os.environ.items() if not key.startswith("DSH_TODO_")}
    try:
        assert writer.stdout.readline() == "written\n"
        watch = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "watch", "--agents", "opencode",
                                  "--agent-home", f"opencode={home}", MAIN_ID, "--interval", "0.05", "--seconds", "3"],
                                 cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert watch.stdout is not None
        try:
            first = watch.stdout.readline()
            assert first.startswith("plan: 2 completed")
            writer.stdin.write("\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "written\n"
            written = time.monotonic()
            second = watch.stdout.readline()
            assert second.startswith("plan: 3 completed"), (first, second)
            assert time.monotonic() - written < 1.5
        finally:
            _, err = watch.communicate(timeout=10)
        assert (watch.returncode, err) == (0, "")
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
