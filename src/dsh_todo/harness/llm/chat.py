"""The history as OpenAI chat-completions messages, as DSH 0.1.1's DeepSeek adapter sent it.

A tool result is a ``role: "tool"`` message whose content is the model-visible text: the wire has no error flag, so
the ``Error: `` prefix is how the model learns a call failed. A call's ``arguments`` go as the raw string the model
produced.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dsh_todo.harness.llm.history import AssistantTurn, HistoryEntry, ToolOutcome, UserText


def chat_messages(history: Iterable[HistoryEntry]) -> list[dict[str, Any]]:
    """The chat messages for ``history`` (the system prompt, if any, goes before them)."""
    messages: list[dict[str, Any]] = []
    for entry in history:
        if isinstance(entry, UserText):
            messages.append({"role": "user", "content": entry.text})
        elif isinstance(entry, AssistantTurn):
            message: dict[str, Any] = {"role": "assistant", "content": entry.text or None}
            if entry.calls:
                message["tool_calls"] = [{"id": call.id, "type": "function",
                                          "function": {"name": call.name, "arguments": call.arguments}}
                                         for call in entry.calls]
            messages.append(message)
        elif isinstance(entry, ToolOutcome):
            messages.append({"role": "tool", "tool_call_id": entry.call_id, "content": entry.text})
    return messages
