"""``dsh_todo.testing``'s scripted model helpers: replies built in code, one real loop turn played with them."""

from __future__ import annotations

import anyio
import pytest

from dsh_todo.testing import ScriptedModel, memory_context, reply, scripted_turn, todo_call


def test_todo_call_sends_compact_json_and_reply_sets_the_finish_reason() -> None:
    call = todo_call("c1", ("read", "in_progress"), ("fix", "pending"))
    assert (call.id, call.name) == ("c1", "todo_write")
    assert call.arguments == ('{"todos":[{"content":"read","status":"in_progress"},'
                              '{"content":"fix","status":"pending"}]}')
    assert reply("done").finish_reason == "stop"
    assert reply("", call).finish_reason == "tool_calls"
    assert reply("", call).tool_calls == [call]


def test_scripted_turn_plays_the_real_loop() -> None:
    with memory_context() as ctx:
        session = ctx.sessions.create("s")
        outcome = anyio.run(lambda: scripted_turn(ctx, session, "plan it", [
            reply("Planning.", todo_call("c1", ("read", "in_progress"))), reply("Planned.")]))
        assert outcome.text == "Planned."
        assert outcome.reason == {"kind": "completed"}
        assert ctx.session_projections.snapshot(session)["values"]["todos"] == [
            {"content": "read", "status": "in_progress"}]


def test_scripted_turn_refuses_a_script_the_loop_did_not_finish() -> None:
    with memory_context() as ctx:
        session = ctx.sessions.create("s")
        with pytest.raises(AssertionError, match="1 scripted replies unused"):
            anyio.run(lambda: scripted_turn(ctx, session, "hi", [reply("Hello."), reply("never asked for")]))


def test_the_scripted_model_is_the_harness_one() -> None:
    from dsh_todo.harness.llm import ScriptedModel as harness_model

    assert ScriptedModel is harness_model
