"""Hypothesis properties of ``todo_write``: any JSON in, a stable answer out, and the log agrees with the answer."""

from __future__ import annotations

import asyncio
from itertools import count
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_todo.harness import Agent, Context, boot
from dsh_todo.harness.frozen import is_lossless
from dsh_todo.tool_todo.invariant import check_todos
from tests.conftest import composition

FAMILIES = ("Error: invalid arguments: ", "Error: invalid todo: ", "Error: invalid todos: ",
            "Error: tool execution arguments must be losslessly JSON-serializable")
STATUSES = ("pending", "in_progress", "completed")
# SPEC §13.1, written out independently of the code under test.
JS_SPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
            "\u2028\u2029\u202f\u205f\u3000\ufeff")

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_CONTEXTS: dict[bool, Context] = {}
_IDS = count()


def context(allow_parallel: bool) -> Context:
    if allow_parallel not in _CONTEXTS:
        _CONTEXTS[allow_parallel] = boot(composition(allow_parallel=allow_parallel))
    return _CONTEXTS[allow_parallel]


def run(ctx: Context, arguments: Any) -> tuple[Any, Agent]:
    agent = Agent("a", ctx.sessions.create(f"p{next(_IDS)}"))
    result = asyncio.run(ctx.tools.execute("todo_write", arguments, agent=agent))
    return result, agent


json_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**60), max_value=2**60)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
json_values = st.recursive(json_scalars,
                           lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=6), children, max_size=4),
                           max_leaves=12)

# Contents drawn from a small pool (with JS and non-JS whitespace around them) so duplicates, blank contents and
# trimming all happen often; statuses mostly valid.
padding = st.text(alphabet=" \t\n\u00a0\ufeff\u2028\u0085\x1c", max_size=2)
core = st.sampled_from(["a", "b", "plan", "Plan", "say \"hi\"", "中文", "", "x\u0085", "\ufeff"])
contents = st.builds(lambda left, middle, right: left + middle + right, padding, core, padding)
statuses = st.sampled_from(STATUSES) | st.sampled_from(["doing", "PENDING", "", 1, None])
valid_items = st.fixed_dictionaries({"content": contents, "status": st.sampled_from(STATUSES)})
odd_items = (st.fixed_dictionaries({"content": contents | json_scalars, "status": statuses},
                                   optional={"extra": json_scalars, "0": json_scalars})
             | json_values)
todo_lists = st.lists(st.one_of(*[valid_items] * 6, odd_items), max_size=5)
todo_arguments = st.fixed_dictionaries({"todos": todo_lists}, optional={"extra": json_values})
arguments = st.one_of(*[todo_arguments] * 4, st.fixed_dictionaries({"todos": json_values}), json_values)


def js_trim(text: str) -> str:
    return text.strip(JS_SPACE)


def check_outcome(result: Any, agent: Agent, allow_parallel: bool) -> None:
    if result.is_error:
        assert result.text.startswith(FAMILIES), result.text
        assert result.value is None
        assert agent.session.seq == 0
        if result.text.startswith("Error: invalid arguments: "):
            assert result.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
        else:
            assert result.error is None
        return
    assert result.error is None
    events = list(agent.session.events)
    assert [e["type"] for e in events] == ["todo/write"]
    logged = events[0]["data"]
    check_todos(logged)  # every list the tool accepts passes the invariant companion
    todos = result.value["todos"]
    assert logged == {"todos": todos}
    counts = {"pending": 0, "inProgress": 0, "completed": 0}
    for entry in todos:
        assert list(entry) == ["content", "status"]
        counts[{"pending": "pending", "in_progress": "inProgress", "completed": "completed"}[entry["status"]]] += 1
    assert result.value["counts"] == counts
    assert result.text == (f"Updated todo list: {counts['pending']} pending, {counts['inProgress']} in progress, "
                           f"{counts['completed']} completed.")
    if not allow_parallel:
        assert counts["inProgress"] <= 1


@PROPERTY_SETTINGS
@given(args=json_values, allow_parallel=st.booleans())
def test_any_json_value_gets_a_stable_answer(args: Any, allow_parallel: bool) -> None:
    result, agent = run(context(allow_parallel), args)
    check_outcome(result, agent, allow_parallel)


def check_oracle(args: Any, result: Any, allow_parallel: bool) -> None:
    """An independent model of SPEC §2's order: lossless, then the schema, then the value rules, in list order."""
    definition = context(allow_parallel).tools.get("todo_write")
    assert definition is not None
    if not is_lossless(args):
        assert result.text == FAMILIES[3]
        return
    if definition.validate(args):
        assert result.text.startswith(FAMILIES[0])
        return
    expected: str | None = None
    seen: set[str] = set()
    for item in args["todos"]:
        trimmed = js_trim(item["content"])
        if not trimmed:
            expected = "Error: invalid todo: `content` must be a non-empty string"
            break
        if trimmed in seen:
            expected = "Error: invalid todos: duplicate content "
            break
        seen.add(trimmed)
    active = sum(item["status"] == "in_progress" for item in args["todos"])
    if expected is None and not allow_parallel and active > 1:
        expected = f"Error: invalid todos: at most one task may be in_progress (got {active})"
    if expected is None:
        assert not result.is_error, result.text
        assert result.value["todos"] == [{"content": js_trim(i["content"]), "status": i["status"]}
                                         for i in args["todos"]]
    else:
        assert result.text.startswith(expected), (result.text, expected)


@PROPERTY_SETTINGS
@given(args=arguments, allow_parallel=st.booleans())
def test_todo_shaped_arguments_match_an_independent_oracle(args: Any, allow_parallel: bool) -> None:
    result, agent = run(context(allow_parallel), args)
    check_outcome(result, agent, allow_parallel)
    check_oracle(args, result, allow_parallel)


@PROPERTY_SETTINGS
@given(args=arguments | json_values)
def test_the_judge_agrees_with_the_lossless_check_and_the_full_validator(args: Any) -> None:
    """The generated judge (decision 0045) says what its plain twins say: ``None`` for lossy arguments, else every
    violation (``()`` for none)."""
    definition = context(True).tools.get("todo_write")
    assert definition is not None and definition.judge is not None
    judged = definition.judge(args)
    assert (None if judged is None else list(judged)) == (definition.validate(args) if is_lossless(args) else None)


@PROPERTY_SETTINGS
@given(todos=st.lists(valid_items, max_size=6), allow_parallel=st.booleans())
def test_valid_shaped_lists_follow_the_value_rules_and_replay(
        todos: list[dict[str, Any]], allow_parallel: bool) -> None:
    ctx = context(allow_parallel)
    result, agent = run(ctx, {"todos": todos})
    check_outcome(result, agent, allow_parallel)
    check_oracle({"todos": todos}, result, allow_parallel)
    if not result.is_error:
        assert ctx.session_projections.snapshot(agent.session)["values"]["todos"] == result.value["todos"]


@PROPERTY_SETTINGS
@given(args=arguments)
def test_without_an_agent_nothing_succeeds(args: Any) -> None:
    ctx = context(True)
    result = asyncio.run(ctx.tools.execute("todo_write", args))
    assert result.is_error
    assert result.text.startswith((*FAMILIES, "Error: todo_write requires an owning agent session"))
