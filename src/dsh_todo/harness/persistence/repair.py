"""Closing a turn that a crash left open (DSH's ``interruptedTurnClosers``).

After a crash the kept log may end inside a turn: a tool call with no result, a step with no end, a turn with no
end. A model provider rejects a transcript with a dangling tool call, and the session invariants reject a turn that
never ends, so recovery appends synthetic events that close it: an error ``tool/result`` per open call, the open
``step/end``, then ``turn/end`` with reason ``interrupted``. They continue the seq and reuse the last event's time,
so recovery is deterministic and never invents a future timestamp. A ``todo/write`` that was durably written before
the crash survives, and because the closer is a ``turn/end`` the plan stays standing until the next ``turn/start``.

The key orders below are the ones DSH's recovery writes (they differ from the live writer's: ``surfaceOp`` before
``sourceEventSeqs``; message keys ``id, role, source, content`` in format v0, ``id, role, toolCallId, isError,
source, content`` in v4), pinned by the damaged fixtures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

OUTCOME_UNKNOWN_TEXT: Final = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is "
    "unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or "
    "idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.")
NOT_STARTED_TEXT: Final = (
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class _OpenCall:
    __slots__ = ("call_seq", "step")

    def __init__(self, step: Any) -> None:
        self.step = step
        self.call_seq: int | None = None


def _scan(events: Sequence[Mapping[str, Any]]) -> tuple[Any, Any, dict[str, _OpenCall]]:
    """The open turn, the open step and the calls still waiting for a result at the end of ``events``."""
    open_turn: Any = None
    open_step: Any = None
    pending: dict[str, _OpenCall] = {}
    for event in events:
        kind = event.get("type")
        data = _mapping(event.get("data"))
        if kind == "turn/start":
            open_turn, open_step = data.get("turn"), None
            pending.clear()
        elif kind == "turn/end":
            open_turn = open_step = None
            pending.clear()
        elif kind == "step/start":
            open_step = data.get("step")
        elif kind == "step/end":
            open_step = None
            pending.clear()
        elif kind == "assistant/message":
            content = _mapping(data.get("message")).get("content")
            for block in content if isinstance(content, list) else ():
                block = _mapping(block)
                if block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                    pending[block["id"]] = _OpenCall(data.get("step"))
        elif kind == "tool/call":
            entry = pending.get(data.get("callId"))  # type: ignore[arg-type]
            if entry is not None:
                entry.call_seq = event.get("seq")
        elif kind == "tool/result":
            source = _mapping(_mapping(data.get("message")).get("source"))
            pending.pop(source.get("callId"), None)  # type: ignore[arg-type]
    return open_turn, open_step, pending


def _tool_result(call_id: str, call: _OpenCall, turn: Any, seq: int, time: Any, version: object) -> dict[str, Any]:
    started = call.call_seq is not None
    text = [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT if started else NOT_STARTED_TEXT}]
    message: dict[str, Any] = {"id": f"interrupted-tool-result-{call_id}-{seq}"}
    if version == 0:
        message.update(role="user", source={"kind": "tool", "callId": call_id},
                       content=[{"type": "tool-result", "toolCallId": call_id, "isError": True, "content": text}])
    else:  # format v4's tool-role message, in the key order DSH 0.2's recovery builds it
        message.update(role="tool", toolCallId=call_id, isError=True, source={"kind": "tool", "callId": call_id},
                       content=text)
    error = ({"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"} if started
             else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"})
    event: dict[str, Any] = {
        "type": "tool/result",
        "seq": seq,
        "time": time,
        "data": {"turn": turn, "step": call.step, "message": message, "error": error},
        "surfaceOp": "append",
    }
    if started:
        event["sourceEventSeqs"] = [call.call_seq]
    return event


def interrupted_turn_closers(events: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The synthetic events that close the open tail turn of ``events`` (a log whose header is ``meta``: its format
    version says how a ``tool/result`` message is shaped); empty when the log is balanced."""
    if not events:
        return []
    open_turn, open_step, pending = _scan(events)
    if open_turn is None:
        return []
    last = events[-1]
    seq: int = last["seq"] + 1
    time = last["time"]
    closers: list[dict[str, Any]] = []
    for call_id, call in pending.items():
        closers.append(_tool_result(call_id, call, open_turn, seq, time, meta.get("version")))
        seq += 1
    if open_step is not None:
        closers.append({"type": "step/end", "seq": seq, "time": time, "data": {"turn": open_turn, "step": open_step}})
        seq += 1
    closers.append({"type": "turn/end", "seq": seq, "time": time,
                    "data": {"turn": open_turn, "reason": {"kind": "interrupted"}}})
    return closers
