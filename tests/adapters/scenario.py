"""One conversation every adapter test plays through its framework's own agent loop, and what it must leave behind.

The model answers in three steps: an accepted list, then two calls in one response (a duplicate and text that is
not JSON), then a value the schema refuses; then it stops. The argument strings are compact JSON, so a framework
that parses them first (LangChain) logs the same text as one that passes them raw.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dsh_todo.adapters.common import TodoBinding, standing_plan
from dsh_todo.jsonutil import dumps
from tests.advertised import assert_advertised
from tests.conftest import todo_writes

RAW: dict[str, str] = {
    "c1": '{"todos":[{"content":" Read the issue ","status":"completed"},'
          '{"content":"Write the fix","status":"in_progress"},{"content":"Test it","status":"pending"}]}',
    "c2": '{"todos":[{"content":"a","status":"pending"},{"content":" a ","status":"pending"}]}',
    "c3": '{"todos": [',
    "c4": '{"todos":[{"content":"x","status":"doing"}]}',
}
STEPS: list[list[str]] = [["c1"], ["c2", "c3"], ["c4"]]
"""The call ids of each model response, in order; a final response with text only follows."""

FINAL_TEXT = "Plan written."

TEXT: dict[str, str] = {
    "c1": "Updated todo list: 1 pending, 1 in progress, 1 completed.",
    "c2": 'Error: invalid todos: duplicate content "a"',
    "c3": 'Error: invalid arguments: "arguments" must be an object',
    "c4": 'Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]',
}
"""Exactly what the model must read back for each call (SPEC §2, §4.1)."""

ARGS_ERROR = {"name": "ToolArgsError", "code": "INVALID_ARGS"}

CANONICAL: list[dict[str, str]] = [
    {"content": "Read the issue", "status": "completed"},
    {"content": "Write the fix", "status": "in_progress"},
    {"content": "Test it", "status": "pending"},
]


def assert_native_tool(binding: TodoBinding, name: str, description: str, parameters: Any) -> None:
    """The framework offered the model our exact tool: same name, description and schema (same key order)."""
    native = binding.definition()
    assert name == "todo_write"
    assert description == native.description
    assert parameters == native.parameters
    assert dumps(parameters) == dumps(native.parameters)
    assert {"name": name, "description": description, "parameters": parameters} in binding.ctx.tools.schemas()


def assert_log(binding: TodoBinding, *, turns: int = 1, arguments: dict[str, str] | None = None,
               texts: dict[str, str] | None = None, answered_by_the_framework: tuple[str, ...] = ()) -> None:
    """The session log holds the scenario as DSH's own loop would have written it (``arguments`` and ``texts``:
    what a framework that cannot carry a call as the scenario words it logs and answers instead), less the calls
    the framework answered itself, which never reached the tool (Claude Code's answer to arguments that are not
    JSON)."""
    session = binding.session
    events = list(session.events)
    types = [event["type"] for event in events]
    assert types.count("turn/start") == turns == types.count("turn/end")
    assert types[0] == "turn/start" and types[-1] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "completed"}
    # Exactly one todo/write, the canonical (trimmed) list; the rejected calls append nothing.
    assert todo_writes(session) == [CANONICAL]
    calls = {e["data"]["callId"]: e for e in events if e["type"] == "tool/call"}
    assert types.count("assistant/message") == len(calls)  # one advertising message per call, nothing else
    assert list(calls) == [cid for cid in ("c1", "c2", "c3", "c4") if cid not in answered_by_the_framework]
    expected_args = arguments if arguments is not None else RAW
    expected_texts = texts if texts is not None else TEXT
    for call_id, event in calls.items():
        assert event["data"]["name"] == "todo_write"
        assert event["data"]["arguments"] == expected_args[call_id]
        seq = event["seq"]
        # Each call sits alone in its own step: step/start, assistant/message, tool/call, [todo/write], tool/result,
        # step/end; the assistant/message advertises the call (DSH 0.2 resumes no log whose call is unadvertised).
        assert types[seq - 2: seq] == ["step/start", "assistant/message"]
        assert_advertised(events[seq - 1], event)
        body = ["todo/write", "tool/result"] if call_id == "c1" else ["tool/result"]
        assert types[seq + 1: seq + 1 + len(body)] == body
        assert types[seq + 1 + len(body)] == "step/end"
        result = events[seq + len(body)]
        assert result["sourceEventSeqs"] == [seq]
        block = result["data"]["message"]
        assert block["toolCallId"] == call_id
        assert block["content"] == [{"type": "text", "text": expected_texts[call_id]}]
        assert block["isError"] is (call_id != "c1")
        # Schema failures carry the registry's structured info; the tool's own failures do not (SPEC §4.3).
        assert result["data"].get("error") == (ARGS_ERROR if call_id in ("c3", "c4") else None)
    # The rejected calls came later in the same turn, so the accepted list still stands.
    assert standing_plan(session) == CANONICAL
    assert binding.plan == CANONICAL


def hang_on_an_empty_list(todos: TodoBinding) -> asyncio.Event:
    """Make a call whose list is empty hang inside the tool (so a test can cancel a run while a call runs); the
    event is set once one is hanging."""
    started = asyncio.Event()
    registry = todos.ctx.tools
    execute = registry.execute

    async def hanging(name: str, arguments: Any, *args: Any, **kwargs: Any) -> Any:
        if arguments == {"todos": []}:
            started.set()
            await asyncio.sleep(3600)
        return await execute(name, arguments, *args, **kwargs)

    registry.execute = hanging  # type: ignore[method-assign]
    return started
