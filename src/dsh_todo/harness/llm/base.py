"""The model seam: one request (history + tools) in, one assistant reply out.

Kept to what the loop needs; streaming is a transport detail of each adapter. ``arguments`` stays the raw string
the model produced, because the log records it verbatim (SPEC §4.3) and the loop parses it by the reference's rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from dsh_todo.harness.errors import ModelError as ModelError


@dataclass(frozen=True)
class ToolCallRequest:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    system: str | None = None


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
