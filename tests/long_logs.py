"""Long session logs, for the tests that a reader's memory follows its page, not the log.

Each turn is what an agent writes for one ``todo_write`` call: a user message, a step with streamed chunks, the
assistant's message, the call, the plan, the result and the turn's end. The first turn is written through the
runtime; the others are its lines with their seqs, turn numbers and sources moved on (writing a million events
through the runtime would take minutes), so the log is one the writer could have written: in format v4 by default
(one line per event, a tool-role result), or in v0 when asked (the chunks packed into a chunk row, the result a user
message wrapping a ``tool-result`` block).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_todo.standard import open_runtime

SESSION_ID = "long-log"
EVENTS_PER_TURN = 15


def long_log(root: Path, turns: int, *, version: int = 4) -> Path:
    """Write a raw session log of ``turns`` turns under ``root`` in format ``version`` (4 or 0); returns its path."""
    log = _one_turn(root, version)
    _header, *lines = log.read_bytes().splitlines()
    template = [json.loads(line) for line in lines]
    assert sum(len(row["data"]["texts"]) if "seq0" in row else 1 for row in template) == EVENTS_PER_TURN
    with log.open("a", encoding="utf-8") as out:
        for turn in range(2, turns + 1):
            shift = (turn - 1) * EVENTS_PER_TURN
            out.writelines(json.dumps(_moved(row, turn, shift), separators=(",", ":")) + "\n" for row in template)
    return log


def _moved(row: dict[str, Any], turn: int, shift: int) -> dict[str, Any]:
    moved = {**row, "data": {**row["data"]}}
    for key in ("seq", "seq0"):
        if key in moved:
            moved[key] += shift
    if "turn" in moved["data"]:
        moved["data"]["turn"] = turn
    if "sourceEventSeqs" in moved:
        moved["sourceEventSeqs"] = [seq + shift for seq in moved["sourceEventSeqs"]]
    return moved


def _result(call_id: str, turn: int, version: int) -> dict[str, Any]:
    """The ``tool/result`` message of a call, shaped as format ``version`` shapes it."""
    text = [{"type": "text", "text": "Updated todo list"}]
    if version == 0:
        return {"source": {"kind": "tool", "callId": call_id}, "role": "user", "id": f"r-{turn}",
                "content": [{"type": "tool-result", "toolCallId": call_id, "content": text, "isError": False}]}
    return {"role": "tool", "source": {"kind": "tool", "callId": call_id}, "toolCallId": call_id, "content": text,
            "isError": False, "id": f"r-{turn}"}


def _one_turn(root: Path, version: int) -> Path:
    ctx = open_runtime(root, compression="none")
    try:
        session = ctx.sessions.create(SESSION_ID, cwd="/long", **({"version": 0} if version == 0 else {}))
        append = session.append
        for turn in (1,):
            call_id = f"call-{turn}"
            todos = [{"content": f"task {turn}.{k}: read the parser and keep the buffer", "status": status}
                     for k, status in enumerate(("completed", "in_progress", "pending"))]
            append("turn/start", {"turn": turn})
            append("user/message", {"turn": turn, "message": {"id": f"u-{turn}", "role": "user", "content": [
                {"type": "text", "text": f"turn {turn}: plan the next steps of the refactor, please"}]}},
                   surface_op="append")
            append("step/start", {"turn": turn, "step": 1})
            for k in range(6):
                append("assistant/chunk", {"turn": turn, "step": 1, "chunk": {
                    "type": "text-delta", "index": 0, "text": f"thinking {k} "}})
            append("assistant/message", {"turn": turn, "step": 1, "message": {
                "id": f"a-{turn}", "role": "assistant", "content": [
                    {"type": "text", "text": "Here is the plan."},
                    {"type": "tool-call", "id": call_id, "name": "todo_write", "arguments": {"todos": todos}}]}},
                   surface_op="append")
            call = append("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "todo_write",
                                        "arguments": {"todos": todos}})
            append("todo/write", {"todos": todos})
            append("tool/result", {"turn": turn, "step": 1, "message": _result(call_id, turn, version)},
                   surface_op="append", source_event_seqs=[call["seq"]])
            append("step/end", {"turn": turn, "step": 1})
            append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        ctx.session_persistence.flush()
        where = ctx.session_persistence.locate(SESSION_ID)
        assert where is not None
        return Path(where)
    finally:
        ctx.dispose()
