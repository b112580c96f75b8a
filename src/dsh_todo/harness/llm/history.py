"""The conversation a model is shown, as the log holds it and no wire spells it.

The agent loop derives it from the log alone (:func:`dsh_todo.harness.agent_loop.derive_history`); each adapter
renders it in its own wire: :mod:`~dsh_todo.harness.llm.chat` as OpenAI chat messages,
:mod:`~dsh_todo.harness.llm.messages` as Anthropic Messages. One derivation, so the two wires cannot disagree about
what happened; two small renderers, so each wire says it the way its API wants (the error flag, the arguments as a
string or as an object).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCallRequest:
    """One call the model made; ``arguments`` the raw string it produced."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class UserText:
    """What the person said."""

    text: str


@dataclass(frozen=True)
class AssistantTurn:
    """What the model answered: its text and its tool calls, each call's arguments the raw string it produced."""

    text: str
    calls: tuple[ToolCallRequest, ...] = ()


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's answer to one call: the model-visible text and whether the call failed (``isError``)."""

    call_id: str
    text: str
    is_error: bool = False


HistoryEntry = UserText | AssistantTurn | ToolOutcome
