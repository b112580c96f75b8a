"""Random JSON of any depth and size through every way a call comes in (issue 13, "Done when").

Three doors, each driven by hypothesis with a bounded number of examples:

- ``ctx.tools.execute`` with an arguments object built in memory;
- the agent loop's raw-argument path: the model's ``arguments`` string, whatever it is, through one real turn;
- ``dsh-todo mcp`` over real stdio: any line of bytes, then a ``ping`` that must still be answered.

Whatever comes in: no exception escapes, every request gets exactly one answer, a rejected call appends nothing
(so the standing plan does not move), an accepted one appends exactly one ``todo/write``, and no turn is left open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_todo.harness import Agent, Context
from dsh_todo.harness.llm import ToolCallRequest
from dsh_todo.logview import read_session
from dsh_todo.testing import memory_context, reply, scripted_turn
from tests import needs

STATUSES = ("pending", "in_progress", "completed")


def nested(depth: int, leaf: Any) -> Any:
    """``leaf`` inside ``depth`` alternating lists and objects (built without recursion)."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


leaves = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63, max_value=2**80)
          | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40))
json_values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=10), inner, max_size=6),
    max_leaves=40)
deep_values = st.builds(nested, st.integers(min_value=0, max_value=3000), leaves)


def arguments_of(deep: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Argument objects: todo-shaped lists with wrong types anywhere, ``deep`` values inside, or any object."""
    items = st.fixed_dictionaries(
        {"content": st.text(max_size=30) | json_values, "status": st.sampled_from(STATUSES) | json_values},
        optional={"activeForm": st.text(max_size=10), "id": json_values, "extra": deep})
    return (st.fixed_dictionaries({"todos": st.lists(items | json_values, max_size=12) | json_values | deep},
                                  optional={"other": json_values})
            | st.dictionaries(st.text(max_size=10), json_values, max_size=4))


arguments = arguments_of(deep_values)


def raw_text(value: Any) -> str:
    """JSON text for ``value`` as a model might send it: ``NaN``, ``Infinity`` and huge numbers included (the deep
    texts come from their own strategies: the standard library's encoder recurses)."""
    return json.dumps(value, allow_nan=True)


raw_arguments = (arguments_of(json_values).map(raw_text) | st.text(max_size=200)
                 | st.integers(min_value=1, max_value=5000).map(lambda n: "[" * n + "]" * n)
                 | st.integers(min_value=1, max_value=5000).map(lambda n: '{"todos":' + "[" * n)
                 | st.sampled_from(['{"todos": 1e400}', '{"todos": [-0]}', '{"todos": 123456789012345678901234567890}',
                                    '{"todos": "\\ud800"}', "", "null", "[]", '{"todos": [}']))

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


def todo_writes(ctx: Context, session_id: str) -> int:
    session = ctx.sessions.get(session_id)
    assert session is not None
    return sum(1 for event in session.events if event["type"] == "todo/write")


def standing_plan(ctx: Context, session_id: str) -> Any:
    session = ctx.sessions.get(session_id)
    assert session is not None
    return ctx.session_projections.snapshot(session)["values"]["todos"]


def assert_turns_closed(events: list[Any]) -> None:
    """Every ``turn/start`` has its ``turn/end``, and every ``tool/call`` its ``tool/result``."""
    open_turns = 0
    calls: set[str] = set()
    for event in events:
        kind = event["type"]
        if kind == "turn/start":
            assert open_turns == 0, "a turn started inside another"
            open_turns = 1
        elif kind == "turn/end":
            assert open_turns == 1, "a turn ended that was not open"
            open_turns = 0
        elif kind == "tool/call":
            calls.add(event["data"]["callId"])
        elif kind == "tool/result":
            calls.discard(event["data"]["message"]["source"]["callId"])
    assert open_turns == 0, "a turn was left open"
    assert not calls, f"tool calls without a result: {sorted(calls)}"


@pytest.fixture(scope="module")
def memory() -> Iterator[Context]:
    with memory_context() as ctx:
        yield ctx


@FUZZ
@given(args=arguments)
def test_execute_answers_anything_and_appends_only_what_it_accepts(memory: Context, args: Any) -> None:
    session = memory.sessions.get("fuzz-execute") or memory.sessions.create("fuzz-execute")
    before_writes, before_plan = todo_writes(memory, "fuzz-execute"), standing_plan(memory, "fuzz-execute")
    before_seq = session.seq
    result = asyncio.run(memory.tools.execute("todo_write", args, agent=Agent("fuzz", session)))
    if result.is_error:
        assert session.seq == before_seq
        assert standing_plan(memory, "fuzz-execute") == before_plan
        assert result.content[0]["text"].startswith("Error: ")
        assert "\n" not in result.content[0]["text"].split(": ", 1)[0]
    else:
        assert todo_writes(memory, "fuzz-execute") == before_writes + 1
        assert session.seq == before_seq + 1


@FUZZ
@given(raw=raw_arguments)
def test_the_loop_turns_any_raw_arguments_into_a_closed_turn(memory: Context, raw: str) -> None:
    session_id = "fuzz-loop"
    session = memory.sessions.get(session_id) or memory.sessions.create(session_id)
    before = todo_writes(memory, session_id)
    start = session.seq
    outcome = asyncio.run(scripted_turn(memory, session, "go", [
        reply("", ToolCallRequest("call_1", "todo_write", raw)), reply("done")]))
    assert outcome.reason["kind"] == "completed"
    turn = list(session.events[start:])
    assert_turns_closed(turn)
    [result] = [event for event in turn if event["type"] == "tool/result"]
    rejected = result["data"]["message"]["isError"]
    assert todo_writes(memory, session_id) == before + (0 if rejected else 1)


def raw_call(request_id: int, raw: str) -> bytes:
    """A ``tools/call`` line with ``raw`` as its arguments, verbatim (so the line may not be JSON at all)."""
    text = '{"jsonrpc":"2.0","id":' + str(request_id) + ',"method":"tools/call","params":{"name":"todo_write",'
    return (text + '"arguments":' + (raw or "null") + "}}").encode("utf-8", "surrogatepass")


def call_line(pair: tuple[int, Any]) -> tuple[bytes, int]:
    """A ``tools/call`` line of ``arguments``; its id negated when ``NaN`` or ``Infinity`` make it not JSON."""
    request_id, args = pair
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": "todo_write", "arguments": args}}
    try:
        return json.dumps(message, allow_nan=False).encode(), request_id
    except ValueError:
        return json.dumps(message).encode(), -request_id


# Each line with the id its answer must carry: None for no answer promised, a negative id for a line that may not
# parse (then exactly one answer, with that id or null).
mcp_lines = st.one_of(
    st.binary(max_size=200).filter(lambda b: b"\n" not in b and b"\r" not in b).map(lambda b: (b, None)),
    json_values.map(lambda v: (raw_text(v).encode(), None)),
    # No line break in the raw text: a raw "\n" makes two lines, each answered on its own (hypothesis drew one).
    st.tuples(st.integers(min_value=1000, max_value=10**6),
              raw_arguments.filter(lambda raw: "\n" not in raw and "\r" not in raw)).map(
        lambda pair: (raw_call(*pair), -pair[0])),
    st.tuples(st.integers(min_value=1000, max_value=10**6), arguments_of(json_values)).map(call_line),
)


PING_ID = "fuzz-ping"


def test_mcp_stdio_answers_every_request_once_and_leaves_every_turn_closed(tmp_path: Path) -> None:
    """Any line on stdin, then a ``ping``: at most one answer before the ping's, exactly one (with its id) for a
    request, never error code 0 or a traceback. When the client leaves, the log reads ``ok`` with no turn open."""
    needs.module("mcp")
    from tests.carriers.mcp.test_mcp_stdio_wire import Wire

    (tmp_path / "project").mkdir()
    wire = Wire(tmp_path / "sessions", tmp_path / "project")
    reached_the_tool = []
    try:
        wire.handshake("fuzz")

        @FUZZ
        @given(line=mcp_lines)
        def one_line(line: tuple[bytes, Any]) -> None:
            data, request_id = line
            wire.send(data)
            wire.send(json.dumps({"jsonrpc": "2.0", "id": PING_ID, "method": "ping"}).encode())
            answers = []
            while (answer := wire.answer()).get("id") != PING_ID:
                answers.append(answer)
            assert len(answers) <= 1, f"{len(answers)} answers to one line"
            if request_id is not None:
                [answer] = answers
                assert answer.get("id") in ((-request_id, None) if request_id < 0 else (request_id,))
                reached_the_tool.append("result" in answer)
            for answer in answers:
                if "error" in answer:
                    assert isinstance(answer["error"]["code"], int) and answer["error"]["code"] != 0
                    assert "Traceback" not in answer["error"]["message"]

        one_line()
        code, _rest = wire.close()
        assert code == 0, wire.stderr_text()
    finally:
        wire.kill()
    logs = [path for path in (tmp_path / "sessions").glob("*/*") if path.is_dir()]
    assert len(logs) == (1 if any(reached_the_tool) else len(logs))
    for directory in logs:
        view = read_session(directory)
        assert view.health.state == "ok", view.health.reason
        assert_turns_closed(view.events)
