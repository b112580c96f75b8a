"""Packed chunk rows: how a log stores a run of token-sized ``assistant/chunk`` deltas on one line.

Models stream deltas of a few characters, so an unpacked log spends most of its bytes on envelopes. DSH writes every
run of three or more consecutive same-block deltas as one storage row (``text-chunks``, ``reasoning-chunks`` or
``tool-call-chunks``, bare slash-less tags: rows are never session events) and expands it back into the exact events
on read. The encoder packs only shapes it fully recognises, so an unknown field costs compression, never data; the
decoder validates a row before expanding it and raises :class:`MalformedRowError` on anything off, because silently
dropping a run would lose events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, pairwise
from typing import Any, Final

from dsh_todo.harness.errors import MalformedRowError as MalformedRowError
from dsh_todo.harness.persistence.header import MAX_SAFE_INTEGER

ROW_TYPES: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
MIN_RUN: Final = 3
"""Shorter runs stay verbatim: a row's envelope would rival the lines it replaces. Both layouts read the same."""

_ROW_FOR_DELTA: Final = {
    "text-delta": "text-chunks",
    "reasoning-delta": "reasoning-chunks",
    "tool-call-delta": "tool-call-chunks",
}
_DELTA_FOR_ROW: Final = {row: delta for delta, row in _ROW_FOR_DELTA.items()}

_EVENT_KEYS: Final = frozenset({"type", "seq", "time", "data"})
_DATA_KEYS: Final = frozenset({"turn", "step", "chunk"})
_TEXT_CHUNK_KEYS: Final = frozenset({"type", "index", "text"})
_CALL_CHUNK_KEYS: Final = frozenset({"type", "index", "id", "argumentsDelta"})
_NAMED_CALL_CHUNK_KEYS: Final = _CALL_CHUNK_KEYS | {"name"}
_ROW_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_ROW_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_CALL_ROW_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "id", "args"})
_NAMED_CALL_ROW_DATA_KEYS: Final = _CALL_ROW_DATA_KEYS | {"name"}
_STR_ONLY: Final = frozenset({str})
_NUMBER_TYPES: Final = frozenset({int, float})
_INT_ONLY: Final = frozenset({int})


def _safe_int(value: object) -> bool:
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def _number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _is_mapping(value: object) -> bool:
    return isinstance(value, dict) or isinstance(value, Mapping)  # noqa: SIM101 (the dict check alone is C-fast)


