"""A scripted model in Anthropic's Messages wire format, for Claude Code (``ANTHROPIC_BASE_URL`` points at it).

``POST /v1/messages`` is answered as a stream of server-sent events (``message_start``, then per content block
``content_block_start``, ``content_block_delta``, ``content_block_stop``, then ``message_delta`` with the stop
reason and ``message_stop``) when the request says ``"stream": true``, else as one JSON message;
``POST /v1/messages/count_tokens`` gets a small count.

Claude Code sends its model more than the agent's turns (a title or topic request to the small model, a quota
probe, token counts), so :func:`script` keys on what a request is, not on its order: a request whose tool list lacks
our tool is a side request and gets a plain text; one that offers it is a turn of the agent, and the number of our
tool's results it already carries says which call comes next.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.carriers.mcp.agents.common import Answer, Reply, Request, sse

__all__ = ["TOOL_SUFFIX", "our_tool", "script", "text", "tool_names", "tool_results", "tool_use", "tool_uses"]

TOOL_SUFFIX = "todo_write"
"""How our tool's name ends in the tool list (Claude Code prefixes MCP tools with ``mcp__<server>__``)."""


def our_tool(body: Any) -> dict[str, Any] | None:
    """Our tool as the request offers it (``name``, ``description``, ``input_schema``, and ``defer_loading`` when
    Claude Code defers it), or ``None``."""
    tools = body.get("tools") if isinstance(body, dict) else None
    found = [tool for tool in tools or [] if str(tool.get("name", "")).endswith(TOOL_SUFFIX)]
    assert len(found) <= 1, f"more than one tool named *{TOOL_SUFFIX}: {[tool['name'] for tool in found]}"
    return found[0] if found else None


def tool_names(body: Any) -> list[str]:
    """The names of the tools a request offers (none for a request that is not a model turn)."""
    return [str(tool.get("name")) for tool in body.get("tools") or []] if isinstance(body, dict) else []


def tool_results(body: Any) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks answering calls of our tool, in order: what the model read back from it (results
    of Claude Code's own tools, such as ``ToolSearch``, left out)."""
    ours: set[str] = set()
    found = []
    for message in body.get("messages", []) if isinstance(body, dict) else []:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        blocks = [block for block in content if isinstance(block, dict)]
        if message.get("role") == "assistant":
            ours |= {block["id"] for block in blocks
                     if block.get("type") == "tool_use" and str(block.get("name", "")).endswith(TOOL_SUFFIX)}
        elif message.get("role") == "user":
            found += [block for block in blocks
                      if block.get("type") == "tool_result" and block.get("tool_use_id") in ours]
    return found


def _message(body: Any, blocks: list[dict[str, Any]], stop_reason: str) -> Reply:
    """One assistant message holding ``blocks``, streamed or whole as the request asked."""
    model = body.get("model", "fake") if isinstance(body, dict) else "fake"
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    whole = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": blocks,
             "stop_reason": stop_reason, "stop_sequence": None, "usage": usage}
    if not (isinstance(body, dict) and body.get("stream")):
        return Reply(body=whole)
    events = [sse({"type": "message_start", "message": {**whole, "content": [], "stop_reason": None}},
                  "message_start")]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": block["raw"]}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        start.pop("raw", None)
        events += [sse({"type": "content_block_start", "index": index, "content_block": start}, "content_block_start"),
                   sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"),
                   sse({"type": "content_block_stop", "index": index}, "content_block_stop")]
    events += [sse({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": 5}}, "message_delta"),
               sse({"type": "message_stop"}, "message_stop")]
    return Reply(events=events)


def text(body: Any, words: str) -> Reply:
    """An assistant message that only says ``words`` and ends the turn."""
    return _message(body, [{"type": "text", "text": words}], "end_turn")


def tool_use(body: Any, name: str, raw: str, call_id: str) -> Reply:
    """An assistant message calling ``name`` with the arguments ``raw`` (JSON text, streamed as the model writes
    it; the whole-message form carries it parsed)."""
    return tool_uses(body, [(name, raw, call_id)])


def tool_uses(body: Any, calls: Sequence[tuple[str, str, str]]) -> Reply:
    """An assistant message making several calls at once, each ``(name, raw arguments, call id)`` as in
    :func:`tool_use`; arguments that are not JSON can only be streamed (the whole-message form carries ``{}``)."""
    stream = isinstance(body, dict) and body.get("stream")
    blocks = []
    for name, raw, call_id in calls:
        block: dict[str, Any] = {"type": "tool_use", "id": call_id, "name": name, "raw": raw}
        try:
            block["input"] = json.loads(raw)
        except ValueError:
            block["input"] = {}
        if not stream:
            block.pop("raw")
        blocks.append(block)
    return _message(body, blocks, "tool_use")


def script(calls: Sequence[str], final: str, search: str | None = None) -> Answer:
    """The agent's turns: a call of our tool with each of ``calls`` (JSON text) in order, one per request, then
    ``final``; side requests (no tool of ours offered) get a short text, token counts a small number.

    With ``search`` (our tool's name), a request that offers ``ToolSearch`` but not our tool (Claude Code defers MCP
    tools so) first gets a ``ToolSearch`` call loading it, as a model that sees only the name must do."""

    def answer(request: Request) -> Reply:
        path = request.path.split("?")[0]
        if request.method == "POST" and path.endswith("/v1/messages/count_tokens"):
            return Reply(body={"input_tokens": 10})
        if request.method != "POST" or not path.endswith("/v1/messages"):
            return Reply(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        tool = our_tool(request.body)
        if tool is None and search is not None and "ToolSearch" in tool_names(request.body):
            return tool_use(request.body, "ToolSearch", json.dumps({"query": f"select:{search}"}), "toolu_search")
        if tool is None:
            return text(request.body, "Planning")
        done = len(tool_results(request.body))
        if done < len(calls):
            return tool_use(request.body, tool["name"], calls[done], f"toolu_{done + 1:02d}")
        return text(request.body, final)

    return answer
