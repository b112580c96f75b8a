"""What every log a framework leaves must hold, however its threads, event loops and cancellations interleave.

* every event of a call (``assistant/message``, ``tool/call``, ``todo/write``, ``tool/result``) and every step
  sits inside an open turn, of that turn's number: nothing lands after its turn's ``turn/end``;
* every ``tool/call`` is advertised by an ``assistant/message`` earlier in its step, one ``tool-call`` block with
  the same id, name and argument text (DSH 0.2 opens no log with an unadvertised call), and every block so
  advertised is called once, in that step;
* every ``tool/call`` is answered by exactly one ``tool/result`` (``sourceEventSeqs``), in the same turn and step,
  and a ``todo/write`` only lands while exactly its call is unanswered (calls never interleave);
* what each caller was told equals the log's answer to that call; a call the log never holds was told
  ``Error: tool call aborted`` (a call of a turn that ended before it could run);
* the standing plan a person is shown (``dsh-todo plan``) is the last list the log holds with no later ``turn/start``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsh_todo.harness.tool_results import answers

ABORTED = "Error: tool call aborted"


def answer_text(result: Mapping[str, Any]) -> str:
    [answer] = answers(result["data"]["message"])
    return "".join(part["text"] for part in answer.content)


def assert_calls_inside_their_turns(events: Sequence[Mapping[str, Any]], told: Mapping[str, str]) -> None:
    """The invariant above, over a log's events and what each call's caller was told (by call id)."""
    turn: int | None = None
    step: int | None = None
    unanswered: dict[int, str] = {}  # tool/call seq -> call id
    advertised: dict[str, tuple[Any, Any]] = {}  # call id -> (name, arguments) advertised in the open step, uncalled
    answered: dict[str, str] = {}
    logged: set[str] = set()
    for event in events:
        kind, data, seq = event["type"], event["data"], event["seq"]
        where = f"event {seq} ({kind})"
        if kind == "turn/start":
            assert turn is None, f"{where}: turn {turn} is still open"
            turn, step = data["turn"], None
            continue
        assert turn is not None, f"{where} lands outside any turn"
        if kind == "turn/end":
            assert data["turn"] == turn, where
            assert not unanswered, f"{where}: calls {sorted(unanswered.values())} are unanswered at the turn's end"
            turn = step = None
        elif kind == "step/start":
            assert step is None and data["turn"] == turn, where
            step = data["step"]
        elif kind == "step/end":
            assert (data["turn"], data["step"]) == (turn, step), where
            assert not unanswered, f"{where}: calls {sorted(unanswered.values())} are unanswered at the step's end"
            assert not advertised, f"{where}: calls {sorted(advertised)} are advertised but never called"
            step = None
        elif kind == "assistant/message":
            assert (data["turn"], data["step"]) == (turn, step), f"{where}: outside its step"
            for block in data["message"]["content"]:
                if block["type"] == "tool-call":
                    assert block["id"] not in advertised and block["id"] not in logged, (
                        f"{where}: call {block['id']} advertised twice")
                    advertised[block["id"]] = (block["name"], block["arguments"])
        elif kind == "tool/call":
            assert (data["turn"], data["step"]) == (turn, step), f"{where}: outside its step"
            assert not unanswered, f"{where}: calls interleave"
            assert data["callId"] not in logged, f"{where}: call {data['callId']} logged twice"
            assert data["callId"] in advertised, f"{where}: call {data['callId']} is not advertised in its step"
            assert advertised.pop(data["callId"]) == (data["name"], data["arguments"]), (
                f"{where}: call {data['callId']} is not the call its step advertised")
            unanswered[seq] = data["callId"]
            logged.add(data["callId"])
        elif kind == "todo/write":
            assert len(unanswered) == 1, f"{where}: lands while {len(unanswered)} calls are unanswered"
        elif kind == "tool/result":
            assert (data["turn"], data["step"]) == (turn, step), f"{where}: outside its call's step"
            [source] = event["sourceEventSeqs"]
            assert source in unanswered, f"{where}: answers no unanswered call"
            answered[unanswered.pop(source)] = answer_text(event)
    assert turn is None, "the log ends with a turn open"
    assert not advertised
    assert set(answered) == logged
    for call_id, text in told.items():
        logged_text = answered.get(call_id)
        assert text == answered.get(call_id, ABORTED), f"call {call_id}: told {text!r}, the log says {logged_text!r}"
    assert logged <= set(told), f"calls {sorted(logged - set(told))} were logged but their callers never told"


def last_plan(events: Sequence[Mapping[str, Any]]) -> Any:
    """The ``todos`` of the last ``todo/write`` with no later ``turn/start`` (SPEC §5.4), or ``None``."""
    plan = None
    for event in events:
        if event["type"] == "turn/start":
            plan = None
        elif event["type"] == "todo/write":
            plan = event["data"]["todos"]
    return plan
