"""Reading a JSON-RPC answer from ``dsh-todo mcp --http`` the way a test or a soak benchmark needs it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


def rpc_result(response: httpx.Response) -> Any:
    """The JSON-RPC ``result`` of an answer sent as JSON or as a single-event SSE stream (streamable HTTP may use
    either); raises for an HTTP error status."""
    response.raise_for_status()
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["result"]
