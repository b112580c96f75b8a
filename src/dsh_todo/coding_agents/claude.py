"""Claude Code's plans (found in 2.1.332; decision 0047): ``TodoWrite`` in its transcripts, or its Task tools.

Home: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``. A session is ``projects/<P>/<sessionId>.jsonl`` (``<P>`` its cwd
with every character outside ``[A-Za-z0-9]`` turned into ``-``); a subagent's is
``projects/<P>/<sessionId>/subagents/agent-<agentId>.jsonl`` beside ``agent-<agentId>.meta.json`` (its
``description``). Only the ``user`` and ``assistant`` records are the conversation: ``api-request-blob`` records
copy the same blocks again and are never read as calls.

- ``TodoWrite``: a ``tool_use`` whose ``tool_result`` is not ``is_error`` was accepted; the list it left is the
  result record's ``toolUseResult.newTodos`` where Claude Code wrote it (the main session) and the call's own
  ``todos`` where it did not (a subagent's results carry no ``toolUseResult``). Items ``{content, status,
  activeForm}``.
- Task tools (the default when ``CLAUDE_CODE_ENABLE_TASKS`` is not off): one JSON file per task in
  ``tasks/<sessionId>/<id>.json``, ids ``1``, ``2``, … in creation order; the standing plan is those files in id
  order (``subject``, ``status``); the transcript's accepted ``TaskCreate``/``TaskUpdate`` calls give the writes
  (``status: deleted`` removes a task). Subagents get no Task tools.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_todo.coding_agents.base import AgentPlanItem, AgentSession, PlanWrite, items, standing
from dsh_todo.coding_agents.jsonl import FoldingReader, cannot, epoch, mtime

AGENT = "claude"
TODO_TOOL = "TodoWrite"
TASK_TOOLS = frozenset({"TaskCreate", "TaskUpdate"})
QUESTION_TOOL = "AskUserQuestion"
"""A call of this tool still unanswered means the session waits on the person."""
TITLE_CHARS = 80


@dataclass
class _Fold:
    """What one pass over a transcript keeps: only what the plan needs (pending plan calls, the accepted writes,
    the task list as the transcript builds it, where the session runs and whether its turn is open)."""

    path: Path
    pending: dict[str, tuple[str, Any, float | None]] = field(default_factory=dict)
    writes: list[PlanWrite] = field(default_factory=list)
    tasks: dict[str, AgentPlanItem] = field(default_factory=dict)
    used_tasks: bool = False
    cwd: str | None = None
    session_id: str | None = None
    title: str | None = None
    turn_open: bool | None = None
    question: str | None = None
    seen: int = 0

    def see(self, record: dict[str, Any]) -> None:
        self.seen += 1
        if self.cwd is None and isinstance(record.get("cwd"), str):
            self.cwd = record["cwd"]
        if self.session_id is None and isinstance(record.get("sessionId"), str):
            self.session_id = record["sessionId"]
        kind = record.get("type")
        if kind not in ("assistant", "user"):
            return
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if kind == "user" and isinstance(content, str):
            if self.title is None:
                self.title = " ".join(content.split())[:TITLE_CHARS] or None
            self.turn_open = True
            return
        if not isinstance(content, list):
            return
        blocks = [block for block in content if isinstance(block, dict)]
        if kind == "assistant":
            assert isinstance(message, dict)
            self.turn_open = message.get("stop_reason") != "end_turn"
            for block in blocks:
                if block.get("type") != "tool_use":
                    continue
                name = block.get("name")
                if name == TODO_TOOL or name in TASK_TOOLS:
                    self.pending[str(block.get("id"))] = (str(name), block.get("input"), epoch(record.get("timestamp")))
                elif name == QUESTION_TOOL:
                    self.question = str(block.get("id"))
            return
        self.turn_open = True
        for block in blocks:
            if block.get("type") != "tool_result":
                continue
            call_id = str(block.get("tool_use_id"))
            if call_id == self.question:
                self.question = None
            call = self.pending.pop(call_id, None)
            if call is None or block.get("is_error"):
                continue  # not a plan call, or one Claude Code refused: it changed nothing
            name, arguments, at = call
            result = record.get("toolUseResult")
            if name == TODO_TOOL:
                self._todo_write(arguments, result, at)
            else:
                self._task_write(name, arguments, result, at)

    def _todo_write(self, arguments: Any, result: Any, at: float | None) -> None:
        todos = result.get("newTodos") if isinstance(result, dict) and "newTodos" in result else (
            arguments.get("todos") if isinstance(arguments, dict) else None)
        self.writes.append(PlanWrite(_todo_items(todos, self.path), at, TODO_TOOL, arguments, result))

    def _task_write(self, name: str, arguments: Any, result: Any, at: float | None) -> None:
        self.used_tasks = True
        arguments = arguments if isinstance(arguments, dict) else {}
        if name == "TaskCreate":
            task = result.get("task") if isinstance(result, dict) else None
            if not (isinstance(task, dict) and task.get("id") is not None):
                raise ValueError(cannot(AGENT, self.path, "a TaskCreate result names no task id"))
            subject = arguments.get("subject", task.get("subject", ""))
            self.tasks[str(task["id"])] = AgentPlanItem(str(subject), "pending")
        else:
            task_id = str(arguments.get("taskId"))
            before = self.tasks.get(task_id, AgentPlanItem("", "pending"))
            status = arguments.get("status", before.status)
            if status == "deleted":
                self.tasks.pop(task_id, None)
            else:
                self.tasks[task_id] = AgentPlanItem(str(arguments.get("subject", before.content)), str(status))
        listed = tuple(self.tasks[key] for key in sorted(self.tasks, key=_id_order))
        self.writes.append(PlanWrite(listed, at, name, arguments, result))


def _todo_items(todos: Any, path: Path) -> tuple[AgentPlanItem, ...]:
    if not isinstance(todos, list):
        raise ValueError(cannot(AGENT, path, "an accepted TodoWrite carries no list of todos"))
    pairs = []
    for todo in todos:
        if not (isinstance(todo, dict) and isinstance(todo.get("content"), str)
                and isinstance(todo.get("status"), str)):
            raise ValueError(cannot(AGENT, path, f"a TodoWrite item is not {{content, status}}: {todo!r:.80}"))
        pairs.append((todo["content"], todo["status"]))
    return items(pairs)


def _id_order(task_id: str) -> tuple[int, str]:
    return (int(task_id), "") if task_id.isdigit() else (1 << 62, task_id)


def task_files(folder: Path) -> list[Path]:
    """The task files of one list, in id order (``1.json``, ``2.json``, …; ``.lock`` and the like left out)."""
    try:
        found = [entry for entry in folder.iterdir() if entry.suffix == ".json" and not entry.name.startswith(".")]
    except OSError:
        return []
    return sorted(found, key=lambda entry: _id_order(entry.stem))


def read_tasks(folder: Path) -> tuple[AgentPlanItem, ...]:
    """The standing list of a Task-tools session: its task files in id order."""
    listed = []
    for entry in task_files(folder):
        try:
            task = json.loads(entry.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue  # deleted between the listing and the read
        except ValueError:
            raise ValueError(cannot(AGENT, entry, "a task file is not JSON")) from None
        if not (isinstance(task, dict) and isinstance(task.get("subject"), str)
                and isinstance(task.get("status"), str)):
            raise ValueError(cannot(AGENT, entry, "a task file has no subject and status"))
        listed.append(AgentPlanItem(task["subject"], task["status"]))
    return tuple(listed)


class ClaudeReader(FoldingReader[_Fold]):
    """Claude Code's :class:`~dsh_todo.coding_agents.base.Reader`."""

    agent = AGENT
    names_hold_ids = True
    """``<sessionId>.jsonl``, ``agent-<agentId>.jsonl``: :func:`~dsh_todo.coding_agents.discover.find` reads no
    other file for an id."""

    def default_home(self) -> Path:
        configured = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(configured) if configured else Path.home() / ".claude"

    def session_paths(self, home: Path) -> list[Path]:
        projects = home / "projects"
        if not projects.is_dir():
            return []
        return sorted([*projects.glob("*/*.jsonl"), *projects.glob("*/*/subagents/agent-*.jsonl")])

    def _fold(self, path: Path) -> _Fold:
        return _Fold(path)

    def _sessions(self, path: Path, fold: _Fold) -> list[AgentSession]:
        if fold.seen and fold.session_id is None:
            raise ValueError(cannot(AGENT, path, "no record names its sessionId"))
        sub = path.parent.name == "subagents" and path.stem.startswith("agent-")
        updated = mtime(path)
        plan = standing(fold.writes)
        watch: tuple[str, ...] = ()
        title = fold.title
        if sub:
            session_id, parent = path.stem.removeprefix("agent-"), path.parent.parent.name
            title = _description(path.with_name(f"{path.stem}.meta.json")) or title
        else:
            session_id, parent = path.stem, None
            home = path.parent.parent.parent
            folder = home / "tasks" / session_id
            files = task_files(folder)
            if fold.used_tasks or files:
                plan = read_tasks(folder) if files else (plan if fold.used_tasks else None)
                updated = max([updated, *(mtime(entry) for entry in files)])
                watch = (str(folder),)
        return [AgentSession(AGENT, session_id, path, fold.cwd, updated, plan, tuple(fold.writes), parent=parent,
                             title=title, turn_open=fold.turn_open, waiting=fold.question is not None,
                             extra={"watch": watch} if watch else {})]


def _description(meta: Path) -> str | None:
    try:
        found = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = found.get("description") if isinstance(found, dict) else None
    return value if isinstance(value, str) else None


READER = ClaudeReader()
