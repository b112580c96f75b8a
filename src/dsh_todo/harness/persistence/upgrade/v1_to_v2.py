"""v1 to v2: top-level assistant chunks go into their attempt's ``stream``, and the log is renumbered densely."""

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


def _safe(value: int) -> bool:
    return -(2**53 - 1) <= value <= 2**53 - 1


class _Accumulator:
    """Compacts one attempt's chunks the way DSH's assistant stream accumulator does: consecutive deltas of one
    block become one ``text-chunks`` / ``reasoning-chunks`` / ``tool-call-chunks`` record (``time0``, ``dt``
    gaps), every other chunk stands as ``{type: "chunk", time, chunk}``."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.last_time: list[int] = []

    def push(self, time: int, chunk: Mapping[str, Any]) -> None:
        kind = chunk.get("type")
        previous = self.records[-1] if self.records else None
        if kind in ("text-delta", "reasoning-delta"):
            packed = "text-chunks" if kind == "text-delta" else "reasoning-chunks"
            index, text = chunk.get("index"), chunk.get("text")
            if not isinstance(index, int) or index < 0 or not isinstance(text, str):
                raise UpgradeError(f"{kind} needs a non-negative index and a string text")
            if (previous is not None and previous["type"] == packed and previous["index"] == index
                    and _safe(time - self.last_time[-1])):
                previous["dt"].append(time - self.last_time[-1])
                previous["texts"].append(text)
                self.last_time[-1] = time
            else:
                self._add({"type": packed, "time0": time, "index": index, "dt": [], "texts": [text]}, time)
            return
        if kind == "tool-call-delta":
            index, call_id, delta = chunk.get("index"), chunk.get("id"), chunk.get("argumentsDelta")
            if (not isinstance(index, int) or index < 0 or not isinstance(call_id, str)
                    or not isinstance(chunk.get("name", ""), str) or not isinstance(delta, str)):
                raise UpgradeError("tool-call-delta needs an index, a string id and string argumentsDelta")
            if not call_id or chunk.get("name") == "":
                self._add({"type": "chunk", "time": time, "chunk": dict(chunk)}, time)
                return
            if (previous is not None and previous["type"] == "tool-call-chunks" and previous["index"] == index
                    and previous["id"] == call_id and ("name" in previous) == ("name" in chunk)
                    and previous.get("name") == chunk.get("name") and _safe(time - self.last_time[-1])):
                previous["dt"].append(time - self.last_time[-1])
                previous["args"].append(delta)
                self.last_time[-1] = time
                return
            record: dict[str, Any] = {"type": "tool-call-chunks", "time0": time, "index": index, "dt": [],
                                      "id": call_id}
            if "name" in chunk:
                record["name"] = chunk["name"]
            record["args"] = [delta]
            self._add(record, time)
            return
        if kind in ("block-start", "block-end", "usage", "finish"):
            self._add({"type": "chunk", "time": time, "chunk": dict(chunk)}, time)
            return
        raise UpgradeError(f"assistant chunk of unknown type {dumps(kind)}")

    def _add(self, record: dict[str, Any], time: int) -> None:
        self.records.append(record)
        self.last_time.append(time)


@dataclass
class _Attempt:
    turn: Any
    step: Any
    seqs: list[int] = field(default_factory=list)
    stream: _Accumulator = field(default_factory=_Accumulator)
    terminal: bool = False
    last_seq: int = 0
    last_time: int = 0
    after: list[Record] = field(default_factory=list)
    """Events that came after the attempt's last chunk so far: written once the attempt's place is known."""


_CLOSES_ATTEMPT: Final = frozenset({"turn/end", "step/end", "llm/retry", "llm/retry-started"})


class V1ToV2:
    """Folds top-level chunks into their attempt's ``stream`` and renumbers the log densely."""

    def __init__(self) -> None:
        self.out: list[Record] = []
        self.mapping: dict[int, int] = {}
        self.pending: _Attempt | None = None
        self.open_turn: Any = None
        self.open_step: Any = None
        self.previous: Record | None = None

    def run(self, events: list[Record]) -> list[Record]:
        for event in events:
            self.transform(event)
        self.finish_attempt()
        return self.out

    def transform(self, event: Record) -> None:
        kind = event.get("type")
        if kind == "assistant/chunk":
            unexpected = [key for key in event if key not in ("type", "seq", "time", "data", "ignorable",
                                                               "sourceEventSeqs", "surfaceOp")]
            if unexpected:
                raise UpgradeError(f"assistant/chunk {event.get('seq')} has unexpected member {unexpected[0]}")
        if kind not in V0_EVENT_TYPES:
            raise UpgradeError(f"format v1 contains unknown event type {dumps(kind)} at seq {event.get('seq')}")
        interrupted = self.interrupted_turn(event)
        if kind == "turn/start" and self.open_turn is not None and interrupted is None:
            raise UpgradeError(f"turn/start {dumps(data_of(event).get('turn'))} does not close the prior turn")
        self.observe_turn(event)
        if interrupted is not None:
            self.finish_attempt()
            self.emit_generated(interrupted)
        goal = _split_goal_change(event)
        if goal is not None:
            change, message = goal
            self.emit_generated(change)
            self.emit_source(message)
            return
        if kind == "assistant/chunk":
            self.chunk(event)
        elif kind == "assistant/message":
            self.message(event)
        elif kind in _CLOSES_ATTEMPT:
            self.finish_attempt()
            self.emit_source(event)
        elif self.pending is not None:
            self.pending.after.append(event)
        else:
            self.emit_source(event)

    def interrupted_turn(self, event: Record) -> Record | None:
        """A ``turn/start`` that follows a next-turn splice into a turn left open between steps closes that turn
        as interrupted (a restart before DSH wrote the closer)."""
        if (event.get("type") != "turn/start" or self.open_turn is None or self.open_step is not None
                or data_of(event).get("turn") != self.open_turn + 1 or self.previous is None
                or self.previous.get("type") != "agent/inbox/spliced"):
            return None
        splice = data_of(self.previous)
        inserted = splice.get("inserted")
        if splice.get("target") != "next-turn" or not isinstance(inserted, list) or not inserted:
            return None
        return {"type": "turn/end", "seq": event["seq"], "time": event["time"],
                "data": {"turn": self.open_turn, "reason": {"kind": "interrupted"}}}

    def observe_turn(self, event: Record) -> None:
        kind = event.get("type")
        if kind == "turn/start":
            self.open_turn, self.open_step = data_of(event).get("turn"), None
        elif kind == "turn/end":
            self.open_turn, self.open_step = None, None
        elif kind == "step/start":
            self.open_step = data_of(event).get("step")
        elif kind == "step/end":
            self.open_step = None
        self.previous = event

    def chunk(self, event: Record) -> None:
        data = data_of(event)
        turn, step, chunk = data.get("turn"), data.get("step"), data.get("chunk")
        if not is_record(chunk):
            raise UpgradeError(f"assistant/chunk {event.get('seq')} chunk must be an object")
        pending = self.pending
        if pending is not None and (pending.terminal or pending.turn != turn or pending.step != step):
            self.finish_attempt()
        elif pending is not None:
            self.flush_after(pending)
        if self.pending is None:
            self.pending = _Attempt(turn, step)
        attempt = self.pending
        attempt.stream.push(event["time"], chunk)
        attempt.seqs.append(event["seq"])
        attempt.last_seq, attempt.last_time = event["seq"], event["time"]
        if chunk.get("type") == "finish":
            attempt.terminal = True

    def message(self, event: Record) -> None:
        data = data_of(event)
        turn, step = data.get("turn"), data.get("step")
        sources = event.get("sourceEventSeqs")
        pending = self.pending
        if pending is not None and (pending.turn != turn or pending.step != step):
            self.finish_attempt()
            self.emit_source(_with_stream(event, []))
            return
        if not isinstance(sources, list):
            if pending is not None:
                raise UpgradeError(f"assistant/message {event.get('seq')} does not cite its complete v1 chunk "
                                   "attempt")
            self.emit_source(_with_stream(event, []))
            return
        if not sources:
            self.finish_attempt()
            self.emit_source(_with_stream(event, []))
            return
        if pending is None or sources != pending.seqs:
            raise UpgradeError(f"assistant/message {event.get('seq')} chunk references are not one complete ordered "
                               "attempt")
        self.flush_after(pending)
        self.emit_source(_with_stream(event, pending.stream.records))
        self.pending = None

    def finish_attempt(self) -> None:
        pending = self.pending
        if pending is None:
            return
        self.emit_generated({"type": "assistant/attempt", "seq": pending.last_seq, "time": pending.last_time,
                             "data": {"turn": pending.turn, "step": pending.step,
                                      "stream": pending.stream.records}})
        self.flush_after(pending)
        self.pending = None

    def flush_after(self, pending: _Attempt) -> None:
        for event in pending.after:
            self.emit_source(event)
        pending.after.clear()

    def emit_source(self, event: Record) -> None:
        target = len(self.out)
        self.mapping[event["seq"]] = target
        self.out.append(_remap_v1(event, target, self.mapping))

    def emit_generated(self, event: Record) -> None:
        self.out.append(_remap_v1(event, len(self.out), self.mapping))


