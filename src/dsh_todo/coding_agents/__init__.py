"""The plans other coding agents keep (Claude Code, Codex, Gemini CLI, opencode), read from their own session files.

Read-only by rule: nothing here ever writes, locks or moves a file another agent owns. Each agent has one module
(``claude``, ``codex``, ``gemini``, ``opencode``) providing a :class:`~dsh_todo.coding_agents.base.Reader`; the
registry in :mod:`.base` imports a module only when its agent is chosen, so a command that reads none of them pays
nothing. The shapes every reader returns are in :mod:`.base`.
"""

from __future__ import annotations

from dsh_todo.coding_agents.base import (
    AGENTS,
    AgentPlanItem,
    AgentSession,
    PlanWrite,
    Reader,
    UnknownAgentError,
    reader,
    selected,
)

__all__ = ["AGENTS", "AgentPlanItem", "AgentSession", "PlanWrite", "Reader", "UnknownAgentError", "reader", "selected"]
