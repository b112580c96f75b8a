"""DeepSeek over the Anthropic Messages API, as DSH 0.2's ``deepseek-official`` provider speaks it.

``POST {DEEPSEEK_BASE_URL}/v1/messages`` (default ``https://api.deepseek.com/anthropic``), streamed as server-sent
events, with ``x-api-key`` and ``anthropic-version: 2023-06-01``: the official ``anthropic`` client does the HTTP,
the SSE framing and the retries of a 429 or 5xx (decision 0033), told to send DSH's two headers instead of its own
``Authorization: Bearer`` and newer version; it is imported only when a model is constructed. What is ours is the
rendering and the reading:

- the system prompt goes as the top-level ``system``; the tools as ``{"name","description","input_schema"}``;
- the history (:mod:`~dsh_todo.harness.llm.history`) as alternating ``user`` / ``assistant`` messages: a call as a
  ``tool_use`` block whose ``input`` is the raw arguments parsed, or ``{}`` when they are not a JSON object (the
  Messages wire cannot carry anything else; the log keeps the raw string, which the tool already refused); a
  result as a ``tool_result`` block (``content`` its text, ``is_error`` the log's ``isError``) in the next user
  message, results first; empty texts and empty messages are left out, as DSH leaves them out;
- the reply is read from the stream: text deltas joined, a call's arguments the concatenation of its
  ``input_json_delta`` fragments exactly as the model wrote them (a call streamed without fragments: its start
  block's ``input`` as compact JSON), ``stop_reason`` mapped to the loop's words (``max_tokens`` → ``length``), and
  the usage as DSH 0.2 logs it (``inputTokens``, ``outputTokens``, the cache counts when given, ``totalTokens``).

Thinking is requested off (``"thinking": {"type": "disabled"}``): the loop logs no reasoning, so it could not send
a thinking block back with the call it belongs to, which the Messages API asks for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from dsh_todo.harness.llm.base import ModelError, ModelReply, ModelRequest, ToolCallRequest
from dsh_todo.harness.llm.history import AssistantTurn, HistoryEntry, ToolOutcome, UserText
from dsh_todo.jsonutil import dumps, loads

DEFAULT_BASE_URL = "https://api.deepseek.com/anthropic"
"""DSH 0.2's ``deepseek-official`` default; ``DEEPSEEK_BASE_URL`` overrides it (the client appends ``/v1/messages``)."""
DEFAULT_MODEL = "deepseek-flash"
"""DSH 0.2's default agent model; ``DEEPSEEK_MODEL`` or ``--model`` overrides it."""
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header DSH 0.2 sends."""
DEFAULT_MAX_TOKENS = 256_000
"""DSH 0.2's ``maxTokens`` for DeepSeek (the Messages API requires the field)."""

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                "model_context_window_exceeded": "length"}
"""Messages ``stop_reason`` → the loop's ``finish_reason`` (another reason passes through as it is)."""

USAGE = {"input_tokens": "inputTokens", "output_tokens": "outputTokens",
         "cache_read_input_tokens": "cacheReadTokens", "cache_creation_input_tokens": "cacheWriteTokens"}


def messages_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    """One tool as Messages takes it: the registry's schema renamed, key order fixed (prefix caching)."""
    return {"name": schema["name"], "description": schema["description"], "input_schema": schema["parameters"]}


def tool_input(raw: str) -> dict[str, Any]:
    """A logged call's arguments as a ``tool_use`` ``input``: the JSON object they spell, else ``{}``."""
    try:
        value = loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text else []


def messages_of(history: Iterable[HistoryEntry]) -> list[dict[str, Any]]:
    """The history as Messages ``messages``: same-role neighbours merged, tool results first in a user message."""
    messages: list[dict[str, Any]] = []

    def put(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for entry in history:
        if isinstance(entry, UserText):
            put("user", _text(entry.text))
        elif isinstance(entry, AssistantTurn):
            put("assistant", _text(entry.text) + [
                {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call.arguments)}
                for call in entry.calls])
        elif isinstance(entry, ToolOutcome):
            put("user", [{"type": "tool_result", "tool_use_id": entry.call_id, "content": _text(entry.text),
                          "is_error": entry.is_error}])
    for message in messages:
        if message["role"] == "user":
            blocks = message["content"]
            message["content"] = ([b for b in blocks if b["type"] == "tool_result"]
                                  + [b for b in blocks if b["type"] != "tool_result"])
    return messages


