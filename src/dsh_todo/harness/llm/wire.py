"""How a tool travels to a model, in the two wrappings a model meets it in.

OpenAI-compatible chat completions (DSH's DeepSeek adapter): ``{"type":"function","function":{name, description,
parameters}}``, with no ``strict`` flag, as that adapter sends none. Anthropic Messages (DSH 0.2's second provider,
and what Claude-facing clients send): ``{"name","description","input_schema"}``. Key order is fixed in both, so the
bytes are a constant per config and the provider's prefix cache stays warm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def function_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": schema["name"], "description": schema["description"],
                                             "parameters": schema["parameters"]}}


def messages_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": schema["name"], "description": schema["description"], "input_schema": schema["parameters"]}
