"""v2 to v3: the system prompt leaves ``request/header`` for ``system/message`` events."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from dsh_todo.harness.persistence.upgrade.common import (
    CONTENT_TYPES,
    SURFACE_TYPES,
    SYSTEM_PROMPT_PLUGIN,
    Record,
    UpgradeError,
    assign,
    data_of,
    is_record,
    omit,
)
from dsh_todo.jsonutil import dumps


class V2ToV3:
    """Moves the system prompt from ``request/header`` into ``system/message`` events."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.out: list[Record] = []
        self.mapping: list[int] = []
        self.step: dict[str, Any] | None = None
        self.head: int | None = None
        self.prompt = ""
        self.ids: set[str] = set()

    def run(self, events: list[Record]) -> list[Record]:
        for event in events:
            self.transform(event)
        return self.out

    def transform(self, event: Record) -> None:
        kind = event.get("type")
        data = data_of(event)
        self.observe_ids(event, data)
        if kind in SURFACE_TYPES and "surfaceOp" not in event:
            raise UpgradeError(f"{kind} requires surfaceOp")
        _admit(event, data)
        source = event
        if kind == "request/header":
            header = data.get("header")
            if not is_record(header):
                raise UpgradeError(f"request/header {event.get('seq')} header must be an object")
            system = header.get("system")
            prompt = system if isinstance(system, str) else ""
            if prompt != self.prompt:
                self.emit_system(prompt, event)
            source = assign(event, data=assign(data, header=omit(header, "system")))
        if kind in SURFACE_TYPES and self.head is None:
            raise UpgradeError("format v2 surface before first step cannot acquire a system head without changing "
                               "chronology")
        target = remap_earlier(source, len(self.out), self.mapping)
        self.mapping.append(len(self.out))
        self.out.append(_canonical_v3(_rename_ptc(target)))
        if kind == "step/start":
            self.step = {"turn": data.get("turn"), "step": data.get("step")}
            if self.head is None:
                self.emit_system("", event)
        elif kind in ("step/end", "turn/end"):
            self.step = None

    def observe_ids(self, event: Record, data: Mapping[str, Any]) -> None:
        kind = event.get("type")
        messages: Any = []
        if kind == "user/message":
            messages = [data]
        elif kind in ("assistant/message", "tool/result"):
            messages = [data.get("message")]
        elif kind == "agent/inbox/spliced":
            messages = data.get("inserted")
        elif kind == "session/title-llm-request":
            messages = data.get("messages")
        for message in messages if isinstance(messages, list) else []:
            if is_record(message) and isinstance(message.get("id"), str):
                if message["id"].startswith("v2-to-v3-system-") and message["id"] in self.ids:
                    raise UpgradeError("source message id collides with a generated system message id")
                self.ids.add(message["id"])

    def emit_system(self, prompt: str, anchor: Record) -> None:
        if self.step is None:
            raise UpgradeError("format v2 changed request prompt outside an open step cannot retain source "
                               "chronology")
        identity = dumps(["session-format-v2-to-v3", self.session_id, anchor["seq"], anchor["type"]])
        message_id = "v2-to-v3-system-" + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
        if message_id in self.ids:
            raise UpgradeError("generated system message id collides with an existing message id")
        self.ids.add(message_id)
        seq = len(self.out)
        event: Record = {
            "type": "system/message", "seq": seq, "time": anchor["time"],
            "data": {**self.step, "message": {
                "id": message_id, "role": "system", "source": {"kind": "plugin", "plugin": SYSTEM_PROMPT_PLUGIN},
                "content": [] if prompt == "" else [{"type": "text", "text": prompt}]}},
        }
        if self.head is None:
            event["surfaceOp"] = "append"
        else:
            event["surfaceOp"] = {"op": "replace", "start": self.head, "end": self.head}
            event["sourceEventSeqs"] = [self.head]
        self.out.append(_canonical_v3(event))
        self.head = seq
        self.prompt = prompt


def remap_earlier(event: Record, seq: int, mapping: Sequence[int]) -> Record:
    """The event at ``seq`` with its earlier-seq references mapped; every key keeps its place."""

    def one(value: Any) -> int:
        if not isinstance(value, int) or not 0 <= value < min(event["seq"], len(mapping)):
            raise UpgradeError("reference must name an earlier source event")
        return mapping[value]

    def many(value: Any) -> list[int]:
        if not isinstance(value, list):
            raise UpgradeError("sequence references must be an array")
        return [one(item) for item in value]

    data = data_of(event)
    kind = event.get("type")
    if kind == "command/done" and "sourceEventSeq" in data:
        data = assign(data, sourceEventSeq=one(data["sourceEventSeq"]))
    elif kind in ("compaction/summary", "compaction/prune"):
        shadowed = data.get("shadowedRange")
        if not is_record(shadowed):
            raise UpgradeError(f"{kind} shadowedRange must be an object")
        data = assign(data, shadowedRange=assign(shadowed, start=one(shadowed.get("start")),
                                                end=one(shadowed.get("end"))),
                     shadowedSeqs=many(data.get("shadowedSeqs")))
    elif kind in ("session/title", "session/title-llm-request"):
        data = assign(data, messageSeqs=many(data.get("messageSeqs")))
    result = assign(event, seq=seq, data=data)
    if "sourceEventSeqs" in event:
        result["sourceEventSeqs"] = many(event["sourceEventSeqs"])
    operation = event.get("surfaceOp")
    if is_record(operation):
        result["surfaceOp"] = assign(operation, start=one(operation.get("start")), end=one(operation.get("end")))
    return result


