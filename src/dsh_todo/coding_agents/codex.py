"""Codex's plans (found in 0.171.0; decision 0047): ``update_plan`` calls in its rollout files.

Home: ``$CODEX_HOME``, else ``~/.codex``. A thread is ``sessions/YYYY/MM/DD/rollout-<local time>-<threadId>.jsonl``
(``archived_sessions/`` once archived); records ``{"timestamp", "type", "payload"}``, the first a
``session_meta`` (``payload.id`` the thread, ``cwd``, ``cli_version``; a subagent's also ``parent_thread_id``).

A call is a ``response_item`` ``{"type": "function_call", "name": "update_plan", "call_id", "arguments"}`` with
``arguments`` a JSON *string* ``{"explanation", "plan": [{"step", "status"}]}``; its answer a ``response_item``
``{"type": "function_call_output", "call_id", "output"}``: ``Plan updated`` when Codex accepted it, an error text
when it refused (an unknown status). The standing plan is the ``plan`` of the last accepted call; no separate plan
event is kept. ``event_msg`` ``task_started`` / ``task_complete`` (or ``turn_aborted``) open and close a turn.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_todo.coding_agents.base import AgentSession, PlanWrite, items, standing
from dsh_todo.coding_agents.jsonl import FoldingReader, cannot, epoch, mtime

AGENT = "codex"
PLAN_TOOL = "update_plan"
ACCEPTED = "Plan updated"
TITLE_CHARS = 80
QUESTION_TOOL = "request_user_input"
"""A call of this tool still unanswered means the thread waits on the person."""


@dataclass
class _Fold:
    path: Path
    meta: dict[str, Any] | None = None
    pending: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    writes: list[PlanWrite] = field(default_factory=list)
    turn_open: bool | None = None
    question: str | None = None
    title: str | None = None

    def see(self, record: dict[str, Any]) -> None:
        if self.meta is None and record.get("type") != "session_meta":
            raise ValueError(cannot(AGENT, self.path, "its first record is not session_meta"))
        kind, payload = record.get("type"), record.get("payload")
        if not isinstance(payload, dict):
            return
        if kind == "session_meta":
            if self.meta is None:
                self.meta = payload
            return
        if kind == "event_msg":
            event = payload.get("type")
            if event == "task_started":
                self.turn_open = True
            elif event in ("task_complete", "turn_aborted"):
                self.turn_open = False
            return
        if kind != "response_item":
            return
        item = payload.get("type")
        if item == "message" and payload.get("role") == "user" and self.title is None:
            self.title = _prompt(payload.get("content"))
        elif item == "function_call":
            name, call_id = payload.get("name"), str(payload.get("call_id"))
            if name == PLAN_TOOL:
                self.pending[call_id] = (str(payload.get("arguments")), epoch(record.get("timestamp")))
            elif name == QUESTION_TOOL:
                self.question = call_id
        elif item == "function_call_output":
            call_id = str(payload.get("call_id"))
            if call_id == self.question:
                self.question = None
            call = self.pending.pop(call_id, None)
            output = _text(payload.get("output"))
            if call is not None and output == ACCEPTED:
                self.writes.append(self._write(*call, output))

    def _write(self, raw: str, at: float | None, output: str) -> PlanWrite:
        try:
            arguments = json.loads(raw)
        except ValueError:
            why = "an accepted update_plan call's arguments are not JSON"
            raise ValueError(cannot(AGENT, self.path, why)) from None
        plan = arguments.get("plan") if isinstance(arguments, dict) else None
        if not isinstance(plan, list):
            raise ValueError(cannot(AGENT, self.path, "an accepted update_plan call carries no plan list"))
        pairs = []
        for step in plan:
            if not (isinstance(step, dict) and isinstance(step.get("step"), str)
                    and isinstance(step.get("status"), str)):
                raise ValueError(cannot(AGENT, self.path, f"an update_plan step is not {{step, status}}: {step!r:.80}"))
            pairs.append((step["step"], step["status"]))
        return PlanWrite(items(pairs), at, PLAN_TOOL, arguments, output)


def _prompt(content: Any) -> str | None:
    """The person's words in a user message (Codex's own ``<environment_context>`` and the like left out)."""
    texts = [part.get("text") for part in content if isinstance(part, dict)] if isinstance(content, list) else []
    words = " ".join(text for text in texts if isinstance(text, str) and not text.lstrip().startswith("<"))
    return " ".join(words.split())[:TITLE_CHARS] or None


def _text(output: Any) -> str | None:
    """A call's output as text: a string, or (other versions) an object's ``content``."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return str(output["content"])
    return None


def _parent(meta: dict[str, Any]) -> str | None:
    parent = meta.get("parent_thread_id")
    if isinstance(parent, str):
        return parent
    source = meta.get("source")
    spawn = source.get("subagent", {}).get("thread_spawn") if isinstance(source, dict) else None
    found = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return found if isinstance(found, str) else None


class CodexReader(FoldingReader[_Fold]):
    """Codex's :class:`~dsh_todo.coding_agents.base.Reader`."""

    agent = AGENT
    names_hold_ids = True
    """``rollout-<time>-<threadId>.jsonl``: :func:`~dsh_todo.coding_agents.discover.find` reads no other file for
    an id."""

    def default_home(self) -> Path:
        configured = os.environ.get("CODEX_HOME")
        return Path(configured) if configured else Path.home() / ".codex"

    def session_paths(self, home: Path) -> list[Path]:
        found: list[Path] = []
        for folder in ("sessions", "archived_sessions"):
            if (home / folder).is_dir():
                found += (home / folder).rglob("rollout-*.jsonl")
        return sorted(found)

    def _fold(self, path: Path) -> _Fold:
        return _Fold(path)

    def _sessions(self, path: Path, fold: _Fold) -> list[AgentSession]:
        meta = fold.meta
        if meta is None:
            return []  # created, nothing written yet
        thread = meta.get("id")
        if not isinstance(thread, str):
            raise ValueError(cannot(AGENT, path, "its session_meta names no thread id"))
        cwd = meta.get("cwd")
        nickname = meta.get("agent_nickname")
        return [AgentSession(AGENT, thread, path, cwd if isinstance(cwd, str) else None, mtime(path),
                             standing(fold.writes), tuple(fold.writes), parent=_parent(meta),
                             title=nickname if isinstance(nickname, str) else fold.title, turn_open=fold.turn_open,
                             waiting=fold.question is not None,
                             extra={"version": meta.get("cli_version")})]


READER = CodexReader()
