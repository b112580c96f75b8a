"""How tools travel to an OpenAI-compatible model: ``{"type":"function","function":{name, description, parameters}}``.

No ``strict`` flag, as DSH's DeepSeek adapter sends none; key order fixed so the bytes are a constant per config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def function_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": schema["name"], "description": schema["description"],
                                             "parameters": schema["parameters"]}}