def _with_stream(event: Record, stream: list[dict[str, Any]]) -> Record:
    """The message event without its chunk citations, its attempt's stream last in its data."""
    return assign(omit(event, "sourceEventSeqs"), data=assign(data_of(event), stream=stream))


def _split_goal_change(event: Record) -> tuple[Record, Record] | None:
    if event.get("type") != "user/message":
        return None
    data = data_of(event)
    source = data.get("source")
    if not is_record(source) or source.get("kind") != "goal" or "change" not in source:
        return None
    change = {"type": "goal/change", "seq": event["seq"], "time": event["time"], "data": source["change"]}
    return change, assign(event, data=assign(data, source={"kind": "plugin", "plugin": "goal"}))


def _map_one(value: Any, mapping: Mapping[int, int], label: str) -> int:
    target = mapping.get(value) if isinstance(value, int) else None
    if target is None:
        raise UpgradeError(f"{label} targets consumed assistant/chunk {value}")
    return target


def _map_list(values: Any, mapping: Mapping[int, int], label: str) -> list[int]:
    if not isinstance(values, list):
        raise UpgradeError(f"{label} must be a list of seqs")
    return [_map_one(value, mapping, label) for value in values]


def _remap_v1(source: Record, target: int, mapping: Mapping[int, int]) -> Record:
    """The event at ``target``: its references mapped, ``sourceEventSeqs`` then ``surfaceOp`` moved last."""
    label = f"{source.get('type')} {source.get('seq')}"
    event = omit(source, "sourceEventSeqs", "surfaceOp")
    event["seq"] = target
    event["data"] = _remap_payload(source, mapping, label)
    if "sourceEventSeqs" in source:
        event["sourceEventSeqs"] = _map_list(source["sourceEventSeqs"], mapping, f"{label} sources")
    operation = source.get("surfaceOp")
    if operation is not None and operation != "append":
        if not is_record(operation):
            raise UpgradeError(f"{label} surfaceOp must be \"append\" or a replace operation")
        operation = {"op": "replace",
                     "start": _map_one(operation.get("start"), mapping, f"{label} surface start"),
                     "end": _map_one(operation.get("end"), mapping, f"{label} surface end")}
    if "surfaceOp" in source:
        event["surfaceOp"] = operation
    return event


def _remap_payload(event: Record, mapping: Mapping[int, int], label: str) -> Any:
    data = event.get("data")
    kind = event.get("type")
    if kind == "command/done" and is_record(data) and "sourceEventSeq" in data:
        return assign(data, sourceEventSeq=_map_one(data["sourceEventSeq"], mapping, f"{label} sourceEventSeq"))
    if kind in ("compaction/prune", "compaction/summary") and is_record(data):
        shadowed = data.get("shadowedRange")
        if not is_record(shadowed):
            raise UpgradeError(f"{label} shadowedRange must be an object")
        return assign(data, shadowedRange={
            "start": _map_one(shadowed.get("start"), mapping, f"{label} shadowedRange start"),
            "end": _map_one(shadowed.get("end"), mapping, f"{label} shadowedRange end"),
        }, shadowedSeqs=_map_list(data.get("shadowedSeqs"), mapping, f"{label} shadowedSeqs"))
    if kind in ("session/title", "session/title-llm-request") and is_record(data):
        return assign(data, messageSeqs=_map_list(data.get("messageSeqs"), mapping, f"{label} messageSeqs"))
    return data
