"""What a call from a model outside the harness (an MCP client's, an agent framework's) is logged after.

``Turns.call_alone`` logs, in the call's step and just before its ``tool/call``, the ``assistant/message`` of the
model that made it: DSH 0.2 refuses to open a log whose ``tool/call`` no assistant message of its step advertised
("tool/call … has no advertised tool lifecycle"). Tests that pin a log's events check that message here, once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

EXTERNAL_SOURCE = {"kind": "model", "provider": "external", "model": "external"}


def assert_advertised(message: Mapping[str, Any], call: Mapping[str, Any], *, stream: bool = True) -> None:
    """``message`` is the event that advertises ``call`` (a ``tool/call`` event): an ``assistant/message`` appended
    to the surface in the call's turn and step, holding one ``tool-call`` block with the call's id, name and the
    very argument text of the ``tool/call``, from the ``external`` model, with a fresh version-4 id, and an empty
    ``stream`` unless the session is format v0 (``stream=False``), whose ``assistant/message`` has none."""
    data = call["data"]
    assert call["type"] == "tool/call"
    assert message["type"] == "assistant/message"
    assert message["surfaceOp"] == "append"
    assert message["seq"] < call["seq"]
    body = message["data"]["message"]
    expected: dict[str, Any] = {
        "turn": data["turn"], "step": data["step"],
        "message": {"role": "assistant",
                    "content": [{"type": "tool-call", "id": data["callId"], "name": data["name"],
                                 "arguments": data["arguments"]}],
                    "source": EXTERNAL_SOURCE, "id": body["id"]}}
    if stream:
        expected["stream"] = []
    assert message["data"] == expected
    assert list(message["data"]) == list(expected)
    assert list(body) == ["role", "content", "source", "id"]
    assert list(body["content"][0]) == ["type", "id", "name", "arguments"]
    assert body["content"][0]["arguments"] == data["arguments"]
    assert type(body["content"][0]["arguments"]) is type(data["arguments"])
    assert str(uuid.UUID(body["id"])) == body["id"] and uuid.UUID(body["id"]).version == 4
