"""What the coding-agent reader tests share: the saved runs (fixtures) and the CLIs (:func:`cli`: installed on first
use, or stopped through :mod:`tests.needs`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from dsh_todo.coding_agents.base import AgentSession
from tests.carriers.mcp.agents.conftest import cli as cli
from tests.carriers.mcp.agents.install import PINNED

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agent-plans"
CLAUDE_VERSION = PINNED["@anthropic-ai/claude-code"]
CODEX_VERSION = PINNED["@openai/codex"]
SAVED = {"claude": "2.1.332", "codex": "0.171.0"}
"""The versions whose files the fixtures hold (``test_the_fixtures_are_of_the_pinned_versions`` says when a pin
moved without them)."""
CLAUDE_TODOWRITE = FIXTURES / f"claude-{SAVED['claude']}" / "todowrite"
"""A Claude Code home after a ``TodoWrite`` run (``CLAUDE_CODE_ENABLE_TASKS=0``), saved by :mod:`.drive`."""
CLAUDE_TASKS = FIXTURES / f"claude-{SAVED['claude']}" / "tasks"
"""A Claude Code home after a run with its default Task tools."""
CODEX_HOME = FIXTURES / f"codex-{SAVED['codex']}"
"""A Codex home (its ``sessions`` folder) after an ``update_plan`` run."""


def copy_home(source: Path, tmp_path: Path) -> Path:
    """A writable copy of a saved home (for the tests that alter one)."""
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def pairs(session: AgentSession) -> list[tuple[str, str]] | None:
    """A session's standing plan as (content, status) pairs."""
    return None if session.plan is None else [(item.content, item.status) for item in session.plan]


def snapshot(home: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``home`` with its size and mtime (ns): what a reader must leave unchanged."""
    found = {}
    for path in sorted(home.rglob("*")):
        stat = path.stat()
        found[str(path.relative_to(home))] = (stat.st_size if path.is_file() else 0, stat.st_mtime_ns)
    return found
