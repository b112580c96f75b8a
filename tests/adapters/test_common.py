"""The shared binding every adapter stands on: calls, turns, serialisation, persistence, lazy imports."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.adapters import bind_todo
from dsh_todo.adapters.common import TodoBinding, open_turn, standing_plan, turn_end_reason
from dsh_todo.logview import read_session
from dsh_todo.standard import open_runtime
from dsh_todo.tool_todo.description import PARALLEL, SINGLE
from tests.adapters.scenario import CANONICAL, RAW, TEXT
from tests.advertised import assert_advertised
from tests.conftest import DiskSyncs, plan_json, todo_writes

pytestmark = pytest.mark.anyio

ONE = '{"todos":[{"content":"a","status":"in_progress"}]}'


def types_of(todos: TodoBinding) -> list[str]:
    return [event["type"] for event in todos.session.events]


@pytest.fixture
def todos() -> Any:
    with bind_todo() as binding:
        yield binding


async def test_calls_outside_any_turn_are_steps_of_the_bindings_standing_turn(todos: TodoBinding) -> None:
    result = await todos.call(RAW["c1"], call_id="c1")
    assert (result.is_error, result.text) == (False, TEXT["c1"])
    assert result.value == {"todos": CANONICAL, "counts": {"pending": 1, "inProgress": 1, "completed": 1}}
    assert types_of(todos) == ["turn/start", "step/start", "assistant/message", "tool/call", "todo/write",
                               "tool/result", "step/end"]
    assert todos.session.events[3]["data"] == {"turn": 1, "step": 1, "callId": "c1", "name": "todo_write",
                                               "arguments": RAW["c1"]}
    # The framework's model is not ours: its call is advertised first, as DSH 0.2 requires of every tool/call.
    advertising = todos.session.events[2]
    assert advertising["surfaceOp"] == "append"
    assert advertising["data"] == {
        "turn": 1, "step": 1,
        "message": {"role": "assistant",
                    "content": [{"type": "tool-call", "id": "c1", "name": "todo_write", "arguments": RAW["c1"]}],
                    "source": {"kind": "model", "provider": "external", "model": "external"},
                    "id": advertising["data"]["message"]["id"]},
        "stream": []}
    assert advertising["data"]["message"]["content"][0]["arguments"] == todos.session.events[3]["data"]["arguments"]
    assert_advertised(advertising, todos.session.events[3])
    assert todos.plan == CANONICAL
    # The next call is the next step of the same turn; being rejected, it leaves the plan as it was.
    rejected = await todos.call(RAW["c2"])
    assert (rejected.is_error, rejected.text) == (True, TEXT["c2"])
    assert types_of(todos)[7:] == ["step/start", "assistant/message", "tool/call", "tool/result", "step/end"]
    assert todos.session.events[9]["data"]["step"] == 2
    assert_advertised(todos.session.events[8], todos.session.events[9])
    assert todos.plan == CANONICAL
    # A run's own turn ends the standing one (new work is a new turn, and it clears the plan, as in DSH).
    with todos.turn() as turn:
        assert turn == 2
        assert todos.plan is None
    ends = [e["data"] for e in todos.session.events if e["type"] == "turn/end"]
    assert ends == [{"turn": 1, "reason": {"kind": "completed"}}, {"turn": 2, "reason": {"kind": "completed"}}]
    assert todo_writes(todos.session) == [CANONICAL]


def test_closing_the_binding_ends_its_turns() -> None:
    """The standing turn ends ``completed``; a run's turn still open when the binding goes ends ``aborted``
    (``disposed``), and its scope then has nothing left to close."""
    with bind_todo() as todos:
        todos.call_sync(ONE)
    assert types_of(todos)[-1] == "turn/end"
    assert todos.session.events[-1]["data"]["reason"] == {"kind": "completed"}
    todos = bind_todo()
    with todos.turn():
        todos.call_sync(ONE)
        todos.close()
    assert types_of(todos).count("turn/end") == 1
    assert todos.session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "disposed"}}


async def test_calls_inside_a_turn_are_its_steps_and_the_plan_stands(todos: TodoBinding) -> None:
    async with todos.turn() as turn:
        assert turn == 1
        for call_id in ("c1", "c2", "c3", "c4"):
            assert (await todos.call(RAW[call_id], call_id=call_id)).text == TEXT[call_id]
    steps = [e["data"]["step"] for e in todos.session.events if e["type"] == "tool/call"]
    assert steps == [1, 2, 3, 4]
    assert types_of(todos).count("turn/start") == 1
    assert todos.plan == CANONICAL


async def test_a_call_joins_a_step_the_host_left_open(todos: TodoBinding) -> None:
    session = todos.session
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 3})
    await todos.call(ONE)
    assert open_turn(session) == (1, 3, True)
    assert types_of(todos)[2:] == ["assistant/message", "tool/call", "todo/write", "tool/result"]
    assert session.events[3]["data"]["step"] == 3
    assert_advertised(session.events[2], session.events[3])


async def test_parsed_arguments_are_logged_as_compact_json(todos: TodoBinding) -> None:
    result = await todos.call_value({"todos": [{"content": "é ", "status": "pending"}]})
    assert result.text == "Updated todo list: 1 pending, 0 in progress, 0 completed."
    call = next(e for e in todos.session.events if e["type"] == "tool/call")
    assert call["data"]["arguments"] == '{"todos":[{"content":"é ","status":"pending"}]}'
    assert (await todos.call_value([])).text == 'Error: invalid arguments: "arguments" must be an object'


def test_empty_raw_text_is_an_empty_object(todos: TodoBinding) -> None:
    assert todos.call_sync("").text == 'Error: invalid arguments: missing required property "todos"'
    assert todos.call_sync("null").text == 'Error: invalid arguments: "arguments" must be an object'


async def test_sync_calls_work_inside_a_running_event_loop(todos: TodoBinding) -> None:
    assert todos.call_sync(ONE).text == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert todos.call_value_sync({"todos": []}).text == "Updated todo list: 0 pending, 0 in progress, 0 completed."
    assert todo_writes(todos.session) == [[{"content": "a", "status": "in_progress"}], []]


def delay_tools(todos: TodoBinding, monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Make every call on ``todos`` sleep ``seconds`` inside the tool (0: yield to other tasks once)."""
    registry = todos.ctx.tools
    execute = registry.execute

    async def delayed_execute(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(seconds)
        return await execute(*args, **kwargs)

    monkeypatch.setattr(registry, "execute", delayed_execute)


async def test_concurrent_calls_never_interleave(todos: TodoBinding, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frameworks run tool calls concurrently; a tool that yields mid-call must still log one call at a time."""
    delay_tools(todos, monkeypatch, 0)
    async with todos.turn():
        bodies = [f'{{"todos":[{{"content":"task {i}","status":"pending"}}]}}' for i in range(5)]
        await asyncio.gather(*(todos.call(body, call_id=f"k{i}") for i, body in enumerate(bodies)))
    per_call = ["step/start", "assistant/message", "tool/call", "todo/write", "tool/result", "step/end"]
    assert types_of(todos) == ["turn/start", *per_call * 5, "turn/end"]
    steps = [(e["data"]["step"], e["data"]["callId"]) for e in todos.session.events if e["type"] == "tool/call"]
    assert [s for s, _ in steps] == [1, 2, 3, 4, 5]


def test_turn_scopes_close_with_the_reason_the_block_earned(todos: TodoBinding) -> None:
    with todos.turn():
        pass
    with pytest.raises(ValueError), todos.turn():
        raise ValueError("boom")

    async def cancelled() -> None:
        async with todos.turn():
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    reasons = [e["data"]["reason"] for e in todos.session.events if e["type"] == "turn/end"]
    assert reasons == [{"kind": "completed"},
                       {"kind": "error", "error": {"name": "ValueError", "message": "boom"}},
                       {"kind": "aborted", "reason": {"kind": "user"}}]
    assert turn_end_reason(KeyboardInterrupt()) == {"kind": "aborted", "reason": {"kind": "user"}}


def test_a_nested_scope_joins_and_a_scope_cannot_be_entered_twice(todos: TodoBinding) -> None:
    outer = todos.turn()
    with outer:
        with todos.turn() as inner:
            assert inner == 1
        assert open_turn(todos.session) == (1, 0, False)
        with pytest.raises(RuntimeError, match="already open"):
            outer.open()
    assert types_of(todos) == ["turn/start", "turn/end"]


async def test_the_session_invariant_accepts_every_call(tmp_path: Path) -> None:
    """With DSH's turn-enclosure invariant mounted, a refused event would fail the call (SPEC §2.4)."""
    ctx = open_runtime(invariants=True)
    try:
        todos = bind_todo(ctx, session="checked")
        assert (await todos.call(ONE)).is_error is False
        async with todos.turn():
            assert (await todos.call(ONE)).is_error is False
        # The same call on a bare agent outside a turn is what the invariant refuses.
        bare = await ctx.tools.execute("todo_write", {"todos": []}, todos.agent)
        assert bare.text.startswith('Error: invariant violated by "@deepseek-ai/dsh-session"')
        assert len(todo_writes(todos.session)) == 2
    finally:
        ctx.dispose()


def test_the_single_active_policy_and_its_error_pass_through() -> None:
    with bind_todo(allow_parallel=False) as todos:
        assert SINGLE in todos.description and PARALLEL not in todos.description
        two = '{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}'
        assert todos.call_sync(two).text == "Error: invalid todos: at most one task may be in_progress (got 2)"


def test_the_offered_schema_is_the_native_one_and_a_fresh_copy(todos: TodoBinding) -> None:
    (native,) = todos.ctx.tools.schemas()
    assert {"name": todos.name, "description": todos.description, "parameters": todos.parameters} == native
    given = todos.parameters
    given["properties"].clear()  # a framework editing what it was given changes nothing
    assert todos.parameters == native["parameters"]
    assert standing_plan(todos.session) is None  # nothing written yet


def test_a_persisted_session_resumes_with_its_plan(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    with bind_todo(root=root, session="demo", cwd=str(tmp_path)) as todos:
        assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]
    with bind_todo(root=root, session="demo") as todos:
        assert todos.plan == CANONICAL
        plan = todos.plan
        assert plan is not None
        plan[0]["status"] = "pending"  # plain data: editing it leaves the log alone
        assert todos.plan == CANONICAL
        assert todos.call_sync(ONE).text == "Updated todo list: 0 pending, 1 in progress, 0 completed."
        assert [e["data"]["turn"] for e in todos.session.events if e["type"] == "turn/start"] == [1, 2]
    with bind_todo(root=root, session="demo") as todos:
        assert todos.plan == [{"content": "a", "status": "in_progress"}]


def test_close_is_idempotent_and_final(todos: TodoBinding) -> None:
    todos.close()
    todos.close()
    with pytest.raises(RuntimeError, match="closed"):
        todos.call_sync(ONE)


def test_root_needs_a_runtime_of_our_own(tmp_path: Path) -> None:
    ctx = open_runtime()
    try:
        with pytest.raises(ValueError, match="root"):
            bind_todo(ctx, root=tmp_path)
    finally:
        ctx.dispose()


def test_the_core_and_the_adapters_package_import_no_framework() -> None:
    code = (
        "import sys\n"
        "import dsh_todo, dsh_todo.cli, dsh_todo.runtime, dsh_todo.adapters, dsh_todo.adapters.common\n"
        "frameworks = ('agents', 'langchain_core', 'pydantic_ai', 'claude_agent_sdk', 'google.adk', 'google.genai')\n"
        "loaded = sorted(m for m in frameworks if m in sys.modules)\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


# -- the standing plan across calls (issue 12) -------------------------------------------------------------------


async def test_a_rejected_call_outside_any_turn_leaves_the_plan_alone(todos: TodoBinding) -> None:
    """Repro (issue 12): ``todos.call(valid)`` then ``todos.call(rejected)``, no ``turn()`` around them: the plan read
    ``None`` because each call was a turn of its own and the rejected call's ``turn/start`` cleared it."""
    assert (await todos.call(RAW["c1"], call_id="c1")).text == TEXT["c1"]
    for call_id in ("c2", "c3", "c4"):
        assert (await todos.call(RAW[call_id], call_id=call_id)).text == TEXT[call_id]
        assert todos.plan == CANONICAL
    assert todos.call_value_sync([]).is_error
    assert todos.plan == CANONICAL


async def test_a_cancelled_call_outside_any_turn_leaves_the_plan_alone(todos: TodoBinding,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro (issue 12): a valid call, then one the framework cancels while it runs: its own turn cleared the plan."""
    assert (await todos.call(ONE)).is_error is False
    delay_tools(todos, monkeypatch, 3600)
    cancelled = asyncio.ensure_future(todos.call(RAW["c1"], call_id="cut"))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    result = next(e for e in todos.session.events if e["type"] == "tool/result" and
                  e["data"]["message"]["source"]["callId"] == "cut")
    assert result["data"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert todos.plan == [{"content": "a", "status": "in_progress"}]


def test_a_rejected_call_leaves_the_persisted_plan_alone(tmp_path: Path) -> None:
    """The same repro on a persisted binding, read back by ``dsh-todo plan --json``."""
    root = tmp_path / "sessions"
    with bind_todo(root=root, session="rejected", cwd=str(tmp_path)) as todos:
        assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]
        assert todos.call_sync(RAW["c4"]).text == TEXT["c4"]
        log = todos.ctx.session_persistence.locate("rejected")
        assert log is not None
        assert plan_json(log) == CANONICAL  # durable before the answer came back
    assert plan_json(log) == CANONICAL


def test_a_rejected_first_call_after_a_closed_turn_leaves_the_plan_alone(tmp_path: Path) -> None:
    """Repro (issue 12, the documented exception of decision 0005): a binding resumes a session whose last turn is
    closed with a plan standing; its first call is rejected. That call had to open a new turn, whose ``turn/start``
    cleared the plan (``dsh-todo plan`` printed ``null``). Now a call that would need a new turn is checked first;
    refused, it is answered and nothing is appended, so the plan, the log and its durable copy stay as they were."""
    root = tmp_path / "sessions"
    with bind_todo(root=root, session="resumed", cwd=str(tmp_path)) as todos:
        assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]
        with todos.turn():
            assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]
        log = todos.ctx.session_persistence.locate("resumed")
        assert log is not None
        before = list(todos.session.events)
        rejected = todos.call_sync(RAW["c4"])  # no turn open: the standing turn ended when turn() began
        assert (rejected.is_error, rejected.text) == (True, TEXT["c4"])
        assert list(todos.session.events) == before  # not even the call's advertising assistant/message
        assert [e["type"] for e in before].count("assistant/message") == 2
        assert todos.plan == CANONICAL
    assert plan_json(log) == CANONICAL
    with bind_todo(root=root, session="resumed") as todos:
        before = list(todos.session.events)
        assert todos.call_value_sync({"todos": "x"}).is_error
        assert list(todos.session.events) == before and todos.plan == CANONICAL
        # An accepted call still opens the next turn as DSH does, advertised in its step, and its plan stands.
        assert todos.call_sync(ONE).is_error is False
        added = list(todos.session.events)[len(before):]
        assert [e["type"] for e in added] == ["turn/start", "step/start", "assistant/message", "tool/call",
                                              "todo/write", "tool/result", "step/end"]
        assert_advertised(added[2], added[3])
        assert todos.plan == [{"content": "a", "status": "in_progress"}]
    assert plan_json(log) == [{"content": "a", "status": "in_progress"}]


def test_each_acknowledgement_costs_its_caller_one_fsync(tmp_path: Path, disk_syncs: DiskSyncs) -> None:
    """Repro (issue 14 goal 3): a ``turn()`` around one call cost five fsyncs and two renames on the caller's thread:
    the standing turn's end was flushed on its own before the new ``turn/start``, and the turn's end wrote the
    projection checkpoint too. Now each acknowledgement (a call's answer, a turn's end) is one fsync, and the
    checkpoint is written by its own thread."""
    root = tmp_path / "sessions"
    with bind_todo(root=root, session="fsyncs", cwd=str(tmp_path)) as todos:
        assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]  # creates the log (its directory entry is fsynced too)
        log = todos.ctx.session_persistence.locate("fsyncs")
        assert log is not None
        disk_syncs.reset()
        assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]  # a step of the standing turn
        assert (disk_syncs.here("fsync"), disk_syncs.here("replace")) == (1, 0)
        disk_syncs.reset()
        with todos.turn():  # ends the standing turn: made durable with the next acknowledgement, not alone
            assert disk_syncs.here("fsync") == 0
            assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]
            assert disk_syncs.here("fsync") == 1
            assert plan_json(log) == CANONICAL  # the answer is durable before it comes back
        assert (disk_syncs.here("fsync"), disk_syncs.here("replace")) == (2, 0)
        types = [line["type"] for line in read_session(Path(log)).events]
        assert types[-9:] == ["turn/end", "turn/start", "step/start", "assistant/message", "tool/call", "todo/write",
                              "tool/result", "step/end", "turn/end"], "everything acknowledged is on disk"
