"""v0 to v1: the pre-release payload shapes DSH 0.1.1 could still hold, in their released form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from dsh_todo.harness.persistence.upgrade.common import (
    V0_EVENT_TYPES,
    Record,
    UpgradeError,
    assign,
    data_of,
    is_record,
    omit,
)
from dsh_todo.jsonutil import dumps

_LEGACY_TYPES: Final = frozenset({"steering/message", "request/header-delta", "mode/set", "compact/start",
                                  "compact/summary", "compact/end", "compact/prune"})
"""Pre-release event types v0 logs may still hold: renamed, rewritten or refused below, never unknown."""

_COMPACTION_NAMES: Final = {
    "compact/start": "compaction/start",
    "compact/summary": "compaction/summary",
    "compact/end": "compaction/end",
    "compact/prune": "compaction/prune",
}


@dataclass
class _V0State:
    message_ids: dict[int, str] = field(default_factory=dict)
    retry_ids: dict[str, str] = field(default_factory=dict)
    compaction_id: str | None = None


def v0_to_v1(session_id: str, events: list[Record]) -> list[Record]:
    state = _V0State()
    result: list[Record] = []
    for event in events:
        kind = event.get("type")
        if kind not in V0_EVENT_TYPES and kind not in _LEGACY_TYPES:
            raise UpgradeError(f"format v0 contains unknown historical event type {dumps(kind)} at seq "
                               f"{event.get('seq')}; migration refuses unknown historical events even when ignorable")
        named = event
        if event.get("type") in _COMPACTION_NAMES:
            named = assign(event, type=_COMPACTION_NAMES[event["type"]])
        _refuse_retired(named, session_id)
        current = _turn_start(named, session_id)
        current = _turn_end(current, session_id)
        current = _request_header(current, session_id)
        current = _steering(current, session_id)
        current = _retry(current, session_id, state)
        current = _compaction(current, session_id, state)
        current = _legacy_message(current, session_id, state)
        message_id = _message_id(current)
        if message_id is not None:
            state.message_ids[current["seq"]] = message_id
        result.append(current)
    return result


def _legacy_id(session_id: str, seq: int) -> str:
    return f"legacy-message:{session_id}:{seq}"


def _malformed(session_id: str, kind: str, seq: Any) -> UpgradeError:
    return UpgradeError(f"session {dumps(session_id)} contains malformed pre-react-loop {kind} at seq {seq}")


def _refuse_retired(event: Record, session_id: str) -> None:
    kind = event.get("type")
    if kind in ("request/header-delta", "mode/set"):
        raise UpgradeError(f"session {dumps(session_id)} contains unsupported legacy {kind} event at seq "
                           f"{event.get('seq')}")
    if kind == "request/header" and data_of(event).get("reason") == "fallback":
        raise UpgradeError(f"session {dumps(session_id)} contains unsupported request/header reason \"fallback\" "
                           f"at seq {event.get('seq')}")


def _turn_start(event: Record, session_id: str) -> Record:
    if event.get("type") != "turn/start":
        return event
    data = data_of(event)
    if "trigger" not in data:
        return event
    trigger = data["trigger"]
    if (set(data) != {"turn", "trigger"} or not isinstance(data["turn"], int) or data["turn"] < 1
            or not is_record(trigger) or not isinstance(trigger.get("kind"), str) or not trigger["kind"]):
        raise _malformed(session_id, "turn/start", event.get("seq"))
    return assign(event, data={"turn": data["turn"]})


def _turn_end(event: Record, session_id: str) -> Record:
    if event.get("type") != "turn/end":
        return event
    data = data_of(event)
    reason = data.get("reason")
    turn = data.get("turn")
    if set(data) != {"turn", "reason"} or not isinstance(turn, int) or turn < 1 or not is_record(reason):
        raise _malformed(session_id, "turn/end", event.get("seq"))
    kind = reason.get("kind")
    if not isinstance(kind, str):
        raise _malformed(session_id, "turn/end", event.get("seq"))
    current: dict[str, Any]
    if kind in ("completed", "blocked", "max-tokens", "interrupted"):
        if set(reason) != {"kind"}:
            raise _malformed(session_id, "turn/end", event.get("seq"))
        return event
    if kind == "aborted":
        if "reason" in reason:
            return event
        if set(reason) != {"kind"}:
            raise _malformed(session_id, "turn/end", event.get("seq"))
        current = {"kind": "aborted", "reason": {"kind": "legacy"}}
    elif kind == "disposed":
        if set(reason) != {"kind"}:
            raise _malformed(session_id, "turn/end", event.get("seq"))
        current = {"kind": "aborted", "reason": {"kind": "disposed"}}
    elif kind == "error":
        if "error" in reason:
            return event
        current = _error_reason(reason, event.get("seq"), session_id)
    else:
        return event
    return assign(event, data=assign(data, reason=current))


def _error_reason(reason: Mapping[str, Any], seq: Any, session_id: str) -> dict[str, Any]:
    failure = reason.get("failure")
    if failure is not None:
        allowed = {"message", "code", "status", "providerRetryAfterMs", "requestId"}
        if (set(reason) != {"kind", "step", "failure"} or not is_record(failure)
                or not {"message", "code"} <= set(failure) or not set(failure) <= allowed
                or not isinstance(failure["message"], str) or not isinstance(failure["code"], str)):
            raise _malformed(session_id, "turn/end", seq)
        return {"kind": "error", "error": failure}
    if (not {"kind", "step", "message"} <= set(reason) or not set(reason) <= {"kind", "step", "message", "code"}
            or not isinstance(reason["message"], str) or not isinstance(reason.get("code", ""), str)):
        raise _malformed(session_id, "turn/end", seq)
    code = reason.get("code")
    return {"kind": "error", "error": {"message": reason["message"], "code": code if isinstance(code, str)
                                       else "UNKNOWN"}}


def _request_header(event: Record, session_id: str) -> Record:
    if event.get("type") != "request/header":
        return event
    data = data_of(event)
    header = data.get("header")
    if not is_record(header) or "messagePrefix" not in header:
        return event
    if not isinstance(header["messagePrefix"], list):
        raise UpgradeError(f"session {dumps(session_id)} contains malformed request/header messagePrefix at seq "
                           f"{event.get('seq')}")
    return assign(event, data=assign(data, header=omit(header, "messagePrefix")))


def _steering(event: Record, session_id: str) -> Record:
    if event.get("type") != "steering/message":
        return event
    data = data_of(event)
    if "message" in data:
        if set(data) != {"turn", "message"}:
            raise _malformed(session_id, "steering/message", event.get("seq"))
        return assign(event, type="user/message", data=data["message"])
    if set(data) != {"turn", "content", "source"}:
        raise _malformed(session_id, "steering/message", event.get("seq"))
    message = omit(data, "turn")
    return assign(event, type="user/message",
                 data=assign(message, id=_legacy_id(session_id, event["seq"]), role="user"))


def _retry(event: Record, session_id: str, state: _V0State) -> Record:
    if event.get("type") != "llm/retry":
        return event
    data = data_of(event)
    # JSON.stringify of a missing member is undefined, which Array.join writes as nothing
    chain = "\0".join(dumps(data[key]) if key in data else "" for key in ("turn", "step", "provider", "policyKey"))
    retry_id = data.get("retryId")
    if isinstance(retry_id, str) and retry_id:
        state.retry_ids[chain] = retry_id
        return event
    if "retryId" in data:
        return event
    migrated = state.retry_ids.get(chain, f"legacy-retry:{session_id}:{event['seq']}")
    state.retry_ids[chain] = migrated
    return assign(event, data=assign(data, retryId=migrated))


def _compaction(event: Record, session_id: str, state: _V0State) -> Record:
    kind = event.get("type")
    if kind == "session/end-seed":
        state.compaction_id = None
        return event
    if kind == "compaction/start":
        data = data_of(event)
        existing = data.get("compactionId")
        if isinstance(existing, str) and existing:
            state.compaction_id = existing
            return event
        if "compactionId" in data:
            return event
        state.compaction_id = f"legacy-compaction:{session_id}:{event['seq']}"
        return assign(event, data=assign(data, compactionId=state.compaction_id))
    compaction_id = state.compaction_id
    if compaction_id is None:
        return event
    if kind in ("compaction/summary", "compaction/end"):
        data = data_of(event)
        if kind == "compaction/end":
            state.compaction_id = None
        return event if "compactionId" in data else assign(event, data=assign(data, compactionId=compaction_id))
    if kind != "user/message":
        return event
    data = data_of(event)
    source = data.get("source")
    if (not is_record(source) or source.get("kind") != "plugin" or source.get("plugin") != "compact"
            or "compactionId" in source):
        return event
    return assign(event, data=assign(data, source=assign(source, compactionId=compaction_id)))


def _legacy_message(event: Record, session_id: str, state: _V0State) -> Record:
    kind = event.get("type")
    if kind not in ("user/message", "assistant/message", "tool/result"):
        return event
    data = data_of(event)
    if kind == "user/message":
        if any(key in data for key in ("id", "role", "message")) or "content" not in data or "source" not in data:
            return event
        return assign(event, data=assign(data, id=_legacy_id(session_id, event["seq"]), role="user"))
    if kind == "assistant/message":
        if "message" in data or "content" not in data or "provenance" not in data:
            return event
        source = data["provenance"]
        if not is_record(source):
            raise UpgradeError(f"assistant/message {event['seq']} legacy source must be an object")
        rest = omit(data, "content", "provenance")
        message = {"id": _legacy_id(session_id, event["seq"]), "role": "assistant", "content": data["content"],
                   "source": assign(source, kind="model")}
        return assign(event, data=assign(rest, message=message))
    if "message" in data or not {"callId", "content", "isError"} <= set(data):
        return event
    call_id, content, is_error = data["callId"], data["content"], data["isError"]
    if not isinstance(call_id, str) or not isinstance(is_error, bool):
        return event
    rest = omit(data, "callId", "content", "isError")
    operation = event.get("surfaceOp")
    start = operation.get("start") if is_record(operation) and operation.get("op") == "replace" else None
    message_id = _legacy_id(session_id, event["seq"]) if start is None else state.message_ids.get(start)
    if message_id is None:
        raise UpgradeError(f"tool/result {event['seq']} replacement cites a message without identity")
    message = {"id": message_id, "role": "user",
               "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": is_error}],
               "source": {"kind": "tool", "callId": call_id}}
    return assign(event, data=assign(rest, message=message))


def _message_id(event: Record) -> str | None:
    data = event.get("data")
    if not is_record(data):
        return None
    message = data if event.get("type") == "user/message" else data.get("message")
    if not is_record(message):
        return None
    value = message.get("id")
    return value if isinstance(value, str) else None
