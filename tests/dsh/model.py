"""A scripted Anthropic-Messages model for the real ``dsh``: each prompt's turn is a list of steps.

DSH 0.2.1's ``deepseek-official`` provider posts every model request to ``{DEEPSEEK_BASE_URL}/v1/messages`` and reads
the answer as server-sent events; the wire pieces (the SSE frames of a text or of ``tool_use`` blocks) are
:mod:`tests.carriers.mcp.agents.anthropic_fake`'s, served by :func:`tests.carriers.mcp.agents.common.fake_model`. DSH
needs nothing more of a model: no thinking blocks, no signatures (the shared fixtures' model sent them; a turn goes
through without).

A DSH turn sends two kinds of request: the agent's steps (with its tool list, ``todo_write`` among 25 tools) and one
title request on a session's first turn (no tools). :func:`steps` keys on what a request is, never on its order: a
request without tools gets a title; a step request is matched to its turn by the prompt the person typed (the text of
a user message in its history; DSH adds its runtime context as a second text block of that message), and the number
of ``tool_result`` blocks after that message says which step comes next. A resumed session's requests carry the
earlier turns too, which therefore never shift the count.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.carriers.mcp.agents.anthropic_fake import text, tool_uses
from tests.carriers.mcp.agents.common import Answer, Reply, Request

__all__ = ["TITLE", "Call", "Hold", "Say", "Step", "call", "steps", "todos"]

TITLE = "Scripted session"
"""What the title request is answered with."""

HOLD_SECONDS = 120
"""How long a :class:`Hold` keeps its reply back at most, if the test never releases it."""


@dataclass(frozen=True)
class Call:
    """A model step calling ``todo_write`` with ``raw`` as its arguments: JSON text as a model streams it (not
    necessarily valid JSON)."""

    raw: str


@dataclass(frozen=True)
class Say:
    """A model step answering ``words`` and ending the turn."""

    words: str


@dataclass
class Hold:
    """A model step whose reply is held back: :attr:`arrived` is set once DSH asks for it, and the reply (``words``)
    goes out only once :attr:`released` is set. The killed-turn test kills ``dsh`` in between."""

    words: str = "released"
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)


Step = Call | Say | Hold


def todos(*items: tuple[str, str]) -> str:
    """The arguments of a ``todo_write`` call as JSON text: ``{"todos": [{"content", "status"}…]}``."""
    return json.dumps({"todos": [{"content": content, "status": status} for content, status in items]},
                      ensure_ascii=False)


def call(*items: tuple[str, str]) -> Call:
    """A step calling ``todo_write`` with these ``(content, status)`` items."""
    return Call(todos(*items))


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _position(body: Any, prompts: Sequence[str]) -> tuple[str, int] | None:
    """The prompt whose turn a step request belongs to, and how many tool results that turn already holds."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        said = [block.get("text") for block in _blocks(message) if block.get("type") == "text"]
        found = [prompt for prompt in prompts if prompt in said]
        if found:
            done = sum(1 for later in messages[index + 1:] if later.get("role") == "user"
                       for block in _blocks(later) if block.get("type") == "tool_result")
            return found[0], done
    return None


def steps(turns: Mapping[str, Sequence[Step]]) -> Answer:
    """Answer each turn's requests with its steps in order (``turns`` maps a prompt to them; see the module). A
    request past the last step, or of a prompt the script does not know, is answered with an HTTP 500 naming it,
    which fails DSH's turn loudly instead of looping."""
    prompts = list(turns)

    def answer(request: Request) -> Reply:
        path = request.path.split("?")[0]
        if request.method != "POST" or not path.endswith("/v1/messages"):
            return Reply(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        body = request.body
        if not (isinstance(body, dict) and body.get("tools")):
            return text(body, TITLE)
        where = _position(body, prompts)
        if where is None:
            raise LookupError("a step request of no scripted prompt")
        prompt, done = where
        script = turns[prompt]
        if done >= len(script):
            raise LookupError(f"step {done + 1} of {prompt!r}, which has {len(script)} steps")
        step = script[done]
        if isinstance(step, Call):
            return tool_uses(body, [("todo_write", step.raw, f"toolu_{prompts.index(prompt)}_{done}")])
        if isinstance(step, Hold):
            step.arrived.set()
            step.released.wait(HOLD_SECONDS)
        return text(body, step.words)

    return answer
