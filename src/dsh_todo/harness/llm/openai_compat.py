"""Any OpenAI-compatible chat endpoint (``--wire openai``; DeepSeek's by default) through the ``openai`` client.

Tools go out as ``{"type":"function","function":{name, description, parameters}}`` with no ``strict`` flag, and
results as ``role: "tool"`` messages whose content is the model-visible text (the ``Error: `` prefix is how the model
learns a call failed: the flag itself is not sent), as DSH 0.1.1's DeepSeek adapter did. ``openai`` is imported only
when a real model is used.
"""

from __future__ import annotations

import os
from typing import Any

from dsh_todo.harness.llm.base import ModelError, ModelReply, ModelRequest, ToolCallRequest

DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-v4-flash"


def wire_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The chat messages exactly as sent: the system prompt first, then the history derived from the log
    (:func:`~dsh_todo.harness.llm.chat.chat_messages`)."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(request.messages)
    return messages


class OpenAICompatibleModel:
    """A chat-completions model. ``client`` may be given (tests pass one bound to a fake transport)."""

    provider = "openai-compatible"
    wire = "OpenAI chat completions"

    def __init__(self, model: str | None = None, *, api_key: str | None = None, base_url: str | None = None,
                 client: Any = None, max_tokens: int | None = None, timeout: float = 120.0) -> None:
        self.model = model or os.environ.get("DEEPSEEK_MODEL") or DEFAULT_MODEL
        self.max_tokens = max_tokens
        self.base_url = base_url or os.environ.get("DEEPSEEK_BASE_URL") or DEFAULT_BASE_URL
        if client is None:
            key = api_key or os.environ.get("DEEPSEEK_API_KEY")
            if not key:
                raise ModelError("no API key: set DEEPSEEK_API_KEY (and DEEPSEEK_BASE_URL for another "
                                 "OpenAI-compatible endpoint), or use --script FILE for an offline run")
            try:
                from openai import AsyncOpenAI
            except ImportError:
                # The wording of dsh_todo.extras (which the harness does not import).
                raise ModelError("a model endpoint needs the `openai` extra: pip install 'dsh-todo[openai]'") from None
            client = AsyncOpenAI(api_key=key, base_url=self.base_url, timeout=timeout)
        else:
            self.base_url = str(getattr(client, "base_url", self.base_url))
        self._client = client

    async def complete(self, request: ModelRequest) -> ModelReply:
        params: dict[str, Any] = {"model": self.model, "messages": wire_messages(request)}
        if request.tools:
            params["tools"] = request.tools
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        try:
            response = await self._client.chat.completions.create(**params)
        except Exception as exc:  # the client raises many types; people need the message, not a traceback
            raise ModelError(f"{self.model}: {type(exc).__name__}: {exc}") from exc
        if not response.choices:
            raise ModelError(f"{self.model}: the response had no choices")
        choice = response.choices[0]
        message = choice.message
        calls = [ToolCallRequest(call.id, call.function.name, call.function.arguments or "")
                 for call in (message.tool_calls or []) if getattr(call, "function", None) is not None]
        usage = None
        if response.usage is not None:
            usage = {"inputTokens": response.usage.prompt_tokens, "outputTokens": response.usage.completion_tokens}
        return ModelReply(text=message.content or "", tool_calls=calls, finish_reason=choice.finish_reason or "stop",
                          usage=usage)
