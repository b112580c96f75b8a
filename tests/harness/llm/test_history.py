"""The history derived from the log (``derive_history``), one for both wires, and its two renderings.

A ``tool/result`` message comes in two shapes: DSH 0.1.1's (``role: "user"`` holding ``tool-result`` blocks) and
format v4's (``role: "tool"``, the result itself). Both must reach the model the same way, with their ``isError``.
"""

from __future__ import annotations

from typing import Any

from dsh_todo.harness.agent_loop import derive_history, derive_messages
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.llm.history import AssistantTurn, ToolOutcome, UserText
from dsh_todo.harness.llm.messages import messages_of

ACCEPTED = '{"todos": [{"content": "read", "status": "in_progress"}]}'
REFUSED = '{"todos": [{"content": "read", "status": "done"}]}'
ERROR = 'Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]'
UPDATED = "Updated todo list: 0 pending, 1 in progress, 0 completed."


def event(seq: int, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": 0, "data": data, "surfaceOp": "append"}


def user(seq: int, text: str) -> dict[str, Any]:
    return event(seq, "user/message", {"content": [{"type": "text", "text": text}], "source": {"kind": "user"},
                                       "role": "user", "id": f"u{seq}"})


def assistant(seq: int, text: str, *calls: tuple[str, str]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool-call", "id": call_id, "name": "todo_write", "arguments": raw} for call_id, raw in calls]
    return event(seq, "assistant/message", {"turn": 1, "step": 1, "message": {
        "role": "assistant", "content": blocks, "source": {"kind": "model", "provider": "p", "model": "m"},
        "id": f"a{seq}"}})


def result_v0(seq: int, call_id: str, text: str, is_error: bool) -> dict[str, Any]:
    """DSH 0.1.1's shape (SPEC §5)."""
    return event(seq, "tool/result", {"turn": 1, "step": 1, "message": {
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}],
                     "isError": is_error}], "role": "user", "id": f"r{seq}"}})


def result_v4(seq: int, call_id: str, text: str, is_error: bool) -> dict[str, Any]:
    """Format v4's shape (DSH 0.2.1)."""
    return event(seq, "tool/result", {"turn": 1, "step": 1, "message": {
        "role": "tool", "source": {"kind": "tool", "callId": call_id}, "toolCallId": call_id,
        "content": [{"type": "text", "text": text}], "isError": is_error, "id": f"r{seq}"}})


EXPECTED = [
    UserText("plan it"),
    AssistantTurn("", (ToolCallRequest("c1", "todo_write", ACCEPTED),)),
    ToolOutcome("c1", UPDATED, False),
    AssistantTurn("again", (ToolCallRequest("c2", "todo_write", REFUSED),)),
    ToolOutcome("c2", ERROR, True),
    AssistantTurn("done"),
]


def log(result: Any) -> list[dict[str, Any]]:
    return [user(1, "plan it"), assistant(2, "", ("c1", ACCEPTED)), result(3, "c1", UPDATED, False),
            assistant(4, "again", ("c2", REFUSED)), result(5, "c2", ERROR, True), assistant(6, "done")]


def test_a_tool_result_of_dsh_0_1_is_read_with_its_error_flag() -> None:
    assert derive_history(log(result_v0)) == EXPECTED


def test_a_tool_result_of_format_v4_is_read_with_its_error_flag() -> None:
    assert derive_history(log(result_v4)) == EXPECTED


def test_a_v4_result_of_a_call_no_model_made_is_left_out() -> None:
    """An MCP-written log holds calls from outside any model: their results must not reach one (either shape)."""
    assert derive_history([result_v4(1, "mcp-1", "ok", False), user(2, "hi")]) == [UserText("hi")]
    assert derive_history([result_v0(1, "mcp-1", "ok", False), user(2, "hi")]) == [UserText("hi")]


def test_the_chat_rendering_is_the_one_of_before_and_carries_no_error_flag() -> None:
    assert derive_messages(log(result_v4)) == [
        {"role": "user", "content": "plan it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "todo_write", "arguments": ACCEPTED}}]},
        {"role": "tool", "tool_call_id": "c1", "content": UPDATED},
        {"role": "assistant", "content": "again", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "todo_write", "arguments": REFUSED}}]},
        {"role": "tool", "tool_call_id": "c2", "content": ERROR},
        {"role": "assistant", "content": "done"},
    ]


def test_the_messages_rendering_carries_is_error_and_parsed_input() -> None:
    assert messages_of(EXPECTED) == [
        {"role": "user", "content": [{"type": "text", "text": "plan it"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "todo_write",
                                           "input": {"todos": [{"content": "read", "status": "in_progress"}]}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": [{"type": "text", "text": UPDATED}], "is_error": False}]},
        {"role": "assistant", "content": [{"type": "text", "text": "again"},
                                          {"type": "tool_use", "id": "c2", "name": "todo_write",
                                           "input": {"todos": [{"content": "read", "status": "done"}]}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2",
                                      "content": [{"type": "text", "text": ERROR}], "is_error": True}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]


def test_arguments_that_are_not_a_json_object_go_as_an_empty_input() -> None:
    """The Messages wire carries an object only; the log keeps the raw string (the tool refused it already)."""
    raws = ['{"todos": [', "[1, 2]", '"text"', "null", ""]
    calls = tuple(ToolCallRequest(f"c{i}", "todo_write", raw) for i, raw in enumerate(raws))
    [message] = messages_of([AssistantTurn("", calls)])
    assert [block["input"] for block in message["content"]] == [{}, {}, {}, {}, {}]


def test_results_open_the_user_message_they_share_with_the_next_prompt_and_empty_texts_are_left_out() -> None:
    """A turn cut after its tool results, then a new prompt: one user message, results first; an empty assistant
    message (a reply with neither text nor calls) and an empty result text are not sent as empty blocks."""
    history = [UserText("one"), AssistantTurn("", (ToolCallRequest("c1", "todo_write", ACCEPTED),)),
               ToolOutcome("c1", "", True), UserText("two"), AssistantTurn(""), UserText("three")]
    assert messages_of(history) == [
        {"role": "user", "content": [{"type": "text", "text": "one"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "todo_write",
                                           "input": {"todos": [{"content": "read", "status": "in_progress"}]}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [], "is_error": True},
                                     {"type": "text", "text": "two"}, {"type": "text", "text": "three"}]},
    ]
