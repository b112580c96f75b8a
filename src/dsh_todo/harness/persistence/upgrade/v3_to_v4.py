"""v3 to v4: first-class tool-result messages, producer-owned message sources, namespaced extension tags."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from dsh_todo.harness.persistence.upgrade.common import (
    CONTENT_TYPES,
    RENAMED_PRODUCERS,
    SAME_NAME_PRODUCERS,
    SYSTEM_PROMPT_PLUGIN,
    V3_EVENT_TYPES,
    Record,
    UpgradeError,
    assign,
    is_record,
)
from dsh_todo.harness.persistence.upgrade.v2_to_v3 import remap_earlier
from dsh_todo.jsonutil import dumps


def v3_to_v4(events: list[Record]) -> list[Record]:
    out: list[Record] = []
    mapping: list[int] = []
    turn: Any = None
    step_open = False
    next_turn_spliced = False
    for event in events:
        data = event.get("data")
        kind = event.get("type")
        if (kind == "turn/start" and turn is not None and not step_open and next_turn_spliced
                and is_record(data) and data.get("turn") == turn + 1):
            out.append({"type": "turn/end", "seq": len(out), "time": event["time"],
                        "data": {"turn": turn, "reason": {"kind": "interrupted"}}})
        inserted = data.get("inserted") if is_record(data) else None
        next_turn_spliced = (kind == "agent/inbox/spliced" and is_record(data)
                             and data.get("target") == "next-turn" and isinstance(inserted, list) and bool(inserted))
        if kind == "turn/start" and is_record(data) and isinstance(data.get("turn"), int):
            turn = data["turn"]
        elif kind == "turn/end":
            turn = None
        elif kind == "step/start":
            step_open = True
        elif kind == "step/end":
            step_open = False
        target = len(out)
        if event.get("ignorable") is True and kind not in V3_EVENT_TYPES:
            mapping.append(target)
            out.append(assign(event, type=f"plugin:{kind}", seq=target, ignorable=True))
            continue
        if kind not in V3_EVENT_TYPES:
            raise UpgradeError(f"format v3 contains unknown event type {dumps(kind)} at seq {event.get('seq')}")
        remapped = event if target == event["seq"] else _remap_v3(event, target, mapping)
        mapping.append(target)
        rewritten = _map_messages(remapped, _producer_source)
        out.append(_v4_content(_lift_tool_result(rewritten)))
    return out


def _remap_v3(event: Record, seq: int, mapping: Sequence[int]) -> Record:
    remapped = remap_earlier(event, seq, mapping) if not is_record(event.get("surfaceOp")) else None
    if remapped is not None:
        return remapped
    operation = event["surfaceOp"]
    without = assign(event, surfaceOp="append")
    result = remap_earlier(without, seq, mapping)
    start, end = operation.get("startSeq"), operation.get("endSeq")
    if not all(isinstance(value, int) and 0 <= value < min(event["seq"], len(mapping)) for value in (start, end)):
        raise UpgradeError("V3 reference must name an earlier source event")
    result["surfaceOp"] = assign(operation, startSeq=mapping[start], endSeq=mapping[end])
    return result


def _map_messages(event: Record, transform: Any) -> Record:
    """``transform`` applied to every message a first-party event carries (same dict back when unchanged)."""
    data = event.get("data")
    if not is_record(data):
        return event
    kind = event.get("type")
    if kind == "user/message":
        message = transform(data)
        return event if message is data else assign(event, data=message)
    if kind in ("developer/message", "system/message", "assistant/message", "tool/result"):
        if not is_record(data.get("message")):
            raise UpgradeError(f"{kind} requires a message")
        message = transform(data["message"])
        return event if message is data["message"] else assign(event, data=assign(data, message=message))
    key = "inserted" if kind == "agent/inbox/spliced" else "messages" if kind == "session/title-llm-request" else None
    if key is None:
        return event
    messages = data.get(key)
    if not isinstance(messages, list) or not all(is_record(message) for message in messages):
        raise UpgradeError(f"{kind} requires message objects")
    mapped = [transform(message) for message in messages]
    if all(new is old for new, old in zip(mapped, messages, strict=True)):
        return event
    return assign(event, data=assign(data, **{key: mapped}))


def _producer_source(message: dict[str, Any]) -> dict[str, Any]:
    source = message.get("source")
    if not is_record(source):
        return message
    kind = source.get("kind")
    if not isinstance(kind, str) or not kind:
        raise UpgradeError("message source requires a nonempty kind")
    if kind != "plugin":
        return message
    plugin = source.get("plugin")
    if not isinstance(plugin, str):
        raise UpgradeError("plugin source is not canonical: plugin requires a string")
    if plugin == SYSTEM_PROMPT_PLUGIN and message.get("role") == "system":
        producer = "system-prompt"
    elif plugin in RENAMED_PRODUCERS:
        producer = RENAMED_PRODUCERS[plugin]
    elif plugin in SAME_NAME_PRODUCERS:
        producer = plugin
    else:
        producer = f"plugin:{plugin}"
    if len(source) == 2:
        converted: dict[str, Any] = {"kind": producer}
    else:
        converted = {key: producer if key == "kind" else value for key, value in source.items() if key != "plugin"}
    return assign(message, source=converted)


_MESSAGE_FIELDS: Final = ("id", "role", "source", "content")
_WRAPPER_FIELDS: Final = ("type", "toolCallId", "content", "isError")


def _lift_tool_result(event: Record) -> Record:
    """A v3 ``tool/result`` (a user message wrapping one ``tool-result`` block) as v4's ``role: "tool"`` message."""
    data = event.get("data")
    if event.get("type") != "tool/result" or not is_record(data):
        return event
    message = data.get("message")
    if not is_record(message) or message.get("role") != "user":
        return event
    source = message.get("source")
    call_id = source.get("callId") if is_record(source) else None
    content = message.get("content")
    wrapper = content[0] if isinstance(content, list) and len(content) == 1 and is_record(content[0]) else None
    message_id = message.get("id")
    if (not isinstance(message_id, str) or not message_id or not is_record(source) or source.get("kind") != "tool"
            or not isinstance(call_id, str) or not call_id or wrapper is None or wrapper.get("type") != "tool-result"
            or wrapper.get("toolCallId") != call_id):
        raise UpgradeError(f"format v3 tool/result at seq {event.get('seq')} requires exactly one tool-result wrapper "
                           "matching its tool source")
    is_error = wrapper.get("isError")
    if "isError" in wrapper and not isinstance(is_error, bool):
        raise UpgradeError(f"format v3 tool/result at seq {event.get('seq')} tool-result isError must be boolean")
    result = wrapper.get("content")
    if not isinstance(result, list):
        raise UpgradeError(f"format v3 tool/result at seq {event.get('seq')} tool-result content must be an array")
    if any(is_record(block) and block.get("type") == "tool-result" for block in result):
        raise UpgradeError(f"format v3 tool/result at seq {event.get('seq')} contains a nested tool-result "
                           "unsupported by this converter")
    lifted: dict[str, Any] = {"role": "tool", "source": source, "toolCallId": call_id, "content": result}
    if "isError" in wrapper:
        lifted["isError"] = is_error
    lifted["id"] = message_id
    lifted.update((f"plugin:message:{key}", value) for key, value in message.items() if key not in _MESSAGE_FIELDS)
    lifted.update((f"plugin:result:{key}", value) for key, value in wrapper.items() if key not in _WRAPPER_FIELDS)
    return assign(event, data=assign(data, message=lifted))


