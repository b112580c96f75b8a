"""Carry a format-v0 session log forward to format v4, the way DeepSeek Harness 0.2.1 does.

DSH 0.1.1 wrote session logs in format v0 (``session.jsonl[.zstd]``); DSH 0.2.1 writes format v4
(``session.v4.jsonl[.zstd]``) and, opening a v0 log, migrates it through every released format in turn:
v0→v1→v2→v3→v4. When we resume a v0 session we carry it forward the same way, so the v4 log we write is the one
DSH would have written from the same v0 log: :func:`upgrade_to_v4` returns DSH's v4 header record and events,
each a dict whose key order, dumped by :func:`dsh_todo.jsonutil.dumps`, gives DSH's exact line. The tests hold
that output to DSH's own export of the same logs, byte for byte (``tests/fixtures/dsh-v4-upgrade``).

The steps, each a pure pass over the whole log (DSH streams them; the result is the same):

* **v0→v1** normalises pre-release shapes: ``compact/*`` becomes ``compaction/*``; a ``turn/start`` trigger is
  dropped; ``turn/end`` reasons ``aborted`` (without a reason), ``disposed`` and flat ``error`` get their current
  shape; ``request/header`` loses ``messagePrefix``; ``steering/message`` becomes a ``user/message``; retries and
  compactions get their ids; legacy user, assistant and tool-result payloads become messages.
* **v1→v2** takes every ``assistant/chunk`` off the top level: the chunks of one attempt are compacted into the
  ``stream`` list of the ``assistant/message`` they produced (an attempt no message closed becomes an
  ``assistant/attempt``), a turn a restart left open gets ``turn/end {kind: "interrupted"}``, and every event is
  renumbered densely, its references to earlier seqs mapped with it.
* **v2→v3** moves the system prompt out of ``request/header`` into a ``system/message`` (an empty one after the
  first ``step/start``, a replacing one before each header whose prompt differs from the last), whose id is
  ``v2-to-v3-system-`` and the SHA-256 of its anchor; replace operations spell ``startSeq``/``endSeq``.
* **v3→v4** lifts each ``tool/result`` message to the first-class ``role: "tool"`` shape, turns plugin message
  sources into producer kinds (the system prompt's is ``system-prompt``) and namespaces unknown content tags.

What DSH refuses, this refuses too, with an :class:`UpgradeError` whose text is DSH's where DSH has one. Seeded
sessions (a ``seedLength`` header) are refused: nothing here writes one, and their inherited cut is not carried.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dsh_todo.jsonutil import dumps

__all__ = ["UpgradeError", "upgrade_to_v4"]

Event = dict[str, Any]

SYSTEM_PROMPT_PLUGIN: Final = "@deepseek-ai/dsh-system-prompt"
"""The plugin v3 names as a system message's source; v4 calls that producer ``system-prompt``."""

V0_EVENT_TYPES: Final = frozenset({
    "agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
    "assistant/chunk", "assistant/message", "command/done", "command/run", "compaction/end", "compaction/prune",
    "compaction/start", "compaction/summary", "feedback/record", "goal/change", "hook/invoked", "hook/result",
    "llm/retry", "llm/retry-started", "model/selection", "permission/preset", "plan/mode", "request/context",
    "request/header", "sandbox/mode", "schedule/change", "session-log-deepseek/delivery-accepted",
    "session/end-seed", "session/title", "session/title-llm-request", "step/end", "step/start",
    "subagent/descriptor", "subagent/model-selection-policy", "team/member", "team/message/delivered",
    "team/message/queued", "team/task", "todo/write", "tool-workflow/agent-end", "tool-workflow/agent-start",
    "tool-workflow/run-end", "tool-workflow/run-start", "tool/call", "tool/code-dispatch",
    "tool/code-dispatch-start", "tool/result", "turn/end", "turn/start", "user/message",
    "web/deepseek-search-llm-request",
})
"""The event types released format v0 knows (after ``compact/*`` is renamed): DSH refuses any other, even one
marked ignorable."""

V3_EVENT_TYPES: Final = V0_EVENT_TYPES - {"assistant/chunk", "tool/code-dispatch", "tool/code-dispatch-start"} | {
    "assistant/attempt", "deliverables/presented", "feedback/message-delete", "feedback/message-put",
    "image/offload", "subagent/catalog", "system/message", "tool/ptc-dispatch", "tool/ptc-dispatch-start",
    "workspace/changes",
}
"""The first-party event types the released v3 reader understands; an ignorable event of another type becomes
``plugin:<type>`` in v4."""

SURFACE_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
"""Events that put a message on the conversation surface: each carries a ``surfaceOp``."""

