"""The turn writer itself: what no single front door exercises (two writers on one log, scope reasons)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.session import SessionAppendError, lossless_data
from dsh_todo.harness.turns import Turns, TurnScope, open_turn
from tests.conftest import BootFactory

pytestmark = pytest.mark.anyio

ONE = '{"todos":[{"content":"a","status":"in_progress"}]}'


async def test_two_writers_on_one_log_share_the_open_turn(make_ctx: BootFactory) -> None:
    """A writer remembers where its turn stands only while nobody else moves it: a second writer's steps are seen,
    and only the writer that opened the turn closes it."""
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    first, second = Turns.of(ctx, Agent("a", session)), Turns.of(ctx, Agent("b", session))
    await first.call_alone(ToolCallRequest("c1", "todo_write", ONE))
    await second.call_alone(ToolCallRequest("c2", "todo_write", "{}"))
    await first.call_alone(ToolCallRequest("c3", "todo_write", ONE))
    steps = [(e["data"]["turn"], e["data"]["step"]) for e in session.events if e["type"] == "tool/call"]
    assert steps == [(1, 1), (1, 2), (1, 3)]
    second.close()  # it opened nothing, so it ends nothing (and closes the session)
    assert open_turn(session) == (1, 3, False)


def test_a_scope_closes_with_the_reason_its_block_set(make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    scope = TurnScope(turns, join=False)
    with scope as turn:
        turns.begin_step()  # left open: closing the turn closes it first
        scope.reason = {"kind": "max-tokens"}
    kinds = [(e["type"], e["data"]) for e in turns.session.events]
    assert kinds == [("turn/start", {"turn": turn}), ("step/start", {"turn": 1, "step": 1}),
                     ("step/end", {"turn": 1, "step": 1}), ("turn/end", {"turn": 1, "reason": {"kind": "max-tokens"}})]
    with pytest.raises(RuntimeError, match="no open turn"):
        turns.begin_step()


async def test_a_tool_result_that_is_not_lossless_is_refused_in_the_appends_words(make_ctx: BootFactory) -> None:
    """The ``tool/result`` is built frozen and checks the tool's content itself: a value JSON cannot carry is
    refused with the very words (and the path) the append gives for the same data as a plain dict."""
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    content = [{"type": "text", "text": float("nan")}]
    plain = {"turn": 1, "step": 1, "message": {"source": {}, "content": [{"content": content}]}}
    with pytest.raises(SessionAppendError) as from_append:
        session.append("tool/result", plain, surface_op="append")
    with pytest.raises(SessionAppendError) as from_parts:
        lossless_data("tool/result", content, "data.message.content[0].content")
    assert str(from_parts.value) == str(from_append.value) == (
        'session event "tool/result" data is not lossless JSON: data.message.content[0].content[0].text is nan, '
        "which JSON cannot carry losslessly")
    assert session.seq == 0


async def test_a_call_whose_fields_are_not_strings_is_still_logged_frozen(make_ctx: BootFactory) -> None:
    """The turn writer builds ``tool/call`` and ``tool/result`` frozen as it makes them, trusting the call's fields
    to be the strings their type says; a caller that hands it something else (lists as the id and the arguments)
    gets checked, frozen copies, never its own mutable objects in the log."""
    ctx = make_ctx()
    session = ctx.sessions.create("s")
    call_id: Any = ["an", "id"]
    arguments: Any = ["not", "a", "string"]
    await Turns.of(ctx, Agent("a", session)).call_alone(ToolCallRequest(call_id, "todo_write", arguments),
                                                        arguments={"todos": []})
    call = next(event for event in session.events if event["type"] == "tool/call")["data"]
    message = next(event for event in session.events if event["type"] == "tool/result")["data"]["message"]
    logged = [call["arguments"], call["callId"], message["source"]["callId"], message["content"][0]["toolCallId"]]
    assert logged == [arguments, call_id, call_id, call_id]
    assert all(value is not arguments and value is not call_id for value in logged)
    arguments.append("changed")
    call_id.append("changed")
    assert logged == [["not", "a", "string"], ["an", "id"], ["an", "id"], ["an", "id"]]
    for value in logged:
        with pytest.raises(TypeError, match="immutable"):
            value.append("x")