def _block_v4(block: Any) -> Any:
    if not is_record(block) or not isinstance(block.get("type"), str):
        raise UpgradeError("content blocks need string type tags")
    return block if block["type"] in CONTENT_TYPES else assign(block, type=f"plugin:{block['type']}")


def _content_v4(content: Any) -> Any:
    if not isinstance(content, list):
        raise UpgradeError("message content must be an array")
    mapped = [_block_v4(block) for block in content]
    return content if all(new is old for new, old in zip(mapped, content, strict=True)) else mapped


def _message_v4(message: dict[str, Any]) -> dict[str, Any]:
    content = _content_v4(message.get("content"))
    return message if content is message.get("content") else assign(message, content=content)


def _chunk_v4(chunk: Any) -> Any:
    if not is_record(chunk):
        return chunk
    if chunk.get("type") == "block-end":
        block = _block_v4(chunk.get("block"))
        return chunk if block is chunk.get("block") else assign(chunk, block=block)
    if chunk.get("type") != "block-start":
        return chunk
    original = chunk.get("blockType")
    if not isinstance(original, str):
        raise UpgradeError("block-start blockType must be a string")
    return chunk if original in CONTENT_TYPES else assign(chunk, blockType=f"plugin:{original}")


def _v4_content(event: Record) -> Record:
    """Namespaces content tags v3 does not define, in messages, summaries and stream chunks."""
    mapped = _map_messages(event, _message_v4)
    data = mapped.get("data")
    if not is_record(data):
        return mapped
    original = data
    kind = event.get("type")
    if kind == "compaction/summary":
        data = assign(data, summary=_content_v4(data.get("summary")))
        if "rawOutput" in data:
            data["rawOutput"] = _content_v4(data["rawOutput"])
    elif kind == "tool/ptc-dispatch":
        data = assign(data, content=_content_v4(data.get("content")))
    elif kind == "team/message/queued" and is_record(data.get("message")):
        data = assign(data, message=_message_v4(data["message"]))
    if kind == "request/header" and is_record(data.get("header")):
        tools = data["header"].get("tools")
        for index, tool in enumerate(tools if isinstance(tools, list) else []):
            if is_record(tool) and "deferLoading" in tool:
                raise UpgradeError(f"format v3 request/header at seq {event.get('seq')}.header.tools[{index}] contains "
                                   "deferLoading, which is only defined in V4")
    if kind in ("assistant/message", "assistant/attempt") and isinstance(data.get("stream"), list):
        stream = data["stream"]
        converted = [assign(entry, chunk=_chunk_v4(entry.get("chunk")))
                     if is_record(entry) and entry.get("type") == "chunk" else entry for entry in stream]
        data = assign(data, stream=converted)
    return mapped if data == original else assign(mapped, data=data)
