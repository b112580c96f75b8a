"""The turn writer with calls on other threads (issue 34): a turn's end waits for them, and a run's call that had
not started when its turn ended is refused without a trace. Threads are synchronised with events, never timed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.llm.base import ToolCallRequest
from dsh_todo.harness.tool_results import answers
from dsh_todo.harness.turns import Turns, TurnScope, aborted
from tests.conftest import BootFactory

ONE = '{"todos":[{"content":"a","status":"in_progress"}]}'
TOLD = "Updated todo list: 0 pending, 1 in progress, 0 completed."
ABORTED = "Error: tool call aborted"
WAIT_S = 30.0


def text_of(event: Any) -> str:
    """The text a ``tool/result`` answered, in either format's message (v0 nests it in a ``tool-result`` block)."""
    [answer] = answers(event["data"]["message"])
    return "".join(part["text"] for part in answer.content)


def held_tool(turns: Turns) -> tuple[threading.Event, threading.Event]:
    """Hold every call inside the tool, on its own thread, until ``release`` is set (``running`` is set then)."""
    running, release = threading.Event(), threading.Event()
    execute = turns.tools.execute

    async def held(name: str, arguments: Any, *args: Any, **kwargs: Any) -> Any:
        running.set()
        assert release.wait(WAIT_S)
        return await execute(name, arguments, *args, **kwargs)

    turns.tools.execute = held  # type: ignore[method-assign]
    return running, release


def in_thread(run: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(run()), daemon=True)
    thread.start()
    return thread, out


def wait_until(condition: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(int(WAIT_S * 100)):
        if condition():
            return
        done.wait(0.01)
    pytest.fail("the condition never held")


def test_a_turns_end_waits_for_a_call_in_flight_on_another_thread_and_logs_its_real_answer(
        make_ctx: BootFactory) -> None:
    """Issue 34, item 2, at the writer: a call runs on a worker thread (its own event loop) while the run's turn is
    closed on the loop thread. The turn's end answered it aborted and wrote ``turn/end`` while the call went on,
    which then appended ``todo/write`` and ``tool/result`` after it; now the end waits, and the call's answer is
    the one it was told."""
    ctx = make_ctx()
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    running, release = held_tool(turns)
    scope = TurnScope(turns)
    turn = scope.open()
    call = ToolCallRequest("c1", "todo_write", ONE)
    worker, told = in_thread(lambda: asyncio.run(turns.call_alone(call, within=turn)))
    assert running.wait(WAIT_S)
    closer, _ = in_thread(lambda: scope.close(asyncio.CancelledError()))
    wait_until(lambda: turns._quiescing == 1)  # the end is waiting for the call
    assert [e["type"] for e in turns.session.events][-2:] == ["assistant/message", "tool/call"]
    release.set()
    worker.join(WAIT_S)
    closer.join(WAIT_S)
    kinds = [e["type"] for e in turns.session.events]
    assert kinds == ["turn/start", "step/start", "assistant/message", "tool/call", "todo/write", "tool/result",
                     "step/end", "turn/end"]
    assert turns.session.events[-1]["data"]["reason"] == aborted()
    assert [result.text for result in told] == [TOLD] == [text_of(turns.session.events[5])]


def test_a_runs_call_that_had_not_started_when_its_turn_ended_is_refused_and_logged_nowhere(
        make_ctx: BootFactory) -> None:
    ctx = make_ctx()
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    with TurnScope(turns) as turn:
        assert turns.run_turn() == turn
    before = list(turns.session.events)
    result = asyncio.run(turns.call_alone(ToolCallRequest("c1", "todo_write", ONE), within=turn))
    assert (result.text, result.is_error) == (ABORTED, True)
    assert list(turns.session.events) == before  # not even the message that would have advertised it
    # Without a run's turn (the standing one, or none) a later call is logged as any call outside a run.
    assert turns.run_turn() is None
    assert asyncio.run(turns.call_alone(ToolCallRequest("c2", "todo_write", ONE))).text == TOLD
    assert turns.run_turn() is None  # the standing turn is the writer's own


def test_a_call_arriving_while_a_turn_ends_waits_for_the_end_and_takes_a_turn_after_it(
        make_ctx: BootFactory) -> None:
    """A second thread's call that starts while the turn's end waits for the first does not slip into the ending
    turn: it waits, and then opens the standing turn after it."""
    ctx = make_ctx()
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    running, release = held_tool(turns)
    scope = TurnScope(turns)
    turn = scope.open()
    first, _ = in_thread(lambda: asyncio.run(turns.call_alone(ToolCallRequest("c1", "todo_write", ONE),
                                                              within=turn)))
    assert running.wait(WAIT_S)
    closer, _ = in_thread(lambda: scope.close())
    wait_until(lambda: turns._quiescing == 1)
    second, told = in_thread(lambda: asyncio.run(turns.call_alone(ToolCallRequest("c2", "todo_write", ONE))))
    release.set()
    for thread in (first, closer, second):
        thread.join(WAIT_S)
    kinds = [e["type"] for e in turns.session.events]
    assert kinds == ["turn/start", "step/start", "assistant/message", "tool/call", "todo/write", "tool/result",
                     "step/end", "turn/end",
                     "turn/start", "step/start", "assistant/message", "tool/call", "todo/write", "tool/result",
                     "step/end"]
    assert [result.text for result in told] == [TOLD]


def test_a_call_left_behind_on_the_closing_thread_is_told_what_the_log_says(make_ctx: BootFactory) -> None:
    """A task its run stopped awaiting, on the very loop that closes the turn, cannot be waited for: the end answers
    it aborted (its body ran: DSH's rule, aborted although its ``todo/write`` is in the log), and when it finishes
    after all, its caller is told that answer too, not the list it wrote."""
    ctx = make_ctx()
    turns = Turns.of(ctx, Agent("a", ctx.sessions.create("s")))
    gate = asyncio.Event()
    execute = turns.tools.execute

    async def gated(name: str, arguments: Any, *args: Any, **kwargs: Any) -> Any:
        result = await execute(name, arguments, *args, **kwargs)
        await gate.wait()  # something after the body, while the run is cancelled
        return result

    turns.tools.execute = gated  # type: ignore[method-assign]

    async def main() -> Any:
        scope = TurnScope(turns)
        scope.open()
        task = asyncio.ensure_future(turns.call_alone(ToolCallRequest("c1", "todo_write", ONE)))
        await asyncio.sleep(0)
        scope.close(asyncio.CancelledError())  # the run is gone; its call's task is left behind
        gate.set()
        return await task

    result = asyncio.run(main())
    kinds = [e["type"] for e in turns.session.events]
    assert kinds == ["turn/start", "step/start", "assistant/message", "tool/call", "todo/write", "tool/result",
                     "step/end", "turn/end"]
    assert result.text == text_of(turns.session.events[5]) == ABORTED
