"""The turn writer itself: what no single front door exercises (two writers on one log, scope reasons)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.session import SessionAppendError, lossless_data
from dsh_todo.harness.turns import Turns, TurnScope, open_turn
from tests.advertised import assert_advertised
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
    accepted = ["step/start", "assistant/message", "tool/call", "todo/write", "tool/result", "step/end"]
    refused = ["step/start", "assistant/message", "tool/call", "tool/result", "step/end"]
    assert [e["type"] for e in session.events] == ["turn/start", *accepted, *refused, *accepted]
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


@pytest.mark.parametrize("version", [4, 0], ids=["v4", "v0"])
async def test_a_call_whose_fields_are_not_strings_is_still_logged_frozen(make_ctx: BootFactory,
                                                                          version: int) -> None:
    """The turn writer builds ``tool/call`` and ``tool/result`` frozen as it makes them, trusting the call's fields
    to be the strings their type says; a caller that hands it something else (lists as the id and the arguments)
    gets checked, frozen copies, never its own mutable objects in the log (in either format's result message)."""
    ctx = make_ctx()
    session = ctx.sessions.create("s", **({"version": 0} if version == 0 else {}))
    call_id: Any = ["an", "id"]
    arguments: Any = ["not", "a", "string"]
    await Turns.of(ctx, Agent("a", session)).call_alone(ToolCallRequest(call_id, "todo_write", arguments),
                                                        arguments={"todos": []})
    call = next(event for event in session.events if event["type"] == "tool/call")["data"]
    message = next(event for event in session.events if event["type"] == "tool/result")["data"]["message"]
    answered = message["content"][0]["toolCallId"] if version == 0 else message["toolCallId"]
    logged = [call["arguments"], call["callId"], message["source"]["callId"], answered]
    assert logged == [arguments, call_id, call_id, call_id]
    assert all(value is not arguments and value is not call_id for value in logged)
    arguments.append("changed")
    call_id.append("changed")
    assert logged == [["not", "a", "string"], ["an", "id"], ["an", "id"], ["an", "id"]]
    for value in logged:
        with pytest.raises(TypeError, match="immutable"):
            value.append("x")


# -- a call from a model outside the harness is advertised in its step (DSH 0.2) ----------------------------------


@pytest.mark.parametrize("version", [4, 0], ids=["v4", "v0"])
async def test_a_lone_call_is_advertised_by_an_external_assistant_message_in_its_step(make_ctx: BootFactory,
                                                                                        version: int) -> None:
    """DSH 0.2.1 refuses to open a log whose ``tool/call`` no ``assistant/message`` of the same step advertised
    ("tool/call … has no advertised tool lifecycle"), so it resumed no log of the MCP server or the adapters. A
    call from a front door without a model of its own is now logged after the message of the model that made it:
    one ``tool-call`` block with the very id, name and raw argument text (not a re-serialisation) of the call,
    from the ``external`` model, and a ``stream`` only in the formats that have one."""
    ctx = make_ctx()
    session = ctx.sessions.create("s", **({"version": 0} if version == 0 else {}))
    turns = Turns.of(ctx, Agent("a", session))
    raw = '{ "todos" : [{"status":"pending","content":"a"}] }'  # spaced, keys reordered: logged as given
    assert (await turns.call_alone(ToolCallRequest("c1", "todo_write", raw))).is_error is False
    events = list(session.events)
    assert [e["type"] for e in events] == ["turn/start", "step/start", "assistant/message", "tool/call",
                                           "todo/write", "tool/result", "step/end"]
    advertising, call = events[2], events[3]
    assert advertising["surfaceOp"] == "append"
    expected: dict[str, Any] = {
        "turn": 1, "step": 1,
        "message": {"role": "assistant",
                    "content": [{"type": "tool-call", "id": "c1", "name": "todo_write", "arguments": raw}],
                    "source": {"kind": "model", "provider": "external", "model": "external"},
                    "id": advertising["data"]["message"]["id"]}}
    if version != 0:
        expected["stream"] = []
    assert advertising["data"] == expected
    assert "stream" in advertising["data"] if version != 0 else "stream" not in advertising["data"]
    assert advertising["data"]["message"]["content"][0]["arguments"] == call["data"]["arguments"] == raw
    assert_advertised(advertising, call, stream=version != 0)
    # A call joining a step already open is advertised there, with a fresh message id.
    turns.begin_step()
    assert (await turns.call_alone(ToolCallRequest("c2", "todo_write", "{}"))).is_error is True
    joined = list(session.events)[7:]
    assert [e["type"] for e in joined] == ["step/start", "assistant/message", "tool/call", "tool/result"]
    assert (joined[1]["data"]["turn"], joined[1]["data"]["step"]) == (1, 2)
    assert_advertised(joined[1], joined[2], stream=version != 0)
    assert joined[1]["data"]["message"]["id"] != advertising["data"]["message"]["id"]


async def test_a_call_refused_before_it_logs_anything_appends_no_advertising_message(make_ctx: BootFactory) -> None:
    """A lone call after a closed turn opens its turn only once its tool logs something (``_opening``): refused
    first, it leaves the log exactly as it was, without the ``assistant/message`` that would have advertised it
    (an advertisement with no call would be a lifecycle DSH never sees completed)."""
    ctx = make_ctx()
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    with TurnScope(turns):
        await turns.call_alone(ToolCallRequest("c1", "todo_write", ONE))
    before = list(turns.session.events)
    assert [e["type"] for e in before] == ["turn/start", "step/start", "assistant/message", "tool/call",
                                           "todo/write", "tool/result", "step/end", "turn/end"]
    refused = await turns.call_alone(ToolCallRequest("c2", "todo_write", '{"todos":[{"content":"x"}]}'))
    assert refused.is_error is True
    assert list(turns.session.events) == before
    assert turns.session.seq == len(before)


# -- a call after a closed turn runs its tool once (issue 24 goal 5) ----------------------------------------------


def counting_tool(runs: list[Any]) -> Any:
    """``count``: a tool with a side effect outside the log (it counts its runs); it logs a ``todo/write`` of its
    argument when ``ok`` is true and refuses the call otherwise, as the todo tool refuses a list."""
    from dsh_todo.harness.errors import TodoRejectedError
    from dsh_todo.harness.tools import define_tool

    def execute(args: Any, call: Any) -> dict[str, Any]:
        runs.append(args)
        if not args["ok"]:
            raise TodoRejectedError("not ok")
        call.agent.session.append("todo/write", {"todos": [{"content": args["item"], "status": "pending"}]})
        return {}

    return define_tool(name="count", description="counts its runs", execute=execute, render=lambda _a, _v: "done",
                       parameters={"ok": {"type": "boolean", "required": True},
                                   "item": {"type": "string", "required": True}})


def closed_turn(make_ctx: BootFactory, runs: list[Any], seen: list[str]) -> Turns:
    """A writer whose session's last turn is closed with a plan standing; ``seen`` collects what the store's
    observers (where invariant companions live) are asked about from then on."""
    ctx = make_ctx(invariants={}, session_invariant=True, todo_invariant=True)
    ctx.tools.register(counting_tool(runs))
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    with TurnScope(turns):
        turns.begin_step()
        turns.session.append("todo/write", {"todos": [{"content": "standing", "status": "pending"}]})
    ctx.sessions.observers.insert(0, lambda _session, event: seen.append(event["type"]))  # before any veto
    return turns


@pytest.mark.parametrize("refusal", [
    ('{"ok":false,"item":"x"}', "Error: not ok", 1),  # the tool itself refuses: it runs once
    ('{"ok":"no"}', 'Error: invalid arguments: missing required property "item"; "ok" must be a boolean',
     0),  # the registry refuses: it never runs
    # refused by an invariant at its append:
    ('{"ok":true,"item":" untrimmed "}', 'Error: invariant violated by "@deepseek-ai/dsh-tool-todo": todo/write '
                                         "content must be non-empty and already trimmed", 1)])
async def test_a_refused_call_after_a_closed_turn_runs_its_tool_at_most_once(
        make_ctx: BootFactory, refusal: tuple[str, str, int]) -> None:
    """Repro (issue 24): such a call was first run against a detached copy of the session to learn whether it would
    be refused, then, accepted, run again for real: a tool with an effect outside the log had it twice, and the
    dry run skipped the invariant observers. Now the tool runs once, on the session itself."""
    raw, text, expected_runs = refusal
    runs: list[Any] = []
    seen: list[str] = []
    turns = closed_turn(make_ctx, runs, seen)
    before = list(turns.session.events)
    result = await turns.call_alone(ToolCallRequest("c1", "count", raw))
    assert (result.is_error, result.text) == (True, text)
    assert len(runs) == expected_runs
    if raw.endswith('" untrimmed "}'):  # the observers judged the write in the new turn, as for any other call
        assert seen == ["turn/start", "step/start", "assistant/message", "tool/call", "todo/write", "tool/result",
                        "step/end"]
    else:  # refused before it logged anything: nothing at all, not even the message advertising the call
        assert list(turns.session.events) == before and seen == []


async def test_an_accepted_call_after_a_closed_turn_runs_its_tool_once_in_the_new_turn(
        make_ctx: BootFactory) -> None:
    runs: list[Any] = []
    seen: list[str] = []
    turns = closed_turn(make_ctx, runs, seen)
    start = turns.session.seq
    result = await turns.call_alone(ToolCallRequest("c1", "count", '{"ok":true,"item":"b"}'))
    assert (result.is_error, result.text, len(runs)) == (False, "done", 1)
    logged = [(e["type"], e["data"].get("turn"), e["data"].get("step")) for e in turns.session.events[start:]]
    assert logged == [("turn/start", 2, None), ("step/start", 2, 1), ("assistant/message", 2, 1), ("tool/call", 2, 1),
                      ("todo/write", None, None), ("tool/result", 2, 1), ("step/end", 2, 1)]
    assert seen == [kind for kind, _turn, _step in logged]  # every event, each asked about once, in log order
    call = turns.session.events[start + 3]
    assert_advertised(turns.session.events[start + 2], call)
    assert turns.session.events[start + 5]["sourceEventSeqs"] == [call["seq"]]
    assert call["data"]["arguments"] == '{"ok":true,"item":"b"}'
    # The next call joins the standing turn this one opened, as every call after it does.
    await turns.call_alone(ToolCallRequest("c2", "count", '{"ok":false,"item":"x"}'))
    assert len(runs) == 2 and [e["type"] for e in turns.session.events[start + 7:]] == [
        "step/start", "assistant/message", "tool/call", "tool/result", "step/end"]


async def test_an_accepted_call_that_logs_nothing_still_opens_the_turn_with_its_call(make_ctx: BootFactory) -> None:
    """A tool accepted without appending anything (a successful no-op) is logged as any call that opens a turn."""
    runs: list[Any] = []
    seen: list[str] = []
    turns = closed_turn(make_ctx, runs, seen)
    from dsh_todo.harness.tools import define_tool

    turns.tools.register(define_tool(name="noop", description="does nothing", execute=lambda a, c: runs.append(a),
                                     render=lambda _a, _v: "nothing", parameters={}))
    start = turns.session.seq
    result = await turns.call_alone(ToolCallRequest("c1", "noop", "{}"))
    assert (result.is_error, result.text, len(runs)) == (False, "nothing", 1)
    assert [e["type"] for e in turns.session.events[start:]] == seen == [
        "turn/start", "step/start", "assistant/message", "tool/call", "tool/result", "step/end"]
    assert_advertised(turns.session.events[start + 2], turns.session.events[start + 3])