CONTENT_TYPES: Final = frozenset({"text", "reasoning", "image", "file", "tool-call", "tool-result"})
"""Content block tags v3 defines; v4 namespaces any other as ``plugin:<tag>``."""

RENAMED_PRODUCERS: Final = {
    "compact": "compact-checkpoint",
    "tools-code-mode": "ptc-mode",
    "tools-ptc": "ptc-mode",
    "dsh-compaction-basic": "compact-basic",
    SYSTEM_PROMPT_PLUGIN: "runtime-context",
}
SAME_NAME_PRODUCERS: Final = frozenset({
    "agent-instructions", "session-reference", "team-message", "goal", "skill-invocation", "skill-catalog",
    "coordinator", "subagent-report", "subagent-settled", "webhook", "agent-message", "model-selection",
    "plan-mode", "time-context", "tmux-context", "user-approval", "repeat-tool-reminder", "tool-cordis",
    "cordis-host-runner", "tool-goal", "tool-jobs", "hooks-codex", "hooks-claude-code", "schedule",
    "dsh-session-title-llm",
})


class UpgradeError(ValueError):
    """A log DSH 0.2.1 would refuse to migrate; the message says why in one line."""


def upgrade_to_v4(header: Mapping[str, Any],
                  events: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The v4 header record and events DSH 0.2.1 makes of a v0 log.

    ``header`` is the v0 header (its record, or the reader's metadata without ``type``); ``events`` are the log's
    events in order as our reader returns them, packed chunk rows expanded into ``assistant/chunk`` events. Nothing
    given is changed. Each returned dict, dumped by the canonical encoder, is DSH's line for it: the header line
    first, then one line per event.
    """
    if header.get("version") != 0:
        raise UpgradeError(f"expected a format v0 session header, got version {dumps(header.get('version'))}")
    if "seedLength" in header:
        raise UpgradeError("seeded sessions (seedLength) are not carried forward to format v4")
    session_id = header.get("id")
    if not isinstance(session_id, str):
        raise UpgradeError("the session header has no string id")
    v1 = _v0_to_v1(session_id, [_decoded(event) for event in events])
    v2 = _V1ToV2().run(v1)
    v3 = _V2ToV3(session_id).run(v2)
    return _header_v4(header), [_encoded(event) for event in _v3_to_v4(v3)]


def _header_v4(header: Mapping[str, Any]) -> dict[str, Any]:
    """The v4 header in DSH's key order: ``isSeeded`` before ``origin`` and ``delegationDepth``."""
    record: dict[str, Any] = {"type": "session", "version": 4, "id": header["id"], "createdAt": header["createdAt"]}
    for key in ("cwd", "parentSession"):
        if key in header:
            record[key] = header[key]
    record["isSeeded"] = False
    if "origin" in header:
        record["origin"] = header["origin"]
    record["delegationDepth"] = header["delegationDepth"]
    if "agentPreset" in header:
        record["agentPreset"] = "ptc" if header["agentPreset"] == "code" else header["agentPreset"]
    return record


def _decoded(event: Mapping[str, Any]) -> Event:
    """A shallow copy, its ``sourceEventSeqs`` ranges (``[start, end]`` members) spelled out as DSH's decoder does."""
    result = dict(event)
    sources = result.get("sourceEventSeqs")
    if isinstance(sources, list) and any(isinstance(member, list) for member in sources):
        seqs: list[Any] = []
        for member in sources:
            if isinstance(member, list):
                if len(member) != 2 or not all(isinstance(value, int) for value in member) or member[1] < member[0]:
                    raise UpgradeError("sourceEventSeqs range must be a [start, end] pair")
                seqs.extend(range(member[0], member[1] + 1))
            else:
                seqs.append(member)
        result["sourceEventSeqs"] = seqs
    return result


def _encoded(event: Event) -> Event:
    """The event as DSH's v4 encoder writes it: three or more consecutive ``sourceEventSeqs`` as one range."""
    sources = event.get("sourceEventSeqs")
    if not isinstance(sources, list) or any(later <= earlier for earlier, later in zip(sources, sources[1:])):
        return event
    packed: list[Any] = []
    index = 0
    while index < len(sources):
        start = end = sources[index]
        while index + 1 < len(sources) and sources[index + 1] == end + 1:
            index += 1
            end += 1
        if end - start >= 2:
            packed.append([start, end])
        else:
            packed.extend(range(start, end + 1))
        index += 1
    return _with(event, sourceEventSeqs=packed)


# --- shared helpers -------------------------------------------------------------------------------------------------


def _data(event: Mapping[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    if not isinstance(data, dict):
        raise UpgradeError(f"{event.get('type')} {event.get('seq')} data must be an object")
    return data


def _is_record(value: object) -> bool:
    return isinstance(value, dict)


def _with(mapping: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """``{...mapping, key: value}``: an existing key keeps its place, a new one goes last (JavaScript's spread)."""
    result = dict(mapping)
    result.update(changes)
    return result


def _without(mapping: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if key not in keys}


# --- v0 -> v1 -------------------------------------------------------------------------------------------------------

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


def _v0_to_v1(session_id: str, events: list[Event]) -> list[Event]:
    state = _V0State()
    result: list[Event] = []
    for event in events:
        named = event
        if event.get("type") in _COMPACTION_NAMES:
            named = _with(event, type=_COMPACTION_NAMES[event["type"]])
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


def _refuse_retired(event: Event, session_id: str) -> None:
    kind = event.get("type")
    if kind in ("request/header-delta", "mode/set"):
        raise UpgradeError(f"session {dumps(session_id)} contains unsupported legacy {kind} event at seq "
                           f"{event.get('seq')}")
    if kind == "request/header" and _data(event).get("reason") == "fallback":
        raise UpgradeError(f"session {dumps(session_id)} contains unsupported request/header reason \"fallback\" "
                           f"at seq {event.get('seq')}")


def _turn_start(event: Event, session_id: str) -> Event:
    if event.get("type") != "turn/start":
        return event
    data = _data(event)
    if "trigger" not in data:
        return event
    trigger = data["trigger"]
    if (set(data) != {"turn", "trigger"} or not isinstance(data["turn"], int) or data["turn"] < 1
            or not _is_record(trigger) or not isinstance(trigger.get("kind"), str) or not trigger["kind"]):
        raise _malformed(session_id, "turn/start", event.get("seq"))
    return _with(event, data={"turn": data["turn"]})


def _turn_end(event: Event, session_id: str) -> Event:
    if event.get("type") != "turn/end":
        return event
    data = _data(event)
    reason = data.get("reason")
    turn = data.get("turn")
    if set(data) != {"turn", "reason"} or not isinstance(turn, int) or turn < 1 or not _is_record(reason):
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
    return _with(event, data=_with(data, reason=current))


def _error_reason(reason: Mapping[str, Any], seq: Any, session_id: str) -> dict[str, Any]:
    failure = reason.get("failure")
    if failure is not None:
        allowed = {"message", "code", "status", "providerRetryAfterMs", "requestId"}
        if (set(reason) != {"kind", "step", "failure"} or not _is_record(failure)
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


def _request_header(event: Event, session_id: str) -> Event:
    if event.get("type") != "request/header":
        return event
    data = _data(event)
    header = data.get("header")
    if not _is_record(header) or "messagePrefix" not in header:
        return event
    if not isinstance(header["messagePrefix"], list):
        raise UpgradeError(f"session {dumps(session_id)} contains malformed request/header messagePrefix at seq "
                           f"{event.get('seq')}")
    return _with(event, data=_with(data, header=_without(header, "messagePrefix")))


def _steering(event: Event, session_id: str) -> Event:
    if event.get("type") != "steering/message":
        return event
    data = _data(event)
    if "message" in data:
        if set(data) != {"turn", "message"}:
            raise _malformed(session_id, "steering/message", event.get("seq"))
        return _with(event, type="user/message", data=data["message"])
    if set(data) != {"turn", "content", "source"}:
        raise _malformed(session_id, "steering/message", event.get("seq"))
    message = _without(data, "turn")
    return _with(event, type="user/message",
                 data=_with(message, id=_legacy_id(session_id, event["seq"]), role="user"))


def _retry(event: Event, session_id: str, state: _V0State) -> Event:
    if event.get("type") != "llm/retry":
        return event
    data = _data(event)
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
    return _with(event, data=_with(data, retryId=migrated))


def _compaction(event: Event, session_id: str, state: _V0State) -> Event:
    kind = event.get("type")
    if kind == "session/end-seed":
        state.compaction_id = None
        return event
    if kind == "compaction/start":
        data = _data(event)
        existing = data.get("compactionId")
        if isinstance(existing, str) and existing:
            state.compaction_id = existing
            return event
        if "compactionId" in data:
            return event
        state.compaction_id = f"legacy-compaction:{session_id}:{event['seq']}"
        return _with(event, data=_with(data, compactionId=state.compaction_id))
    compaction_id = state.compaction_id
    if compaction_id is None:
        return event
    if kind in ("compaction/summary", "compaction/end"):
        data = _data(event)
        if kind == "compaction/end":
            state.compaction_id = None
        return event if "compactionId" in data else _with(event, data=_with(data, compactionId=compaction_id))
    if kind != "user/message":
        return event
    data = _data(event)
    source = data.get("source")
    if (not _is_record(source) or source.get("kind") != "plugin" or source.get("plugin") != "compact"
            or "compactionId" in source):
        return event
    return _with(event, data=_with(data, source=_with(source, compactionId=compaction_id)))


def _legacy_message(event: Event, session_id: str, state: _V0State) -> Event:
    kind = event.get("type")
    if kind not in ("user/message", "assistant/message", "tool/result"):
        return event
    data = _data(event)
    if kind == "user/message":
        if any(key in data for key in ("id", "role", "message")) or "content" not in data or "source" not in data:
            return event
        return _with(event, data=_with(data, id=_legacy_id(session_id, event["seq"]), role="user"))
    if kind == "assistant/message":
        if "message" in data or "content" not in data or "provenance" not in data:
            return event
        source = data["provenance"]
        if not _is_record(source):
            raise UpgradeError(f"assistant/message {event['seq']} legacy source must be an object")
        rest = _without(data, "content", "provenance")
        message = {"id": _legacy_id(session_id, event["seq"]), "role": "assistant", "content": data["content"],
                   "source": _with(source, kind="model")}
        return _with(event, data=_with(rest, message=message))
    if "message" in data or not {"callId", "content", "isError"} <= set(data):
        return event
    call_id, content, is_error = data["callId"], data["content"], data["isError"]
    if not isinstance(call_id, str) or not isinstance(is_error, bool):
        return event
    rest = _without(data, "callId", "content", "isError")
    operation = event.get("surfaceOp")
    start = operation.get("start") if _is_record(operation) and operation.get("op") == "replace" else None
    message_id = _legacy_id(session_id, event["seq"]) if start is None else state.message_ids.get(start)
    if message_id is None:
        raise UpgradeError(f"tool/result {event['seq']} replacement cites a message without identity")
    message = {"id": message_id, "role": "user",
               "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": is_error}],
               "source": {"kind": "tool", "callId": call_id}}
    return _with(event, data=_with(rest, message=message))


def _message_id(event: Event) -> str | None:
    data = event.get("data")
    if not _is_record(data):
        return None
    message = data if event.get("type") == "user/message" else data.get("message")
    if not _is_record(message):
        return None
    value = message.get("id")
    return value if isinstance(value, str) else None


# --- v1 -> v2: assistant chunks into stream lists -------------------------------------------------------------------


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
    after: list[Event] = field(default_factory=list)
    """Events that came after the attempt's last chunk so far: written once the attempt's place is known."""


_CLOSES_ATTEMPT: Final = frozenset({"turn/end", "step/end", "llm/retry", "llm/retry-started"})


class _V1ToV2:
    """Folds top-level chunks into their attempt's ``stream`` and renumbers the log densely."""

    def __init__(self) -> None:
        self.out: list[Event] = []
        self.mapping: dict[int, int] = {}
        self.pending: _Attempt | None = None
        self.open_turn: Any = None
        self.open_step: Any = None
        self.previous: Event | None = None

    def run(self, events: list[Event]) -> list[Event]:
        for event in events:
            self.transform(event)
        self.finish_attempt()
        return self.out

    def transform(self, event: Event) -> None:
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
            raise UpgradeError(f"turn/start {dumps(_data(event).get('turn'))} does not close the prior turn")
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

    def interrupted_turn(self, event: Event) -> Event | None:
        """A ``turn/start`` that follows a next-turn splice into a turn left open between steps closes that turn
        as interrupted (a restart before DSH wrote the closer)."""
        if (event.get("type") != "turn/start" or self.open_turn is None or self.open_step is not None
                or _data(event).get("turn") != self.open_turn + 1 or self.previous is None
                or self.previous.get("type") != "agent/inbox/spliced"):
            return None
        splice = _data(self.previous)
        inserted = splice.get("inserted")
        if splice.get("target") != "next-turn" or not isinstance(inserted, list) or not inserted:
            return None
        return {"type": "turn/end", "seq": event["seq"], "time": event["time"],
                "data": {"turn": self.open_turn, "reason": {"kind": "interrupted"}}}

    def observe_turn(self, event: Event) -> None:
        kind = event.get("type")
        if kind == "turn/start":
            self.open_turn, self.open_step = _data(event).get("turn"), None
        elif kind == "turn/end":
            self.open_turn, self.open_step = None, None
        elif kind == "step/start":
            self.open_step = _data(event).get("step")
        elif kind == "step/end":
            self.open_step = None
        self.previous = event

    def chunk(self, event: Event) -> None:
        data = _data(event)
        turn, step, chunk = data.get("turn"), data.get("step"), data.get("chunk")
        if not _is_record(chunk):
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

    def message(self, event: Event) -> None:
        data = _data(event)
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

    def emit_source(self, event: Event) -> None:
        target = len(self.out)
        self.mapping[event["seq"]] = target
        self.out.append(_remap_v1(event, target, self.mapping))

    def emit_generated(self, event: Event) -> None:
        self.out.append(_remap_v1(event, len(self.out), self.mapping))


def _with_stream(event: Event, stream: list[dict[str, Any]]) -> Event:
    """The message event without its chunk citations, its attempt's stream last in its data."""
    return _with(_without(event, "sourceEventSeqs"), data=_with(_data(event), stream=stream))


def _split_goal_change(event: Event) -> tuple[Event, Event] | None:
    if event.get("type") != "user/message":
        return None
    data = _data(event)
    source = data.get("source")
    if not _is_record(source) or source.get("kind") != "goal" or "change" not in source:
        return None
    change = {"type": "goal/change", "seq": event["seq"], "time": event["time"], "data": source["change"]}
    return change, _with(event, data=_with(data, source={"kind": "plugin", "plugin": "goal"}))


def _map_one(value: Any, mapping: Mapping[int, int], label: str) -> int:
    target = mapping.get(value) if isinstance(value, int) else None
    if target is None:
        raise UpgradeError(f"{label} targets consumed assistant/chunk {value}")
    return target


def _map_list(values: Any, mapping: Mapping[int, int], label: str) -> list[int]:
    if not isinstance(values, list):
        raise UpgradeError(f"{label} must be a list of seqs")
    return [_map_one(value, mapping, label) for value in values]


def _remap_v1(source: Event, target: int, mapping: Mapping[int, int]) -> Event:
    """The event at ``target``: its references mapped, ``sourceEventSeqs`` then ``surfaceOp`` moved last."""
    label = f"{source.get('type')} {source.get('seq')}"
    event = _without(source, "sourceEventSeqs", "surfaceOp")
    event["seq"] = target
    event["data"] = _remap_payload(source, mapping, label)
    if "sourceEventSeqs" in source:
        event["sourceEventSeqs"] = _map_list(source["sourceEventSeqs"], mapping, f"{label} sources")
    operation = source.get("surfaceOp")
    if operation is not None and operation != "append":
        if not _is_record(operation):
            raise UpgradeError(f"{label} surfaceOp must be \"append\" or a replace operation")
        operation = {"op": "replace",
                     "start": _map_one(operation.get("start"), mapping, f"{label} surface start"),
                     "end": _map_one(operation.get("end"), mapping, f"{label} surface end")}
    if "surfaceOp" in source:
        event["surfaceOp"] = operation
    return event


def _remap_payload(event: Event, mapping: Mapping[int, int], label: str) -> Any:
    data = event.get("data")
    kind = event.get("type")
    if kind == "command/done" and _is_record(data) and "sourceEventSeq" in data:
        return _with(data, sourceEventSeq=_map_one(data["sourceEventSeq"], mapping, f"{label} sourceEventSeq"))
    if kind in ("compaction/prune", "compaction/summary") and _is_record(data):
        shadowed = data.get("shadowedRange")
        if not _is_record(shadowed):
            raise UpgradeError(f"{label} shadowedRange must be an object")
        return _with(data, shadowedRange={
            "start": _map_one(shadowed.get("start"), mapping, f"{label} shadowedRange start"),
            "end": _map_one(shadowed.get("end"), mapping, f"{label} shadowedRange end"),
        }, shadowedSeqs=_map_list(data.get("shadowedSeqs"), mapping, f"{label} shadowedSeqs"))
    if kind in ("session/title", "session/title-llm-request") and _is_record(data):
        return _with(data, messageSeqs=_map_list(data.get("messageSeqs"), mapping, f"{label} messageSeqs"))
    return data


# --- v2 -> v3: the system prompt becomes a system message -----------------------------------------------------------


class _V2ToV3:
    """Moves the system prompt from ``request/header`` into ``system/message`` events."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.out: list[Event] = []
        self.mapping: list[int] = []
        self.step: dict[str, Any] | None = None
        self.head: int | None = None
        self.prompt = ""
        self.ids: set[str] = set()

    def run(self, events: list[Event]) -> list[Event]:
        for event in events:
            self.transform(event)
        return self.out

    def transform(self, event: Event) -> None:
        kind = event.get("type")
        data = _data(event)
        self.observe_ids(event, data)
        if kind in SURFACE_TYPES and "surfaceOp" not in event:
            raise UpgradeError(f"{kind} requires surfaceOp")
        source = event
        if kind == "request/header":
            header = data.get("header")
            if not _is_record(header):
                raise UpgradeError(f"request/header {event.get('seq')} header must be an object")
            system = header.get("system")
            prompt = system if isinstance(system, str) else ""
            if prompt != self.prompt:
                self.emit_system(prompt, event)
            source = _with(event, data=_with(data, header=_without(header, "system")))
        if kind in SURFACE_TYPES and self.head is None:
            raise UpgradeError("format v2 surface before first step cannot acquire a system head without changing "
                               "chronology")
        target = _remap_v2(source, len(self.out), self.mapping)
        self.mapping.append(len(self.out))
        self.out.append(_canonical_v3(_rename_ptc(target)))
        if kind == "step/start":
            self.step = {"turn": data.get("turn"), "step": data.get("step")}
            if self.head is None:
                self.emit_system("", event)
        elif kind in ("step/end", "turn/end"):
            self.step = None

    def observe_ids(self, event: Event, data: Mapping[str, Any]) -> None:
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
            if _is_record(message) and isinstance(message.get("id"), str):
                if message["id"].startswith("v2-to-v3-system-") and message["id"] in self.ids:
                    raise UpgradeError("source message id collides with a generated system message id")
                self.ids.add(message["id"])

    def emit_system(self, prompt: str, anchor: Event) -> None:
        if self.step is None:
            raise UpgradeError("format v2 changed request prompt outside an open step cannot retain source "
                               "chronology")
        identity = dumps(["session-format-v2-to-v3", self.session_id, anchor["seq"], anchor["type"]])
        message_id = "v2-to-v3-system-" + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
        if message_id in self.ids:
            raise UpgradeError("generated system message id collides with an existing message id")
        self.ids.add(message_id)
        seq = len(self.out)
        event: Event = {
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


def _remap_v2(event: Event, seq: int, mapping: Sequence[int]) -> Event:
    """The event at ``seq`` with its earlier-seq references mapped; every key keeps its place."""

    def one(value: Any) -> int:
        if not isinstance(value, int) or not 0 <= value < min(event["seq"], len(mapping)):
            raise UpgradeError("reference must name an earlier source event")
        return mapping[value]

    def many(value: Any) -> list[int]:
        if not isinstance(value, list):
            raise UpgradeError("sequence references must be an array")
        return [one(item) for item in value]

    data = _data(event)
    kind = event.get("type")
    if kind == "command/done" and "sourceEventSeq" in data:
        data = _with(data, sourceEventSeq=one(data["sourceEventSeq"]))
    elif kind in ("compaction/summary", "compaction/prune"):
        shadowed = data.get("shadowedRange")
        if not _is_record(shadowed):
            raise UpgradeError(f"{kind} shadowedRange must be an object")
        data = _with(data, shadowedRange=_with(shadowed, start=one(shadowed.get("start")),
                                                end=one(shadowed.get("end"))),
                     shadowedSeqs=many(data.get("shadowedSeqs")))
    elif kind in ("session/title", "session/title-llm-request"):
        data = _with(data, messageSeqs=many(data.get("messageSeqs")))
    result = _with(event, seq=seq, data=data)
    if "sourceEventSeqs" in event:
        result["sourceEventSeqs"] = many(event["sourceEventSeqs"])
    operation = event.get("surfaceOp")
    if _is_record(operation):
        result["surfaceOp"] = _with(operation, start=one(operation.get("start")), end=one(operation.get("end")))
    return result


def _rename_message_source(message: Any) -> Any:
    source = message.get("source") if _is_record(message) else None
    if not _is_record(source) or source.get("kind") != "plugin" or source.get("plugin") != "tools-code-mode":
        return message
    return _with(message, source=_with(source, plugin="tools-ptc"))


def _rename_ptc(event: Event) -> Event:
    kind = event.get("type")
    data = event["data"]
    if kind == "agent-preset/selected":
        return _with(event, data=_with(data, agentPreset="ptc")) if data.get("agentPreset") == "code" else event
    if kind == "tool/code-dispatch-start":
        return _with(event, type="tool/ptc-dispatch-start")
    if kind == "tool/code-dispatch":
        return _with(event, type="tool/ptc-dispatch")
    if kind == "user/message":
        renamed = _rename_message_source(data)
        return event if renamed is data else _with(event, data=renamed)
    if kind in ("agent/inbox/spliced", "session/title-llm-request"):
        key = "inserted" if kind == "agent/inbox/spliced" else "messages"
        messages = data.get(key)
        if not isinstance(messages, list):
            return event
        renamed_all = [_rename_message_source(message) for message in messages]
        if all(new is old for new, old in zip(renamed_all, messages, strict=True)):
            return event
        return _with(event, data=_with(data, **{key: renamed_all}))
    return event


def _canonical_v3(event: Event) -> Event:
    """Replace operations spell ``startSeq``/``endSeq``; a request header drops empty ``tools``/``adapterDefaults``."""
    target = event
    operation = event.get("surfaceOp")
    if operation is not None and operation != "append":
        if not _is_record(operation) or set(operation) != {"op", "start", "end"} or operation["op"] != "replace":
            raise UpgradeError(f"format v2 {event.get('type')} at seq {event.get('seq')} requires exact replace "
                               "fields op/start/end")
        target = _with(event, surfaceOp={"op": "replace", "startSeq": operation["start"],
                                         "endSeq": operation["end"]})
    if event.get("type") == "request/header":
        data = _data(event)
        header = data["header"]
        empty = [key for key, value in header.items()
                 if (key == "tools" and value == []) or (key == "adapterDefaults" and value == {})]
        if empty:
            target = _with(target, data=_with(data, header=_without(header, *empty)))
    return target


# --- v3 -> v4: first-class tool results and producer-owned sources --------------------------------------------------


def _v3_to_v4(events: list[Event]) -> list[Event]:
    out: list[Event] = []
    mapping: list[int] = []
    turn: Any = None
    step_open = False
    next_turn_spliced = False
    for event in events:
        data = event.get("data")
        kind = event.get("type")
        if (kind == "turn/start" and turn is not None and not step_open and next_turn_spliced
                and _is_record(data) and data.get("turn") == turn + 1):
            out.append({"type": "turn/end", "seq": len(out), "time": event["time"],
                        "data": {"turn": turn, "reason": {"kind": "interrupted"}}})
        inserted = data.get("inserted") if _is_record(data) else None
        next_turn_spliced = (kind == "agent/inbox/spliced" and data.get("target") == "next-turn"
                             and isinstance(inserted, list) and bool(inserted))
        if kind == "turn/start" and _is_record(data) and isinstance(data.get("turn"), int):
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
            out.append(_with(event, type=f"plugin:{kind}", seq=target, ignorable=True))
            continue
        if kind not in V3_EVENT_TYPES:
            raise UpgradeError(f"format v3 contains unknown event type {dumps(kind)} at seq {event.get('seq')}")
        remapped = event if target == event["seq"] else _remap_v3(event, target, mapping)
        mapping.append(target)
        rewritten = _map_messages(remapped, _producer_source)
        out.append(_v4_content(_lift_tool_result(rewritten)))
    return out


def _remap_v3(event: Event, seq: int, mapping: Sequence[int]) -> Event:
    remapped = _remap_v2(event, seq, mapping) if not _is_record(event.get("surfaceOp")) else None
    if remapped is not None:
        return remapped
    operation = event["surfaceOp"]
    without = _with(event, surfaceOp="append")
    result = _remap_v2(without, seq, mapping)
    start, end = operation.get("startSeq"), operation.get("endSeq")
    if not all(isinstance(value, int) and 0 <= value < min(event["seq"], len(mapping)) for value in (start, end)):
        raise UpgradeError("V3 reference must name an earlier source event")
    result["surfaceOp"] = _with(operation, startSeq=mapping[start], endSeq=mapping[end])
    return result


def _map_messages(event: Event, transform: Any) -> Event:
    """``transform`` applied to every message a first-party event carries (same dict back when unchanged)."""
    data = event.get("data")
    if not _is_record(data):
        return event
    kind = event.get("type")
    if kind == "user/message":
        message = transform(data)
        return event if message is data else _with(event, data=message)
    if kind in ("developer/message", "system/message", "assistant/message", "tool/result"):
        if not _is_record(data.get("message")):
            raise UpgradeError(f"{kind} requires a message")
        message = transform(data["message"])
        return event if message is data["message"] else _with(event, data=_with(data, message=message))
    key = "inserted" if kind == "agent/inbox/spliced" else "messages" if kind == "session/title-llm-request" else None
    if key is None:
        return event
    messages = data.get(key)
    if not isinstance(messages, list) or not all(_is_record(message) for message in messages):
        raise UpgradeError(f"{kind} requires message objects")
    mapped = [transform(message) for message in messages]
    if all(new is old for new, old in zip(mapped, messages, strict=True)):
        return event
    return _with(event, data=_with(data, **{key: mapped}))


def _producer_source(message: dict[str, Any]) -> dict[str, Any]:
    source = message.get("source")
    if not _is_record(source):
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
    return _with(message, source=converted)


_MESSAGE_FIELDS: Final = ("id", "role", "source", "content")
_WRAPPER_FIELDS: Final = ("type", "toolCallId", "content", "isError")


def _lift_tool_result(event: Event) -> Event:
    """A v3 ``tool/result`` (a user message wrapping one ``tool-result`` block) as v4's ``role: "tool"`` message."""
    data = event.get("data")
    if event.get("type") != "tool/result" or not _is_record(data):
        return event
    message = data.get("message")
    if not _is_record(message) or message.get("role") != "user":
        return event
    source = message.get("source")
    call_id = source.get("callId") if _is_record(source) else None
    content = message.get("content")
    wrapper = content[0] if isinstance(content, list) and len(content) == 1 and _is_record(content[0]) else None
    message_id = message.get("id")
    if (not isinstance(message_id, str) or not message_id or not _is_record(source) or source.get("kind") != "tool"
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
    if any(_is_record(block) and block.get("type") == "tool-result" for block in result):
        raise UpgradeError(f"format v3 tool/result at seq {event.get('seq')} contains a nested tool-result "
                           "unsupported by this converter")
    lifted: dict[str, Any] = {"role": "tool", "source": source, "toolCallId": call_id, "content": result}
    if "isError" in wrapper:
        lifted["isError"] = is_error
    lifted["id"] = message_id
    lifted.update((f"plugin:message:{key}", value) for key, value in message.items() if key not in _MESSAGE_FIELDS)
    lifted.update((f"plugin:result:{key}", value) for key, value in wrapper.items() if key not in _WRAPPER_FIELDS)
    return _with(event, data=_with(data, message=lifted))


def _block_v4(block: Any) -> Any:
    if not _is_record(block) or not isinstance(block.get("type"), str):
        raise UpgradeError("content blocks need string type tags")
    return block if block["type"] in CONTENT_TYPES else _with(block, type=f"plugin:{block['type']}")


def _content_v4(content: Any) -> Any:
    if not isinstance(content, list):
        raise UpgradeError("message content must be an array")
    mapped = [_block_v4(block) for block in content]
    return content if all(new is old for new, old in zip(mapped, content, strict=True)) else mapped


def _message_v4(message: dict[str, Any]) -> dict[str, Any]:
    content = _content_v4(message.get("content"))
    return message if content is message.get("content") else _with(message, content=content)


def _chunk_v4(chunk: Any) -> Any:
    if not _is_record(chunk):
        return chunk
    if chunk.get("type") == "block-end":
        block = _block_v4(chunk.get("block"))
        return chunk if block is chunk.get("block") else _with(chunk, block=block)
    if chunk.get("type") != "block-start":
        return chunk
    original = chunk.get("blockType")
    if not isinstance(original, str):
        raise UpgradeError("block-start blockType must be a string")
    return chunk if original in CONTENT_TYPES else _with(chunk, blockType=f"plugin:{original}")


def _v4_content(event: Event) -> Event:
    """Namespaces content tags v3 does not define, in messages, summaries and stream chunks."""
    mapped = _map_messages(event, _message_v4)
    data = mapped.get("data")
    if not _is_record(data):
        return mapped
    original = data
    kind = event.get("type")
    if kind == "compaction/summary":
        data = _with(data, summary=_content_v4(data.get("summary")))
        if "rawOutput" in data:
            data["rawOutput"] = _content_v4(data["rawOutput"])
    elif kind == "tool/ptc-dispatch":
        data = _with(data, content=_content_v4(data.get("content")))
    elif kind == "team/message/queued" and _is_record(data.get("message")):
        data = _with(data, message=_message_v4(data["message"]))
    if kind == "request/header" and _is_record(data.get("header")):
        tools = data["header"].get("tools")
        for index, tool in enumerate(tools if isinstance(tools, list) else []):
            if _is_record(tool) and "deferLoading" in tool:
                raise UpgradeError(f"format v3 request/header at seq {event.get('seq')}.header.tools[{index}] contains "
                                   "deferLoading, which is only defined in V4")
    if kind in ("assistant/message", "assistant/attempt") and isinstance(data.get("stream"), list):
        stream = data["stream"]
        converted = [_with(entry, chunk=_chunk_v4(entry.get("chunk")))
                     if _is_record(entry) and entry.get("type") == "chunk" else entry for entry in stream]
        data = _with(data, stream=converted)
    return mapped if data == original else _with(mapped, data=data)
