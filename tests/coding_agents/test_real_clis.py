"""The pinned Claude Code and Codex, run headless against a scripted model that calls their own plan tools
(:mod:`.drive`), then read with our readers: the exact plans, the refused write left out, the subagent under its
parent. A release that changes its files fails here with a message naming the CLI and the file, instead of the
board silently showing nothing. In CI (``CI=true``) a CLI that cannot be installed fails; elsewhere it skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_todo.coding_agents.base import AgentSession
from dsh_todo.coding_agents.discover import discover
from tests.carriers.mcp.agents.common import Run
from tests.coding_agents.common import CLAUDE_VERSION, CODEX_VERSION, cli, pairs
from tests.coding_agents.drive import FINAL, run_claude, run_codex
from tests.coding_agents.test_readers import SUB_PLAN, WRITES, written

pytestmark = pytest.mark.slow


def split(sessions: list[AgentSession], what: str, home: Path) -> tuple[AgentSession, list[AgentSession]]:
    """The one top-level session and its subagents; what does not read fails naming ``what`` and the file."""
    for session in sessions:
        assert not session.extra.get("error"), f"{what}: {session.extra['error']}"
    tops = [session for session in sessions if session.parent is None]
    assert len(tops) == 1, f"{what} left {len(tops)} top-level sessions under {home}: {[s.path for s in tops]}"
    [main] = tops
    return main, [session for session in sessions if session.parent == main.id]


def ran(run: Run, what: str) -> None:
    assert run.returncode == 0 and run.stdout.strip().endswith(FINAL), (
        f"{what} did not finish the script\nstdout:\n{run.stdout}\nstderr:\n{run.stderr[-3000:]}")


def test_claude_code_todowrite(tmp_path: Path) -> None:
    what = f"Claude Code {CLAUDE_VERSION} (TodoWrite)"
    home, run = run_claude(tmp_path, cli("claude"), tasks=False)
    ran(run, what)
    main, subs = split(discover(["claude"], {"claude": home}), what, home)
    assert pairs(main) == WRITES[-1], f"{what} wrote {main.path}; we read the plan {pairs(main)}"
    assert written(main) == WRITES, f"{what} wrote {main.path}; we read the writes {written(main)}"
    assert [(pairs(sub), written(sub)) for sub in subs] == [(SUB_PLAN, [SUB_PLAN])], (
        f"{what}: the subagent under {main.path.with_suffix('')} read as {[(s.path, pairs(s)) for s in subs]}")
    assert main.project == str(tmp_path / "project") and main.turn_open is False, f"{what}: {main.path}"


def test_claude_code_task_tools(tmp_path: Path) -> None:
    what = f"Claude Code {CLAUDE_VERSION} (Task tools)"
    home, run = run_claude(tmp_path, cli("claude"), tasks=True)
    ran(run, what)
    main, subs = split(discover(["claude"], {"claude": home}), what, home)
    tasks = home / "tasks" / main.id
    expected = [("Reproduce the bug", "completed"), ("Fix the parser", "in_progress")]
    assert pairs(main) == expected, f"{what} wrote {tasks}; we read the plan {pairs(main)}"
    assert [write.tool for write in main.writes] == ["TaskCreate", "TaskCreate", "TaskUpdate", "TaskUpdate",
                                                     "TaskUpdate"], f"{what} wrote {main.path}"
    assert written(main)[-1] == expected, f"{what} wrote {main.path}; we read the writes {written(main)}"
    assert [sub.plan for sub in subs] == [None], f"{what}: subagents {[s.path for s in subs]}"


def test_codex_update_plan(tmp_path: Path) -> None:
    what = f"Codex {CODEX_VERSION} (update_plan)"
    home, run = run_codex(tmp_path, cli("codex"))
    ran(run, what)
    main, subs = split(discover(["codex"], {"codex": home}), what, home)
    assert pairs(main) == WRITES[-1], f"{what} wrote {main.path}; we read the plan {pairs(main)}"
    assert written(main) == WRITES, f"{what} wrote {main.path}; we read the writes {written(main)}"
    assert [(pairs(sub), written(sub)) for sub in subs] == [(SUB_PLAN, [SUB_PLAN])], (
        f"{what}: the subagent read as {[(s.path, pairs(s)) for s in subs]}")
    assert main.project == str(tmp_path / "project") and main.turn_open is False, f"{what}: {main.path}"
