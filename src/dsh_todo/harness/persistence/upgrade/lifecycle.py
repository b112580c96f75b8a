"""The lifecycle DSH 0.2.1 holds a migrated log to before it accepts it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.persistence.upgrade.common import (
    Record,
    UpgradeError,
    is_record,
)

_STEP_EVENTS: Final = frozenset({"system/message", "developer/message", "assistant/attempt"})
_V4_SURFACE: Final = frozenset({"system/message", "user/message", "developer/message", "assistant/message",
                                "tool/result"})


class Lifecycle:
    """The relationships DSH 0.2.1 holds a migrated log to before it accepts it: turns and steps open and close in
    order, every ``tool/call`` and ``tool/result`` answers a call an ``assistant/message`` of the same step
    advertised, no step or turn ends with a call unanswered, replacements name the current surface, requests and
    commands sit where they belong. An open turn at the end is fine (a torn tail). Compaction, retry and PTC dispatch
    pairings are not checked here: no log we write has them."""

    def __init__(self, events: list[Record]) -> None:
        self.events = events
        self.turn: int | None = None
        self.step: int | None = None
        self.next_turn = 1
        self.next_step = 1
        self.surface: list[int] = []
        self.head: int | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        self.commands: set[str] = set()

    def check(self) -> None:
        for event in self.events:
            self.accept(event)

    def require_turn(self, kind: str) -> None:
        if self.turn is None:
            raise UpgradeError(f"{kind} is outside an open turn")

    def require_step(self, kind: str, data: Mapping[str, Any]) -> None:
        if self.turn is None or self.step is None or data.get("turn") != self.turn or data.get("step") != self.step:
            raise UpgradeError(f"{kind} does not match an open turn and step")

    def close_tools(self, kind: str) -> None:
        if self.tools:
            raise UpgradeError(f"{kind} leaves unresolved tool call {next(iter(self.tools))}")

    def fold_surface(self, event: Record) -> None:
        kind, seq = event["type"], event["seq"]
        if kind == "system/message" and self.surface and self.head is None:
            raise UpgradeError("system/message requires a protected first surface head")
        operation = event.get("surfaceOp")
        if operation == "append":
            if kind == "system/message" and not self.surface:
                self.head = seq
            self.surface.append(seq)
            return
        if not is_record(operation):
            raise UpgradeError(f"{kind} surfaceOp requires an object")
        start, end = operation.get("startSeq"), operation.get("endSeq")
        if not all(isinstance(value, int) and 0 <= value < seq for value in (start, end)):
            raise UpgradeError("replacement start must name an earlier event")
        first = self.surface.index(start) if start in self.surface else -1
        last = self.surface.index(end) if end in self.surface else -1
        if first < 0 or last < first:
            raise UpgradeError(f"{kind} replacement range is not on the current surface")
        removed = self.surface[first:last + 1]
        sources = event.get("sourceEventSeqs")
        if not isinstance(sources, list) or any(item not in sources for item in removed):
            raise UpgradeError("replacement sourceEventSeqs omit a shadowed surface node")
        if self.head is not None and self.head in removed:
            if kind != "system/message" or len(removed) != 1:
                raise UpgradeError("surface replacement cannot shadow the protected system head")
            self.head = seq
        self.surface[first:last + 1] = [seq]

    def tool(self, event: Record, data: Mapping[str, Any]) -> None:
        kind = event["type"]
        if kind == "tool/result" and event.get("surfaceOp") != "append":
            self.require_turn(kind)
            return
        self.require_step(kind, data)
        if kind == "assistant/message":
            message = data.get("message")
            content = message.get("content") if is_record(message) else None
            for block in content if isinstance(content, list) else []:
                if not is_record(block) or block.get("type") != "tool-call":
                    continue
                call_id = block.get("id")
                if not isinstance(call_id, str) or not call_id:
                    raise UpgradeError("tool call id requires a nonempty string")
                if call_id in self.tools:
                    raise UpgradeError(f"assistant/message repeats advertised tool call {call_id}")
                self.tools[call_id] = {"name": block.get("name"), "arguments": block.get("arguments"),
                                       "started": False}
            return
        message = data.get("message") if kind == "tool/result" else None
        call_id = message.get("toolCallId") if is_record(message) else data.get("callId")
        if not isinstance(call_id, str) or not call_id:
            raise UpgradeError("tool call id requires a nonempty string")
        pending = self.tools.get(call_id)
        if pending is None:
            raise UpgradeError(f"{kind} {call_id} has no advertised tool lifecycle")
        if kind == "tool/call":
            if pending["started"] or pending["name"] != data.get("name") or pending["arguments"] != data.get(
                    "arguments"):
                raise UpgradeError(f"tool/call {call_id} does not match one advertised tool call")
            pending["started"] = True
            return
        if not pending["started"]:
            raise UpgradeError(f"tool/result {call_id} is not the exact TOOL_NOT_STARTED repair")
        del self.tools[call_id]

    def accept(self, event: Record) -> None:
        kind = event["type"]
        data = event.get("data")
        if not is_record(data):
            return
        if kind in _STEP_EVENTS:
            self.require_step(kind, data)
        if kind in _V4_SURFACE:
            self.fold_surface(event)
        if kind == "turn/start":
            if self.turn is not None or data.get("turn") != self.next_turn:
                raise UpgradeError("turn/start does not open the expected turn")
            self.turn, self.next_step = self.next_turn, 1
            self.tools.clear()
        elif kind == "turn/end":
            if self.turn is None or data.get("turn") != self.turn or self.step is not None:
                raise UpgradeError("turn/end does not match the open turn with no open step")
            self.close_tools(kind)
            self.turn = None
            self.next_turn += 1
        elif kind == "step/start":
            if (self.turn is None or data.get("turn") != self.turn or self.step is not None
                    or data.get("step") != self.next_step):
                raise UpgradeError("step/start does not match the open turn and next step")
            self.step = self.next_step
        elif kind == "step/end":
            self.require_step(kind, data)
            self.close_tools(kind)
            self.step = None
            self.next_step += 1
        elif kind in ("assistant/message", "tool/call", "tool/result"):
            self.tool(event, data)
        elif kind in ("request/header", "request/context"):
            self.require_turn(kind)
        elif kind == "command/run":
            command = data.get("commandId")
            if not isinstance(command, str) or not command:
                raise UpgradeError("commandId requires a nonempty string")
            if command in self.commands:
                raise UpgradeError(f"command/run repeats commandId {command}")
            self.commands.add(command)
        elif kind == "command/done" and data.get("commandId") not in self.commands:
            raise UpgradeError("command/done has no prior command/run")
