"""Other coding agents' homes for the board's tests: copies of the files the pinned CLIs wrote, and a stand-in.

:func:`copy_real_homes` copies the saved runs (``tests/fixtures/agent-plans/<agent>-<version>/``, written by the
pinned CLIs against scripted models) so a test may append to them as the agent would; the board then reads them
through each agent's real reader. The stand-in is for what no real run produced (a state the board must show that
none of the saved runs is in, or a reader that fails): :class:`FixtureReader` reads one plain JSON file per session
under a home, and :func:`use_fixture_readers` makes ``base.reader`` return it for every agent in this process.

A file: ``{"id", "project"?, "title"?, "parent"?, "turnOpen"?, "waiting"?, "updated"?, "writes": [{"tool",
"items": [[content, status], …], "arguments"?, "result"?, "at"?}, …]}``; the standing plan is the last write's
items (``"plan": null`` clears it); ``updated`` defaults to the file's mtime.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dsh_todo.coding_agents import base
from dsh_todo.coding_agents.base import AgentSession, PlanWrite, items, standing


class FixtureReader:
    """Reads ``<home>/*.json`` (see the module docstring); never writes."""

    def __init__(self, agent: str) -> None:
        self.agent = agent

    def default_home(self) -> Path:
        return Path(os.environ.get("DSH_TODO_TEST_AGENT_HOME", "/nonexistent")) / self.agent

    def session_paths(self, home: Path) -> list[Path]:
        if not home.is_dir():
            return []
        return sorted(home.glob("*.json"))

    def read(self, path: Path) -> list[AgentSession]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            writes = tuple(PlanWrite(items(tuple(pair) for pair in write["items"]), write.get("at"), write["tool"],
                                     write.get("arguments"), write.get("result")) for write in data["writes"])
            plan = standing(writes)
            if "plan" in data and data["plan"] is None:
                plan = None
            return [AgentSession(self.agent, data["id"], path, data.get("project"),
                                 data.get("updated", path.stat().st_mtime), plan, writes, data.get("parent"),
                                 data.get("title"), data.get("turnOpen"), bool(data.get("waiting", False)))]
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{self.agent}: cannot read {path.name}: {exc}") from None


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent-plans"
REAL_HOMES: dict[str, Path] = {
    "claude": FIXTURES / "claude-2.1.332" / "todowrite",
    "codex": FIXTURES / "codex-0.171.0",
    "gemini": FIXTURES / "gemini-0.61.0",
    "opencode": FIXTURES / "opencode-1.18.33",
}
"""Each agent's saved home: Claude Code (``TodoWrite``, a subagent), Codex (``update_plan``, a spawned thread),
Gemini CLI (``write_todos``, a subagent's chat) and opencode (``todowrite``, a child session in its SQLite store)."""
CLAUDE_TASKS_HOME = FIXTURES / "claude-2.1.332" / "tasks"
"""Claude Code's home after a run with its default Task tools (``TaskCreate``/``TaskUpdate``)."""


def copy_real_homes(into: Path, sources: Mapping[str, Path] = REAL_HOMES) -> dict[str, Path]:
    """Writable copies of the saved homes under ``into`` (one folder per agent), as the board should read them."""
    homes = {}
    for agent, source in sources.items():
        homes[agent] = into / agent
        shutil.copytree(source, homes[agent])
    return homes


@contextmanager
def use_fixture_readers() -> Iterator[None]:
    """``base.reader`` gives a :class:`FixtureReader` for every agent while this is open."""
    original = base.reader
    base.reader = FixtureReader
    try:
        yield
    finally:
        base.reader = original


def write_session(home: Path, session_id: str, writes: Sequence[dict[str, Any]], **facts: Any) -> Path:
    """Write (or rewrite) one session's file under ``home``, as an agent appending to its log would change it."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / f"{session_id}.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"id": session_id, "writes": list(writes), **facts}), encoding="utf-8")
    temporary.replace(path)
    return path


def write(tool: str, *pairs: tuple[str, str], at: float | None = None, arguments: Any = None,
          result: Any = None) -> dict[str, Any]:
    """One plan write as :func:`write_session` takes it."""
    return {"tool": tool, "items": [list(pair) for pair in pairs], "at": at,
            "arguments": arguments if arguments is not None else {"todos": [
                {"content": content, "status": status} for content, status in pairs]},
            "result": result if result is not None else "Todos have been modified successfully."}
