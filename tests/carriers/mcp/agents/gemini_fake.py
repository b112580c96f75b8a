"""A scripted model in the Gemini API's wire format, for Gemini CLI (``GOOGLE_GEMINI_BASE_URL`` points at it).

``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` is answered as server-sent events, each a
``GenerateContentResponse``; ``:generateContent`` as one; ``:countTokens`` with a small count. A call of a tool is a
``functionCall`` part, its result comes back as a ``functionResponse`` part of the next request's contents.

Gemini CLI sends its model more than the agent's turns (a check of who speaks next, a loop check, a model router's
choice, each asking for JSON against a response schema), so :func:`script` keys on what a request is, not on its
order: a request whose tools lack ours is a side request, answered with JSON that fits its schema when it gives one,
else a short text; one that offers our tool is a turn of the agent, and the number of our tool's results it already
carries says which call comes next.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.carriers.mcp.agents.common import Answer, Reply, Request, sse

__all__ = ["TOOL_SUFFIX", "function_responses", "our_tool", "script"]

TOOL_SUFFIX = "todo_write"
"""How our tool's name ends in the declarations (Gemini CLI may prefix an MCP tool with its server's name)."""


def our_tool(body: Any) -> dict[str, Any] | None:
    """Our tool's function declaration as the request offers it, or ``None``."""
    tools = body.get("tools") if isinstance(body, dict) else None
    found = [declaration for tool in tools or [] for declaration in tool.get("functionDeclarations", [])
             if str(declaration.get("name", "")).endswith(TOOL_SUFFIX)]
    assert len(found) <= 1, f"more than one tool named *{TOOL_SUFFIX}: {[tool['name'] for tool in found]}"
    return found[0] if found else None


def function_responses(body: Any) -> list[dict[str, Any]]:
    """The ``functionResponse`` parts answering calls of our tool, in order: what the model read back from it."""
    found = []
    for content in body.get("contents", []) if isinstance(body, dict) else []:
        found += [part["functionResponse"] for part in content.get("parts", []) if "functionResponse" in part
                  and str(part["functionResponse"].get("name", "")).endswith(TOOL_SUFFIX)]
    return found


def _response(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "fake"}


def _reply(request: Request, parts: list[dict[str, Any]]) -> Reply:
    """``parts`` as one model response, streamed when the request was for a stream."""
    if ":streamGenerateContent" in request.path:
        return Reply(events=[sse(_response(parts))])
    return Reply(body=_response(parts))


NO_LOOP = {"unproductive_state_confidence": 0}
"""Answers Gemini CLI's checks need that the generic rule would get wrong: its loop check's confidence (0: no loop)."""


def _fitting(schema: Any, name: str = "") -> Any:
    """A small value that fits a response schema: the first choice of each enum (for Gemini CLI's next-speaker
    check, the user), 1 for a number (its router's complexity score must be at least 1), :data:`NO_LOOP` by name."""
    if name in NO_LOOP:
        return NO_LOOP[name]
    if not isinstance(schema, dict):
        return ""
    kind = str(schema.get("type", "")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        return {key: _fitting(value, key) for key, value in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind in ("number", "integer"):
        return 1
    return "fake"


def _side(request: Request) -> Reply:
    """A request that is not a turn of the agent: JSON fitting its response schema when it gives one, else text."""
    config = request.body.get("generationConfig", {}) if isinstance(request.body, dict) else {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if schema is not None:
        return _reply(request, [{"text": json.dumps(_fitting(schema))}])
    return _reply(request, [{"text": "Planning"}])


def script(calls: Sequence[str], final: str) -> Answer:
    """The agent's turns: a call of our tool with each of ``calls`` (JSON text) in order, one per request, then
    ``final``; side requests get what :func:`_side` gives, token counts a small number."""

    def answer(request: Request) -> Reply:
        path = request.path.split("?")[0]
        if request.method != "POST" or ":" not in path:
            return Reply(404, {"error": {"code": 404, "message": path, "status": "NOT_FOUND"}})
        if path.endswith(":countTokens"):
            return Reply(body={"totalTokens": 10})
        tool = our_tool(request.body)
        if tool is None:
            return _side(request)
        done = len(function_responses(request.body))
        if done < len(calls):
            return _reply(request, [{"functionCall": {"name": tool["name"], "args": json.loads(calls[done])}}])
        return _reply(request, [{"text": final}])

    return answer
