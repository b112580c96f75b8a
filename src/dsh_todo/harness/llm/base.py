"""The model seam: one request (history + tools) in, one assistant reply out.

Kept to what the loop needs; streaming is a transport detail of each adapter. ``arguments`` stays the raw string
the model produced, because the log records it verbatim (SPEC §4.3) and the loop parses it by the reference's rules.
The request carries the history and the tools as no wire spells them (:mod:`~dsh_todo.harness.llm.history`, the
registry's ``{name, description, parameters}``); each adapter renders them for its API.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsh_todo.harness.errors import ModelError as ModelError
from dsh_todo.harness.llm.chat import chat_messages
from dsh_todo.harness.llm.history import HistoryEntry
from dsh_todo.harness.llm.history import ToolCallRequest as ToolCallRequest
from dsh_todo.harness.llm.wire import function_tool


@dataclass(frozen=True)
class ModelRequest:
    history: Sequence[HistoryEntry]
    schemas: Sequence[dict[str, Any]]
    """The tools as the registry gives them (``ctx.tools.schemas()``)."""
    system: str | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The history as OpenAI chat messages (no system message): what the chat-completions wire sends after the
        system prompt, and the form a scripted model's recorded requests are most easily read in."""
        return chat_messages(self.history)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function tools (:func:`~dsh_todo.harness.llm.wire.function_tool`)."""
        return [function_tool(schema) for schema in self.schemas]


@dataclass(frozen=True)
class ModelReply:
    text: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None


class Model(Protocol):
    provider: str
    model: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...