def _rename_message_source(message: Any) -> Any:
    source = message.get("source") if is_record(message) else None
    if not is_record(source) or source.get("kind") != "plugin" or source.get("plugin") != "tools-code-mode":
        return message
    return assign(message, source=assign(source, plugin="tools-ptc"))


def _rename_ptc(event: Record) -> Record:
    kind = event.get("type")
    data = event["data"]
    if kind == "agent-preset/selected":
        return assign(event, data=assign(data, agentPreset="ptc")) if data.get("agentPreset") == "code" else event
    if kind == "tool/code-dispatch-start":
        return assign(event, type="tool/ptc-dispatch-start")
    if kind == "tool/code-dispatch":
        return assign(event, type="tool/ptc-dispatch")
    if kind == "user/message":
        renamed = _rename_message_source(data)
        return event if renamed is data else assign(event, data=renamed)
    if kind in ("agent/inbox/spliced", "session/title-llm-request"):
        key = "inserted" if kind == "agent/inbox/spliced" else "messages"
        messages = data.get(key)
        if not isinstance(messages, list):
            return event
        renamed_all = [_rename_message_source(message) for message in messages]
        if all(new is old for new, old in zip(renamed_all, messages, strict=True)):
            return event
        return assign(event, data=assign(data, **{key: renamed_all}))
    return event


def _canonical_v3(event: Record) -> Record:
    """Replace operations spell ``startSeq``/``endSeq``; a request header drops empty ``tools``/``adapterDefaults``."""
    target = event
    operation = event.get("surfaceOp")
    if operation is not None and operation != "append":
        if not is_record(operation) or set(operation) != {"op", "start", "end"} or operation["op"] != "replace":
            raise UpgradeError(f"format v2 {event.get('type')} at seq {event.get('seq')} requires exact replace "
                               "fields op/start/end")
        target = assign(event, surfaceOp={"op": "replace", "startSeq": operation["start"],
                                         "endSeq": operation["end"]})
    if event.get("type") == "request/header":
        data = data_of(event)
        header = data["header"]
        empty = [key for key, value in header.items()
                 if (key == "tools" and value == []) or (key == "adapterDefaults" and value == {})]
        if empty:
            target = assign(target, data=assign(data, header=omit(header, *empty)))
    return target


_SOURCE_KINDS: Final = frozenset({
    "user", "plugin", "model", "tool", "agent-instructions", "session-reference", "team-message", "goal",
    "skill-invocation", "skill-catalog", "coordinator", "subagent-report", "subagent-settled", "webhook",
    "agent-message",
})
"""Message source kinds v2 knows; DSH will not guess how to carry another forward."""


def _admit(event: Record, data: Mapping[str, Any]) -> None:
    """Refuse what DSH's v2-to-v3 step cannot classify: an unknown content kind or message source kind."""
    kind = event.get("type")
    label = f"format v2 {kind} at seq {event.get('seq')} data"
    messages: list[Any] = []
    if kind in ("user/message", "tool/code-dispatch"):
        _content_kinds(data.get("content"), f"{label}.content")
    elif kind in ("assistant/message", "tool/result", "team/message/queued"):
        message = data.get("message")
        _content_kinds(message.get("content") if is_record(message) else None, f"{label}.message.content")
    elif kind in ("agent/inbox/spliced", "session/title-llm-request"):
        key = "inserted" if kind == "agent/inbox/spliced" else "messages"
        values = data.get(key)
        if not isinstance(values, list):
            raise UpgradeError(f"{label}.{key}: content must be an array")
        for index, value in enumerate(values):
            path = f"{label}.{key}[{index}]"
            _content_kinds(value.get("content") if is_record(value) else None, f"{path}.content")
            messages.append(value)
    elif kind == "compaction/summary":
        _content_kinds(data.get("summary"), f"{label}.summary")
        if "rawOutput" in data:
            _content_kinds(data["rawOutput"], f"{label}.rawOutput")
    if kind in ("assistant/message", "assistant/attempt"):
        stream = data.get("stream")
        for index, entry in enumerate(stream if isinstance(stream, list) else []):
            chunk = entry.get("chunk") if is_record(entry) and entry.get("type") == "chunk" else None
            if is_record(chunk) and chunk.get("type") == "block-end":
                _content_kind(chunk.get("block", {}).get("type") if is_record(chunk.get("block")) else None,
                              f"{label}.stream[{index}].chunk.block")
            if is_record(chunk) and chunk.get("type") == "block-start":
                _content_kind(chunk.get("blockType"), f"{label}.stream[{index}].chunk.blockType")
    if kind == "user/message":
        messages.append(data)
    elif kind in ("assistant/message", "tool/result"):
        messages.append(data.get("message"))
    for message in messages:
        source = message.get("source") if is_record(message) else None
        if not is_record(source) or source.get("kind") not in _SOURCE_KINDS:
            raise UpgradeError("cannot safely transform unclassified message source")


def _content_kinds(content: Any, label: str) -> None:
    if not isinstance(content, list):
        raise UpgradeError(f"{label}: content must be an array")
    for index, block in enumerate(content):
        path = f"{label}[{index}]"
        _content_kind(block.get("type") if is_record(block) else None, path)
        if is_record(block) and block.get("type") == "tool-result":
            if not isinstance(block.get("content"), list):
                raise UpgradeError(f'{path}.content: invalid message content kind "tool-result": content must be '
                                   "an array")
            _content_kinds(block["content"], f"{path}.content")


def _content_kind(kind: Any, label: str) -> None:
    if not isinstance(kind, str) or kind not in CONTENT_TYPES:
        raise UpgradeError(f"{label}: cannot safely transform unclassified message content kind {dumps(kind)}")
