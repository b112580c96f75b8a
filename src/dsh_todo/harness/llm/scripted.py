"""A model that replays a fixed list of replies: offline demos, tests, and reproducible bug reports.

The script format (also ``dsh-todo run --script FILE``): a JSON list, one entry per model request, each
``{"text": str?, "tool_calls": [{"name": str, "arguments": str, "id": str?}]?}``; ``arguments`` is the raw string
the model sent, so malformed JSON can be scripted too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_todo.harness.llm.base import ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.jsonutil import loads


def parse_script(entries: Any) -> list[ModelReply]:
    """Validate a script; errors name the entry so a hand-written file is easy to fix."""
    if not isinstance(entries, list):
        raise ModelError("a model script must be a JSON list of replies")
    replies: list[ModelReply] = []
    counter = 0
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ModelError(f"script entry {index} must be an object")
        unknown = set(entry) - {"text", "tool_calls"}
        if unknown:
            raise ModelError(f"script entry {index} has unknown keys {sorted(unknown)}")
        text = entry.get("text", "")
        if not isinstance(text, str):
            raise ModelError(f"script entry {index}: text must be a string")
        calls: list[ToolCallRequest] = []
        raw_calls = entry.get("tool_calls", [])
        if not isinstance(raw_calls, list):
            raise ModelError(f"script entry {index}: tool_calls must be a list")
        for position, call in enumerate(raw_calls):
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                raise ModelError(f"script entry {index}, call {position}: needs a string name")
            arguments = call.get("arguments", "")
            if not isinstance(arguments, str):
                raise ModelError(f"script entry {index}, call {position}: arguments must be the raw JSON string")
            call_id = call.get("id") or f"call_{counter:02d}_scripted"
            counter += 1
            calls.append(ToolCallRequest(str(call_id), call["name"], arguments))
        replies.append(ModelReply(text=text, tool_calls=calls, finish_reason="tool_calls" if calls else "stop"))
    return replies


def load_script(path: str | Path) -> list[ModelReply]:
    try:
        data = loads(Path(path).read_bytes())
    except OSError as exc:
        raise ModelError(f"cannot read script {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ModelError(f"script {path} is not JSON: {exc}") from None
    return parse_script(data)


class ScriptedModel:
    """Answers each request with the next scripted reply."""

    provider = "scripted"

    def __init__(self, replies: Sequence[ModelReply], model: str = "script") -> None:
        self._replies = list(replies)
        self._next = 0
        self.model = model
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if self._next >= len(self._replies):
            raise ModelError(f"the scripted model has no reply left (it had {len(self._replies)})")
        reply = self._replies[self._next]
        self._next += 1
        return reply

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next
