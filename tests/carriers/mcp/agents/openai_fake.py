"""The scripted model in OpenAI's two wire formats: the Responses API (Codex) and chat completions (opencode).

The script is the clients' scenario (:mod:`tests.carriers.mcp.clients.common`): the model calls our tool with the
accepted list, then with the refused arguments, then answers with a final text. Which step a request is at is read
from the request itself, not from how many came before: the number of tool results in its conversation (0, 1, 2).
So a CLI's other requests (a session title, a model list, a retry) get a sensible answer and do not shift the
script. A request that offers no ``todo_write`` tool is one of those side requests (a title): it gets a plain text.

CLIs rename MCP tools for their model (a server prefix); :func:`our_tool_name` finds ours in the tool list the CLI
sent, so the call names exactly the tool the CLI offered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.carriers.mcp.agents.common import Reply, Request, sse
from tests.carriers.mcp.clients.common import ACCEPTED, FINAL_TEXT, REFUSED

__all__ = ["MODEL", "TITLE", "answer", "chat_tools", "chat_turns", "our_tool_name", "response_tools",
           "responses_turns"]

MODEL = "fake-model"
"""The model name the CLIs are configured with."""
TITLE = "Plan the fix"
"""The answer to a request that offers no tool (a CLI asking for a session title)."""


def our_tool_name(names: Sequence[str]) -> str | None:
    """The name under which the CLI offered our tool (``todo_write``, possibly with a server prefix)."""
    found = [name for name in names if name == "todo_write" or name.endswith("_todo_write")]
    assert len(found) <= 1, f"more than one todo_write offered: {found}"
    return found[0] if found else None


def _step(results: int) -> str | None:
    """The arguments of the call to make after ``results`` tool results, or ``None`` for the final text."""
    script = [ACCEPTED, REFUSED]
    return script[results] if results < len(script) else None


# --- the Responses API (POST {base}/responses, stream: true) ---------------------------------------------------


def response_tools(body: Any) -> dict[tuple[str | None, str], dict[str, Any]]:
    """The function tools of a Responses request by (namespace, name): top-level ``function`` tools under ``None``,
    and those inside a ``namespace`` tool (``{"type": "namespace", "name", "tools": [...]}``) under its name."""
    found: dict[tuple[str | None, str], dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        if tool.get("type") == "function":
            found[None, tool["name"]] = tool
        elif tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if inner.get("type") == "function":
                    found[tool["name"], inner["name"]] = inner
    return found


def responses_turns(body: Any) -> dict[str, Any]:
    """The ``function_call_output`` items of a Responses request's input, by ``call_id``: what the model read back."""
    return {item["call_id"]: item["output"] for item in body.get("input") or []
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


def _response_events(response_id: str, item: dict[str, Any]) -> list[bytes]:
    """A streamed response with one output item, in the fewest events Codex 0.171 acts on: the item whole
    (``response.output_item.done``), then ``response.completed`` with the response's id. Codex needs no
    ``response.created``, no ``output_item.added``, no deltas and no usage."""
    return [sse({"type": "response.output_item.done", "output_index": 0, "item": item}, "response.output_item.done"),
            sse({"type": "response.completed", "response": {"id": response_id, "status": "completed"}},
                "response.completed")]


def _message(item_id: str, text: str) -> dict[str, Any]:
    """An assistant message item holding ``text``."""
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _responses(body: Any) -> Reply:
    tools = response_tools(body)
    name = our_tool_name([name for _, name in tools])
    results = len(responses_turns(body))
    call = _step(results) if name is not None else None
    response_id = f"resp_{results}"
    if call is None:
        item = _message(f"msg_{results}", FINAL_TEXT if name is not None else TITLE)
    else:
        [namespace] = [space for space, inner in tools if inner == name]
        item = {"type": "function_call", "id": f"fc_{results}", "call_id": f"call_{results}", "name": name,
                "arguments": call, "status": "completed"}
        if namespace is not None:
            item["namespace"] = namespace
    return Reply(events=_response_events(response_id, item))


# --- chat completions (POST {base}/chat/completions, stream: true) ---------------------------------------------


def chat_tools(body: Any) -> list[dict[str, Any]]:
    """The function tools of a chat completions request (``{"name", "description", "parameters"}`` each)."""
    return [tool["function"] for tool in body.get("tools") or []
            if isinstance(tool, dict) and tool.get("type") == "function"]


def chat_turns(body: Any) -> dict[str, Any]:
    """The ``tool`` messages of a chat completions request, by ``tool_call_id``: what the model read back."""
    return {message["tool_call_id"]: message["content"] for message in body.get("messages") or []
            if isinstance(message, dict) and message.get("role") == "tool"}


def _chunk(number: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One ``chat.completion.chunk`` frame of completion ``number`` carrying ``delta``."""
    return sse({"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _usage(number: int) -> bytes:
    """The last chunk the client asked for with ``stream_options.include_usage``: no choices, the token counts."""
    return sse({"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def _chat(body: Any) -> Reply:
    name = our_tool_name([tool["name"] for tool in chat_tools(body)])
    results = len(chat_turns(body))
    call = _step(results) if name is not None else None
    if call is None:
        text = FINAL_TEXT if name is not None else TITLE
        frames = [_chunk(results, {"role": "assistant", "content": ""}), _chunk(results, {"content": text}),
                  _chunk(results, {}, "stop")]
    else:
        tool_call = {"index": 0, "id": f"call_{results}", "type": "function",
                     "function": {"name": name, "arguments": call}}
        frames = [_chunk(results, {"role": "assistant", "content": None, "tool_calls": [tool_call]}),
                  _chunk(results, {}, "tool_calls")]
    return Reply(events=[*frames, _usage(results), b"data: [DONE]\n\n"])


def answer(request: Request) -> Reply:
    """The scripted model's answer to any request a CLI sends its OpenAI-compatible endpoint."""
    path = request.path.split("?", 1)[0].rstrip("/")
    if request.method == "GET" and path.endswith("/models"):
        return Reply(body={"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                                       "owned_by": "dsh-todo"}]})
    if request.method == "POST" and path.endswith("/responses") and isinstance(request.body, dict):
        return _responses(request.body)
    if request.method == "POST" and path.endswith("/chat/completions") and isinstance(request.body, dict):
        return _chat(request.body)
    return Reply(404, {"error": {"message": f"fake model: no {request.method} {request.path}"}})
