"""Session-log events → ACP ``session/update`` payloads: one mapping for the live feed and for ``session/load``.

The retired DSH bridge's mapping (SPEC §10), driven by the log rather than by the loop, so a replayed session shows
exactly what the live one showed:

- ``todo/write`` → ``{"sessionUpdate": "plan", "entries": [...]}``, one entry per todo in order, the status copied
  (DSH's three statuses are ACP's ``PlanEntryStatus``) and the priority the constant ``"medium"`` (ACP requires
  one; DSH has none);
- ``tool/call`` → ``tool_call`` from the tool's ``presentCall`` intent (``Update todo list``, kind ``other``, the
  model's raw todos as ``rawInput: {"todos": [...]}``), or a generic card named after the tool when the arguments do
  not validate (``rawInput`` the model's object as sent, or ``{"arguments": <raw text>}`` when it sent no object).
  ``rawInput`` is always an object, unlike the bridge's bare array: ACP clients built on the TypeScript SDK before
  0.13 (Zed's ``@zed-industries/agent-client-protocol`` 0.4.x) accept only an object there and drop the whole
  notification otherwise;
- ``tool/result`` → ``tool_call_update`` carrying the result text, ``completed`` (``failed`` for an error result);
- ``assistant/message`` → ``agent_message_chunk`` for its text; ``user/message`` → ``user_message_chunk``, on replay
  only (live, the client already shows its own prompt);
- ``turn/start`` while a plan stands → an empty ``plan``: DSH's standing-plan rule (the next turn clears the plan
  until the model writes again), so an editor never keeps a finished list into the next task.

Payloads are plain wire dicts (camelCase keys); the agent turns them into the SDK's models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from dsh_todo.harness.event_types import Event
from dsh_todo.harness.tool_results import answers
from dsh_todo.harness.tools.registry import ToolRegistry
from dsh_todo.harness.turns import parse_arguments
from dsh_todo.tool_todo.description import TOOL_NAME

PLAN_PRIORITY: Final = "medium"

Update = dict[str, Any]


def plan_update(todos: Iterable[Mapping[str, Any]]) -> Update:
    """The ACP ``plan`` for a todo list: every entry, in order, status copied, priority ``medium``."""
    return {"sessionUpdate": "plan",
            "entries": [{"content": todo["content"], "priority": PLAN_PRIORITY, "status": todo["status"]}
                        for todo in todos]}


def text_of(blocks: Any) -> str:
    """The text of a content-block list (non-text blocks skipped)."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, (list, tuple)):
        return ""
    return "".join(block.get("text", "") for block in blocks
                   if isinstance(block, Mapping) and block.get("type") == "text")


def _text_chunk(kind: str, text: str) -> Update:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _object_input(value: Any, call: Mapping[str, Any]) -> Mapping[str, Any]:
    """``rawInput`` as an object: the value itself when it is one, else the call's raw argument text."""
    if isinstance(value, Mapping):
        return value
    return {"arguments": call.get("arguments", "")}


class UpdateFeed:
    """Maps one session's events, in log order, to ACP updates. Keeps only whether a plan is standing."""

    def __init__(self, tools: ToolRegistry, *, history: bool = False) -> None:
        self.tools = tools
        self.history = history
        """Replaying a stored session: user prompts are shown too."""
        self.plan_standing = False

    def feed(self, event: Event) -> list[Update]:
        kind = event["type"]
        data = event["data"]
        if kind == "todo/write":
            self.plan_standing = True
            return [plan_update(data["todos"])]
        if kind == "tool/call":
            return [self._tool_call(data)]
        if kind == "tool/result":
            return self._tool_result(data)
        if kind == "assistant/message":
            text = text_of(data.get("message", {}).get("content"))
            return [_text_chunk("agent_message_chunk", text)] if text else []
        if kind == "user/message" and self.history:
            text = text_of(data.get("content"))
            return [_text_chunk("user_message_chunk", text)] if text else []
        if kind == "turn/start" and self.plan_standing:
            self.plan_standing = False
            return [plan_update([])]
        return []

    def replay(self, events: Iterable[Event]) -> list[Update]:
        return [update for event in events for update in self.feed(event)]

    def _tool_call(self, data: Mapping[str, Any]) -> Update:
        name = data["name"]
        arguments = parse_arguments(data.get("arguments", ""))
        tool = self.tools.get(name)
        view = tool.present(arguments) if tool is not None else None
        raw_input: Mapping[str, Any]
        if isinstance(view, Mapping):
            title, kind = view.get("title", name), view.get("kind", "other")
            raw_input = {"todos": view.get("rawInput")} if name == TOOL_NAME else _object_input(view.get("rawInput"),
                                                                                                 data)
        else:
            title, kind, raw_input = name, "other", _object_input(arguments, data)
        return {"sessionUpdate": "tool_call", "toolCallId": data["callId"], "title": title, "kind": kind,
                "status": "in_progress", "rawInput": raw_input}

    @staticmethod
    def _tool_result(data: Mapping[str, Any]) -> list[Update]:
        updates: list[Update] = []
        for answer in answers(data.get("message")):
            updates.append({"sessionUpdate": "tool_call_update", "toolCallId": answer.call_id,
                            "status": "failed" if answer.is_error else "completed",
                            "content": [{"type": "content",
                                         "content": {"type": "text", "text": text_of(answer.content)}}]})
        return updates
