"""What a reader of another coding agent's plans returns, and which agents a user chose.

Named tuples, not dataclasses: every ``dsh-todo plan`` process imports this module to parse ``--agents``, and the
three classes cost 2.3–2.8 ms of import as named tuples against 3.6–5.0 ms as frozen dataclasses (2026-12-06, load
~3). The shapes are the board's and the commands' one view of a foreign session, whatever the agent: its standing
plan as that agent's model last wrote it (statuses kept as written: ours where they mean the same, any other shown as
it is, never dropped), every plan write in order (for the diff row), where it runs and who delegated it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

AGENTS: Mapping[str, str] = {
    "claude": "dsh_todo.coding_agents.claude",
    "codex": "dsh_todo.coding_agents.codex",
    "gemini": "dsh_todo.coding_agents.gemini",
    "opencode": "dsh_todo.coding_agents.opencode",
}
"""Each agent's name (as ``--agents`` spells it) and the module holding its :class:`Reader` as ``READER``."""

ENVIRONMENT = "DSH_TODO_AGENTS"
"""The environment variable that chooses the agents when ``--agents`` is not given."""


class UnknownAgentError(ValueError):
    """An ``--agents`` value naming no agent we read; its text is the one line the user sees."""


class AgentPlanItem(NamedTuple):
    """One item as the agent's model wrote it: ``status`` kept as written (``pending``, ``in_progress``,
    ``completed`` mean ours; anything else, e.g. Gemini's ``cancelled``, is shown as it is)."""

    content: str
    status: str

    def as_json(self) -> dict[str, str]:
        """The item in a DSH plan's shape (``plan --json``)."""
        return {"content": self.content, "status": self.status}


class PlanWrite(NamedTuple):
    """One call of the agent's plan tool that the agent accepted: the list after it, when (epoch seconds), the tool's
    name, and its raw arguments and result as logged (the board's "Inspect")."""

    items: tuple[AgentPlanItem, ...]
    at: float | None
    tool: str
    arguments: Any = None
    result: Any = None


class AgentSession(NamedTuple):
    """One session of another agent, as read from its files at one moment.

    ``plan`` is the standing plan (``None`` when the agent never wrote one or cleared it the way it clears);
    ``updated`` when its files last changed (epoch seconds); ``parent`` the id of the session that delegated it
    (a subagent), ``None`` for a top-level session; ``turn_open`` whether its last turn is still running (``None``
    when the log cannot tell); ``waiting`` whether it waits on the person (an approval or a question it recorded).
    """

    agent: str
    id: str
    path: Path
    project: str | None
    updated: float
    plan: tuple[AgentPlanItem, ...] | None
    writes: tuple[PlanWrite, ...] = ()
    parent: str | None = None
    title: str | None = None
    turn_open: bool | None = None
    waiting: bool = False
    extra: Mapping[str, Any] = MappingProxyType({})


class Reader(Protocol):
    """One agent's reader: where its home is, which sessions it holds (cheaply), and one session read whole."""

    agent: str

    def default_home(self) -> Path:
        """The agent's own home on this machine (honouring the agent's own variable, e.g. ``$CLAUDE_CONFIG_DIR``)."""

    def session_paths(self, home: Path) -> list[Path]:
        """Every session file (or store) under ``home``, without parsing them; missing homes give ``[]``."""

    def read(self, path: Path) -> list[AgentSession]:
        """The sessions one file (or store) holds; a file this version cannot read raises ``ValueError`` with a line
        naming the agent and the file (never a silent empty plan)."""


def reader(agent: str) -> Reader:
    """The reader of ``agent``, its module imported now."""
    if agent not in AGENTS:
        raise UnknownAgentError(_unknown(agent))
    module = importlib.import_module(AGENTS[agent])
    found: Reader = module.READER
    return found


def selected(option: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The agents a user chose: ``--agents`` (``all``, ``none`` or a comma list), else ``$DSH_TODO_AGENTS``, else none
    (reading another program's transcripts is the user's choice, never a default)."""
    value = option if option is not None else (environ if environ is not None else os.environ).get(ENVIRONMENT)
    if value is None or value.strip() in ("", "none"):
        return []
    if value.strip() == "all":
        return list(AGENTS)
    names = [name.strip() for name in value.split(",") if name.strip()]
    for name in names:
        if name not in AGENTS:
            raise UnknownAgentError(_unknown(name))
    return list(dict.fromkeys(names))


def _unknown(name: str) -> str:
    return f"unknown agent {name!r}: choose all, none or a comma list of {','.join(AGENTS)}"


def standing(writes: Sequence[PlanWrite]) -> tuple[AgentPlanItem, ...] | None:
    """The plan after the last accepted write, ``None`` when there was none."""
    return writes[-1].items if writes else None


def items(pairs: Iterable[tuple[str, str]]) -> tuple[AgentPlanItem, ...]:
    """Plan items from ``(content, status)`` pairs, in the agent's order."""
    return tuple(AgentPlanItem(content, status) for content, status in pairs)
