"""What a ``tool/result`` event answers, in either log format: one place that knows both message shapes.

Format v0 (DSH 0.1) wraps each answer in a user message: ``{"source", "content": [{"type": "tool-result",
"toolCallId", "content": [...], "isError"}], "role": "user", "id"}``. Format v4 (DSH 0.2) makes the message itself the
answer: ``{"role": "tool", "source", "toolCallId", "content": [...], "isError", "id"}``. Every reader of results (the
model's history, the terminal, ACP, telemetry) goes through :func:`answers`, so none of them breaks on either log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Answer(NamedTuple):
    """One answered call: its id, the content blocks the model sees, and whether it failed."""

    call_id: Any
    content: Any
    is_error: bool


def answers(message: object) -> list[Answer]:
    """The answers a ``tool/result`` message carries (v4: itself; v0: each ``tool-result`` block); none for a
    message of neither shape."""
    if not isinstance(message, Mapping):
        return []
    if message.get("role") == "tool":
        return [Answer(message.get("toolCallId"), message.get("content"), message.get("isError") is True)]
    content = message.get("content")
    return [Answer(block.get("toolCallId"), block.get("content"), block.get("isError") is True)
            for block in content if isinstance(block, Mapping) and block.get("type") == "tool-result"] \
        if isinstance(content, (list, tuple)) else []