def _run_key(event: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What an event the encoder may pack shares with its run (``(delta kind, turn, step, index)``, plus ``(id, has
    name, name)`` for tool-call deltas), or ``None``: store it verbatim. It runs on every event written, so the
    checks are inlined, the common refusal comes first, and continuing a run is one tuple comparison."""
    if event.get("type") != "assistant/chunk" or event.keys() != _EVENT_KEYS:
        return None
    seq, time = event["seq"], event["time"]
    if (type(seq) is not int or not 0 <= seq <= MAX_SAFE_INTEGER
            or type(time) is not int or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER):
        return None
    data = event["data"]
    if not _is_mapping(data) or data.keys() != _DATA_KEYS:
        return None
    turn, step, chunk = data["turn"], data["step"], data["chunk"]
    if type(turn) not in _NUMBER_TYPES or type(step) not in _NUMBER_TYPES or not _is_mapping(chunk):
        return None
    index = chunk.get("index")
    if type(index) not in _NUMBER_TYPES:
        return None
    kind = chunk.get("type")
    if kind == "text-delta" or kind == "reasoning-delta":
        if chunk.keys() == _TEXT_CHUNK_KEYS and isinstance(chunk["text"], str):
            return (kind, turn, step, index)
        return None
    if kind == "tool-call-delta":
        keys = chunk.keys()
        named = keys == _NAMED_CALL_CHUNK_KEYS
        if not named and keys != _CALL_CHUNK_KEYS:
            return None
        name = chunk["name"] if named else None
        if (named and not isinstance(name, str)) or not isinstance(chunk["id"], str) or not isinstance(
                chunk["argumentsDelta"], str):
            return None
        return (kind, turn, step, index, chunk["id"], named, name)
    return None


def _build_row(kind: str, run: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    first = run[0]
    data = first["data"]
    chunk = data["chunk"]
    times = [event["time"] for event in run]
    row_data: dict[str, Any] = {
        "turn": data["turn"],
        "step": data["step"],
        "index": chunk["index"],
        "dt": [later - earlier for earlier, later in pairwise(times)],
    }
    if kind == "tool-call-delta":
        row_data["id"] = chunk["id"]
        if "name" in chunk:
            row_data["name"] = chunk["name"]
        row_data["args"] = [event["data"]["chunk"]["argumentsDelta"] for event in run]
    else:
        row_data["texts"] = [event["data"]["chunk"]["text"] for event in run]
    return {"type": _ROW_FOR_DELTA[kind], "seq0": first["seq"], "time0": first["time"], "data": row_data}


def pack_chunk_runs(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The storage records for one write batch: each packable run of ``MIN_RUN`` or more becomes a row. Per batch,
    as DSH's writer (reproducing a DSH log byte for byte needs its batch boundaries). An event continues a run with
    the run's key (:func:`_run_key`), the next seq, and a time a safe integer away from the previous one."""
    out: list[Mapping[str, Any]] = []
    run: list[Mapping[str, Any]] = []
    run_key: tuple[Any, ...] | None = None
    last_seq = last_time = 0
    for event in events:
        key = _run_key(event) if event.get("type") == "assistant/chunk" else None  # (most events: no call)
        if key is not None:
            seq, time = event["seq"], event["time"]
            if key == run_key and seq == last_seq + 1 and -MAX_SAFE_INTEGER <= time - last_time <= MAX_SAFE_INTEGER:
                run.append(event)
                last_seq, last_time = seq, time
                continue
        if run:
            if len(run) >= MIN_RUN:
                out.append(_build_row(run_key[0], run))  # type: ignore[index]
            else:
                out.extend(run)
        if key is None:
            out.append(event)
            run, run_key = [], None
        else:
            run, run_key = [event], key
            last_seq, last_time = seq, time
    if run:
        if len(run) >= MIN_RUN:
            out.append(_build_row(run_key[0], run))  # type: ignore[index]
        else:
            out.extend(run)
    return out


def _malformed(tag: str, why: str) -> MalformedRowError:
    return MalformedRowError(f"malformed {tag} storage row: {why}")


def _members(row: Mapping[str, Any], tag: str) -> list[str]:
    """Validate a row (with DSH's checks) and return its member payloads; set-of-types checks keep it in C."""
    if row.keys() != _ROW_KEYS:
        raise _malformed(tag, "envelope must be exactly {type, seq0, time0, data}")
    seq0, time0, data = row["seq0"], row["time0"], row["data"]
    if not _safe_int(seq0) or seq0 < 0:
        raise _malformed(tag, "seq0 must be a non-negative safe integer")
    if not _safe_int(time0):
        raise _malformed(tag, "time0 must be a safe integer")
    if not isinstance(data, Mapping):
        raise _malformed(tag, "data must be an object")
    if tag == "tool-call-chunks":
        named = data.keys() == _NAMED_CALL_ROW_DATA_KEYS
        if not named and data.keys() != _CALL_ROW_DATA_KEYS:
            raise _malformed(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
        if not isinstance(data["id"], str) or (named and not isinstance(data["name"], str)):
            raise _malformed(tag, "id (and name when present) must be strings")
        key = "args"
    else:
        if data.keys() != _TEXT_ROW_DATA_KEYS:
            raise _malformed(tag, "data must be exactly {turn, step, index, dt, texts}")
        key = "texts"
    if not _number(data["turn"]) or not _number(data["step"]) or not _number(data["index"]):
        raise _malformed(tag, "turn/step/index must be numbers")
    members = data[key]
    if type(members) is not list or not members or not _STR_ONLY.issuperset(map(type, members)):
        raise _malformed(tag, f"{key} must be a non-empty string array")
    dt = data["dt"]
    if type(dt) is not list or not _INT_ONLY.issuperset(map(type, dt)) or (
            dt and (min(dt) < -MAX_SAFE_INTEGER or max(dt) > MAX_SAFE_INTEGER)):
        raise _malformed(tag, "dt must be an array of safe integers")
    if len(dt) != len(members) - 1:
        raise _malformed(tag, f"dt length {len(dt)} does not match {len(members)} members")
    if seq0 + len(members) - 1 > MAX_SAFE_INTEGER:
        raise _malformed(tag, "member seqs must stay safe integers")
    return members


def member_times(row: Mapping[str, Any]) -> list[int]:
    """``time0`` followed by the running sums of ``dt``: each member's time."""
    times = list(accumulate(row["data"]["dt"], initial=row["time0"]))
    if len(times) > 1 and (min(times) < -MAX_SAFE_INTEGER or max(times) > MAX_SAFE_INTEGER):
        raise _malformed(row["type"], "member times must stay safe integers")
    return times


def row_span(row: Mapping[str, Any]) -> tuple[int, int]:
    """How many events a chunk row stands for and the last one's time, with every check :func:`expand_row` makes
    (a reader that keeps no events learns what it needs without building them)."""
    members = _members(row, row["type"])
    return len(members), member_times(row)[-1]


def row_stub(last_seq: int, last_time: int) -> dict[str, Any]:
    """What a reader that keeps no events has of a chunk row: its last member's seq and time, all the interrupted-turn
    closers need from a chunk."""
    return {"type": "assistant/chunk", "seq": last_seq, "time": last_time}


def expand_row(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The exact events a chunk row stands for: member k has ``seq0 + k`` and ``time0 + dt[0] + … + dt[k-1]``."""
    tag = row["type"]
    members = _members(row, tag)
    times = member_times(row)
    data = row["data"]
    turn, step, index = data["turn"], data["step"], data["index"]
    seq0 = row["seq0"]
    seqs = range(seq0, seq0 + len(members))
    if tag == "tool-call-chunks":
        call_id = data["id"]
        if "name" in data:
            name = data["name"]
            return [
                {"type": "assistant/chunk", "seq": seq, "time": time, "data": {"turn": turn, "step": step, "chunk": {
                    "type": "tool-call-delta", "index": index, "id": call_id, "name": name, "argumentsDelta": part}}}
                for seq, time, part in zip(seqs, times, members, strict=True)]
        return [
            {"type": "assistant/chunk", "seq": seq, "time": time, "data": {"turn": turn, "step": step, "chunk": {
                "type": "tool-call-delta", "index": index, "id": call_id, "argumentsDelta": part}}}
            for seq, time, part in zip(seqs, times, members, strict=True)]
    delta = _DELTA_FOR_ROW[tag]
    return [
        {"type": "assistant/chunk", "seq": seq, "time": time, "data": {"turn": turn, "step": step, "chunk": {
            "type": delta, "index": index, "text": text}}}
        for seq, time, text in zip(seqs, times, members, strict=True)]
