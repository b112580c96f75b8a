"""Gemini CLI's plans: the ``write_todos`` calls in its chat files, replayed the way Gemini CLI loads them.

Found by running Gemini CLI 0.61.0 headless (decision 0048). Its home is ``$GEMINI_CLI_HOME/.gemini``, else
``~/.gemini``; each project has ``tmp/<project>/chats/session-<UTC minute>-<first 8 of the id>.jsonl``, and a
subagent's chat is ``tmp/<project>/chats/<parent session id>/<its session id>.jsonl`` (the folder is the parent
link). ``tmp/<project>/.project_root`` holds the project's folder.

A chat file is a log of records, replayed in order (as Gemini CLI's own loader does): the first holds the session's
metadata (``sessionId``, ``projectHash``, ``kind``); a record with a string ``id`` is a message, and a later record
with the same id replaces it in place (a model message is written first without its tool calls, then again with
them); ``{"$set": {...}}`` merges metadata, and a ``messages`` array there replaces every message;
``{"$rewindTo": id}`` drops that message and every later one (all of them when the id is unknown). A
``write_todos`` call is an entry of a model message's ``toolCalls`` with ``args.todos`` (``description``,
``status``); the CLI refuses a bad list (``status`` ``error``), so only ``success`` calls are writes. The standing
plan is the last write's list, statuses as written (``cancelled`` and ``blocked`` are Gemini's own words).

Memory stays bounded by the number of messages, not their size: the file is read line by line and a message is
kept only as its id and the plan writes it carries.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dsh_todo.coding_agents.base import AgentPlanItem, AgentSession, PlanWrite, items
from dsh_todo.coding_agents.jsonl import epoch

AGENT = "gemini"
TOOL = "write_todos"
ACCEPTED = "success"
"""The ``status`` of a tool call Gemini CLI ran; a refused call is stored with ``error``."""
PROJECT_ROOT = ".project_root"
CONTEXT_PREFIX = "<session_context>"
"""How the first user message (the context Gemini CLI sends, not the person's words) starts."""


class GeminiReader:
    """The :class:`~dsh_todo.coding_agents.base.Reader` of Gemini CLI's chat files."""

    agent = AGENT

    def default_home(self) -> Path:
        """``$GEMINI_CLI_HOME/.gemini`` when set (Gemini CLI's own variable), else ``~/.gemini``."""
        base = os.environ.get("GEMINI_CLI_HOME")
        return (Path(base) if base else Path.home()) / ".gemini"

    def session_paths(self, home: Path) -> list[Path]:
        """Every chat file under ``home/tmp/*/chats``: the sessions, then each one's subagents' folder."""
        found: list[Path] = []
        for chats in _folders(home / "tmp", "chats"):
            for entry in _entries(chats):
                if entry.is_file() and entry.name.startswith("session-") and entry.suffix == ".jsonl":
                    found.append(entry)
                elif entry.is_dir():
                    found += [child for child in _entries(entry) if child.suffix == ".jsonl" and child.is_file()]
        return found

    def read(self, path: Path) -> list[AgentSession]:
        """The one session ``path`` holds; ``ValueError`` naming Gemini CLI and the file when it is not a chat
        file this version knows."""
        try:
            stat = path.stat()
            with path.open(encoding="utf-8") as lines:
                replay = _Replay(path)
                for line in lines:
                    replay.record(line)
        except (OSError, UnicodeDecodeError) as exc:
            raise _unreadable(path, str(exc)) from exc
        return [replay.session(stat.st_mtime)]


READER = GeminiReader()


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _folders(parent: Path, child: str) -> Iterable[Path]:
    return (entry / child for entry in _entries(parent) if (entry / child).is_dir())


def _unreadable(path: Path, why: str) -> ValueError:
    return ValueError(f"Gemini CLI: cannot read {path}: {why}")


class _Replay:
    """One chat file's records applied in order, keeping per message only its id and its accepted plan writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.metadata: dict[str, Any] = {}
        self.messages: dict[str, tuple[tuple[PlanWrite, ...], bool]] = {}
        """Each message kept: its accepted plan writes, and whether it ends a turn (the model's text, no call)."""
        self.title: str | None = None

    def record(self, line: str) -> None:
        if not line.strip():
            return
        try:
            value = json.loads(line)
        except ValueError:
            return  # a line still being written, or torn: Gemini CLI's loader skips it too
        if not isinstance(value, dict):
            return
        if isinstance(value.get("$rewindTo"), str):
            self._rewind(value["$rewindTo"])
        elif isinstance(value.get("id"), str):
            self._message(value)
        elif isinstance(value.get("$set"), dict):
            update = value["$set"]
            if isinstance(update.get("messages"), list):
                self.messages.clear()
                for message in update["messages"]:
                    if isinstance(message, dict) and isinstance(message.get("id"), str):
                        self._message(message)
            self.metadata.update({key: item for key, item in update.items() if key != "messages"})
        elif isinstance(value.get("sessionId"), str) and isinstance(value.get("projectHash"), str):
            self.metadata.update({key: item for key, item in value.items() if key != "messages"})
            for message in value.get("messages") or []:
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    self._message(message)

    def _message(self, message: Mapping[str, Any]) -> None:
        ends = message.get("type") == "gemini" and not message.get("toolCalls") and bool(
            _text(message.get("content")).strip())
        self.messages[message["id"]] = (tuple(self._writes(message)), ends)
        if self.title is None and message.get("type") == "user":
            text = _text(message.get("content")).strip()
            if text and not text.startswith(CONTEXT_PREFIX):
                self.title = text

    def _writes(self, message: Mapping[str, Any]) -> Iterable[PlanWrite]:
        calls = message.get("toolCalls")
        if not isinstance(calls, list):
            return
        for call in calls:
            if not isinstance(call, dict) or call.get("name") != TOOL or call.get("status") != ACCEPTED:
                continue
            todos = call.get("args", {}).get("todos") if isinstance(call.get("args"), dict) else None
            if not isinstance(todos, list) or not all(_item(todo) for todo in todos):
                raise _unreadable(self.path, f"a {TOOL} call whose args.todos is not a list of "
                                             f"{{description, status}}: {json.dumps(call.get('args'))[:200]}")
            yield PlanWrite(items((todo["description"], todo["status"]) for todo in todos),
                            epoch(call.get("timestamp") or message.get("timestamp")), TOOL,
                            call.get("args"), call.get("result"))

    def _rewind(self, target: str) -> None:
        ids = list(self.messages)
        if target not in self.messages:
            self.messages.clear()
            return
        for dropped in ids[ids.index(target):]:
            del self.messages[dropped]

    def session(self, mtime: float) -> AgentSession:
        session_id = self.metadata.get("sessionId")
        if not isinstance(session_id, str) or not isinstance(self.metadata.get("projectHash"), str):
            raise _unreadable(self.path, "no session record (sessionId, projectHash) in it")
        writes = tuple(write for found, _ in self.messages.values() for write in found)
        plan: tuple[AgentPlanItem, ...] | None = writes[-1].items if writes and writes[-1].items else None
        folder = self.path.parent
        delegated = folder.name != "chats" and folder.parent.name == "chats"  # chats/<parent id>/: the link
        chats = folder.parent if delegated else folder
        parent = folder.name if delegated else None
        kind = self.metadata.get("kind")
        summary = self.metadata.get("summary")
        return AgentSession(
            agent=AGENT, id=session_id, path=self.path, project=_project(chats.parent, self.metadata),
            updated=mtime, plan=plan, writes=writes, parent=parent, title=self.title,
            turn_open=self._turn_open(summary), extra={"kind": kind} if isinstance(kind, str) else {})

    def _turn_open(self, summary: Any) -> bool | None:
        """Whether the last turn still runs: ``False`` once the model answered with text and no call (or a
        subagent's result was set), ``True`` while the last message is a prompt or a call, ``None`` when empty."""
        if summary is not None:
            return False
        if not self.messages:
            return None
        _, ends = next(reversed(self.messages.values()))
        return not ends


def _item(todo: Any) -> bool:
    return isinstance(todo, dict) and isinstance(todo.get("description"), str) and isinstance(todo.get("status"), str)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _project(folder: Path, metadata: Mapping[str, Any]) -> str | None:
    """The project's folder: ``.project_root`` beside the chats, else the subagent's first directory."""
    try:
        root = (folder / PROJECT_ROOT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        root = ""
    if root:
        return root
    directories = metadata.get("directories")
    if isinstance(directories, list) and directories and isinstance(directories[0], str):
        return directories[0]
    return None