def request_body(request: ModelRequest, model: str, max_tokens: int) -> dict[str, Any]:
    """The JSON body of the request (the client adds ``"stream": true``)."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages_of(request.history),
                            "thinking": {"type": "disabled"}}
    if request.system:
        body["system"] = request.system
    if request.schemas:
        body["tools"] = [messages_tool(schema) for schema in request.schemas]
    return body


class StreamReader:
    """Builds the reply from the stream's events (as plain dicts), in the order they came."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}

    def feed(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._count(event.get("message", {}).get("usage"))
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            block["partial"] = ""
            self.blocks[int(event.get("index", len(self.blocks)))] = block
        elif kind == "content_block_delta":
            open_block = self.blocks.get(int(event.get("index", -1)))
            delta = event.get("delta") or {}
            if open_block is None:
                raise ModelError("the response stream sent a delta for a block it never started")
            if delta.get("type") == "text_delta":
                open_block["text"] = open_block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                open_block["partial"] += str(delta.get("partial_json", ""))
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self._count(event.get("usage"))

    def _count(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            for wire, ours in USAGE.items():
                value = usage.get(wire)
                if isinstance(value, int):
                    self.usage[ours] = value

    def reply(self) -> ModelReply:
        if self.stop_reason is None:
            raise ModelError("the response stream ended before its stop reason")
        blocks = [self.blocks[index] for index in sorted(self.blocks)]
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        calls = [ToolCallRequest(str(b.get("id", "")), str(b.get("name", "")),
                                 b["partial"] or dumps(b.get("input") or {}))
                 for b in blocks if b.get("type") == "tool_use"]
        usage = None
        if self.usage:
            usage = {"inputTokens": self.usage.get("inputTokens", 0), "outputTokens": self.usage.get("outputTokens", 0)}
            usage.update({k: v for k, v in self.usage.items() if k not in usage})
            usage["totalTokens"] = sum(self.usage.values())
        return ModelReply(text=text, tool_calls=calls, finish_reason=STOP_REASONS.get(self.stop_reason,
                                                                                     self.stop_reason), usage=usage)


def _sdk() -> Any:
    """The ``anthropic`` package, imported on first use (the `anthropic` extra)."""
    import anthropic

    return anthropic


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


class MessagesModel:
    """A Messages model. ``client`` may be given (an ``anthropic.AsyncAnthropic``, used as it is and never closed
    here); otherwise each request opens a client of its own and closes it, so no connection outlives the event loop
    that opened it (``asyncio.run`` per turn, tests: a pooled connection collected after its loop closed prints
    "Event loop is closed" noise). A step waits seconds for the model; one connection set-up per step is noise."""

    provider = "deepseek-official"
    wire = "Anthropic Messages"

    def __init__(self, model: str | None = None, *, api_key: str | None = None, base_url: str | None = None,
                 client: Any = None, max_tokens: int = DEFAULT_MAX_TOKENS, timeout: float = 300.0,
                 max_retries: int = 2) -> None:
        self.model = model or os.environ.get("DEEPSEEK_MODEL") or DEFAULT_MODEL
        self.max_tokens = max_tokens
        self.base_url = base_url or os.environ.get("DEEPSEEK_BASE_URL") or DEFAULT_BASE_URL
        self._client = client
        self._options: dict[str, Any] = {}
        if client is not None:
            self.base_url = str(getattr(client, "base_url", self.base_url))
            return
        key = api_key or os.environ.get("DEEPSEEK_API_KEY")
        if not key:
            raise ModelError("no API key: set DEEPSEEK_API_KEY (DEEPSEEK_BASE_URL for another Anthropic Messages "
                             "endpoint, --wire openai for an OpenAI-compatible one), or use --script FILE for an "
                             "offline run")
        try:
            sdk = _sdk()
        except ImportError:
            # The wording of dsh_todo.extras (which the harness does not import).
            raise ModelError("a model endpoint over Anthropic Messages needs the `anthropic` extra: "
                             "pip install 'dsh-todo[anthropic]'") from None
        # The key given explicitly, so the client reads no ANTHROPIC_* credential from the environment. The client
        # would send it as ``Authorization: Bearer`` with its own newer API version: DSH's wire is ``x-api-key`` and
        # ``2023-06-01``, so those replace its defaults.
        headers: dict[str, Any] = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, "Authorization": sdk.omit}
        self._options = {"api_key": key, "base_url": self.base_url, "timeout": timeout, "max_retries": max_retries,
                         "default_headers": headers}

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self._client is not None:
            return await self._complete(self._client, request)
        async with _sdk().AsyncAnthropic(**self._options) as client:
            return await self._complete(client, request)

    async def _complete(self, client: Any, request: ModelRequest) -> ModelReply:
        anthropic = _sdk()
        reader = StreamReader()
        try:
            stream = await client.messages.create(**request_body(request, self.model, self.max_tokens), stream=True)
            async with stream:  # closed even when a bad event stops the reading
                async for event in stream:
                    reader.feed(event.to_dict())
            return reader.reply()
        except ModelError as exc:
            raise ModelError(f"{self.model}: {exc}") from None
        except anthropic.APIStatusError as exc:
            raise ModelError(self._status_line(exc)) from exc
        except anthropic.APITimeoutError as exc:
            raise ModelError(f"{self.model}: no answer from {self.base_url} in time") from exc
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__
            why = f": {_one_line(str(cause))}" if cause is not None and str(cause) else ""
            raise ModelError(f"{self.model}: cannot reach {self.base_url}{why}") from exc
        except Exception as exc:  # the client raises many types; people need the message, not a traceback
            raise ModelError(f"{self.model}: {type(exc).__name__}: {_one_line(str(exc))}") from exc

    def _status_line(self, exc: Any) -> str:
        """``MODEL: HTTP 401: <the API's error message>`` (an error inside a stream that began 200 says so)."""
        message = exc.api_message
        if not isinstance(message, str) or not message:
            body = exc.body
            message = body if isinstance(body, str) and body else exc.message
        where = "stream error" if exc.status_code == 200 else f"HTTP {exc.status_code}"
        line = f"{self.model}: {where}: {_one_line(str(message))}"
        if exc.status_code == 404:
            line += f" (is {self.base_url} an Anthropic Messages endpoint? For an OpenAI-compatible one: --wire openai)"
        return line
