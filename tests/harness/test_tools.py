"""The tool registry and its schema DSL (SPEC §1.2, §2.1, §3.2), independent of the todo tool's rules."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dsh_todo.harness import Context
from dsh_todo.harness.errors import HarnessError, ToolArgsError
from dsh_todo.harness.frozen import FrozenDict, lossless_copy
from dsh_todo.harness.tools import ToolExecution, ToolRegistry, ToolResult, define_tool, error_result
from dsh_todo.harness.tools.schema import SchemaAuthorError, compile_parameters, compile_value
from dsh_todo.harness.tools.speed import compile_acceptor, compile_judge
from dsh_todo.harness.tools.validate import violations
from dsh_todo.jsonutil import dumps
from tests.conftest import BootFactory

pytestmark = pytest.mark.anyio


def echo_tool(name: str = "echo", **overrides: Any) -> Any:
    spec: dict[str, Any] = {
        "name": name, "description": "echo",
        "parameters": {"n": {"type": "integer", "required": True}, "tag": {"type": "string"}},
        "execute": lambda args, call: {"n": args["n"]},
        "render": lambda args, value: f"n={value['n']}",
    }
    spec.update(overrides)
    return define_tool(**spec)


# -- the schema DSL ------------------------------------------------------------------------------------------------

def test_root_is_open_and_required_is_lifted_in_declaration_order() -> None:
    compiled = compile_parameters({"b": {"type": "string", "required": True}, "a": {"type": "integer"},
                                   "c": {"type": "boolean", "required": True}})
    assert dumps(compiled) == ('{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"},'
                               '"c":{"type":"boolean"}},"required":["b","c"]}')


def test_required_is_omitted_when_nothing_is_required() -> None:
    assert compile_parameters({"a": {"type": "string"}}) == {"type": "object", "properties": {"a": {"type": "string"}}}


def test_emitted_key_order_per_node_kind() -> None:
    # Author keys in a scrambled order; the compiled node uses the fixed order of SPEC §3.2.
    node = compile_value({
        "properties": {"x": {"enum": ["a"], "examples": ["a"], "type": "string", "title": "X", "description": "d",
                             "default": "a", "required": True}},
        "additionalProperties": False, "description": "obj", "type": "object"})
    assert dumps(node) == ('{"type":"object","description":"obj","additionalProperties":false,"properties":{"x":'
                           '{"type":"string","description":"d","title":"X","default":"a","examples":["a"],'
                           '"enum":["a"]}},"required":["x"]}')
    array = compile_value({"items": {"type": "null"}, "title": "t", "type": "array"})
    assert list(array) == ["type", "title", "items"]


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param({"type": "string", "x": 1}, "schema.x is not supported by the value schema DSL", id="unknown-key"),
    pytest.param({"type": "object", "properties": {}}, "schema.additionalProperties must be given as true or false",
                 id="object-without-additional-properties"),
    pytest.param({"type": "array"}, "schema.items is required on an array", id="array-without-items"),
    pytest.param({"type": "date"}, "schema.type 'date' is not supported by the value schema DSL", id="unknown-type"),
    pytest.param({"type": "object", "additionalProperties": False,
                  "properties": {"a": {"type": "string", "required": "yes"}}},
                 "schema.properties.a.required must be true when present", id="required-not-true"),
    pytest.param({"type": "string", "required": True}, "schema.required is only allowed on a property",
                 id="required-outside-properties"),
])
def test_author_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SchemaAuthorError) as caught:
        compile_value(spec)
    assert str(caught.value) == message


# -- the validator on other node kinds -----------------------------------------------------------------------------

@pytest.mark.parametrize(("node", "value", "expected"), [
    pytest.param({"type": "integer"}, 1.5, ['"v" must be an integer'], id="integer"),
    pytest.param({"type": "integer"}, True, ['"v" must be an integer'], id="bool-is-not-an-integer"),
    pytest.param({"type": "integer"}, 2.0, [], id="integral-float"),
    pytest.param({"type": "number"}, "1", ['"v" must be a number'], id="number"),
    pytest.param({"type": "boolean"}, 0, ['"v" must be a boolean'], id="boolean"),
    pytest.param({"type": "null"}, 0, ['"v" must be null'], id="null"),
    pytest.param({"type": "string", "const": "x"}, "y", ['"v" must equal "x"'], id="const"),
    pytest.param({"type": "integer", "enum": [1, 2]}, True, ['"v" must be an integer'], id="enum-bool"),
    pytest.param({"type": "string", "enum": ["a", "b"]}, "c", ['"v" must be one of ["a","b"]'], id="enum-string"),
    pytest.param({"type": "integer", "enum": [1, 2]}, 2.0, ['"v" must be one of [1,2]'], id="enum-float-is-not-2"),
    pytest.param({"type": "boolean", "enum": [True]}, False, ['"v" must be one of [true]'], id="enum-boolean"),
    pytest.param({"type": "array", "items": {"type": "string"}}, ["a", 1, None],
                 ['"v[1]" must be a string', '"v[2]" must be a string'], id="array-items"),
])
def test_validator_texts(node: dict[str, Any], value: Any, expected: list[str]) -> None:
    schema = compile_parameters({"v": {**node, "required": True}})
    assert violations(schema, {"v": value}) == expected
    assert compile_acceptor(schema)({"v": value}) is (expected == [] and type(value) is not float)


def test_acceptor_is_conservative_on_tricky_values() -> None:
    class Text(str):
        pass

    schema = compile_parameters({"s": {"type": "string", "required": True, "enum": ["a"]},
                                 "i": {"type": "integer"}})
    accept = compile_acceptor(schema)
    assert accept({"s": "a"})
    assert accept({"s": "a", "extra": [1, "x", None]})
    assert not accept({"s": "a", "extra": -0.0})
    assert not accept({"s": "a", "extra": float("nan")})
    assert not accept({"s": Text("a")})
    assert not accept({"s": "a", "i": True})
    assert not accept(FrozenDict(s="a"))  # not a plain dict: the full validator decides
    assert violations(schema, FrozenDict(s="a")) == []


@pytest.mark.parametrize("value", [
    {"a": "x", "b": None, "c": {"d": 1}},
    {"a": "x", "b": None},
    {"a": "x", "b": None, "c": {"d": 1}, "e": 2},
    {"a": "x", "b": None, "e": {"d": 1}},
    {"a": "x", "e": None, "c": {"d": 1}},
    {"a": None, "b": None, "c": {"d": 1}},
    {"a": "x", "b": 0, "c": {"d": 1}},
    {"a": "x", "b": None, "c": []},
    {"a": "x", "b": None, "c": {"d": 1, "f": 2}},
    {"a": "x", "b": None, "c": {}},
])
def test_acceptor_on_objects_with_exactly_their_declared_keys_agrees_with_the_validator(value: Any) -> None:
    """Closed objects whose every property is required are accepted on their length and each key's own test."""
    node = {"type": "object", "additionalProperties": False, "required": True,
            "properties": {"a": {"type": "string", "required": True}, "b": {"type": "null", "required": True},
                           "c": {"type": "object", "additionalProperties": False, "required": True,
                                 "properties": {"d": {"type": "integer", "required": True}}}}}
    schema = compile_parameters({"v": node})
    assert compile_acceptor(schema)({"v": value}) is (violations(schema, {"v": value}) == [])


class _Text(str):
    pass


_REFUSAL_SCHEMAS = [
    {"todos": {"type": "array", "required": True, "items": {
        "type": "object", "additionalProperties": False,
        "properties": {"content": {"type": "string", "required": True},
                       "status": {"type": "string", "required": True, "enum": ["pending", "completed"]}}}}},
    {"n": {"type": "integer", "required": True}, "x": {"type": "number"}, "tag": {"type": "string", "const": "t"},
     "open": {"type": "object", "additionalProperties": True, "properties": {"a": {"type": "boolean"}}},
     "free": {"type": "json", "description": "no type: anything JSON"}},
]
_TRICKY = [None, True, 0, 1.5, -0.0, float("nan"), float("inf"), "s", _Text("s"), (1,), {1, 2}, object(), [], {},
           {"a": True}, {1: "x"}, {"b": -0.0}, ["pending"], FrozenDict(a=True)]


def _args_grid() -> list[Any]:
    item = {"content": "a", "status": "pending"}
    grid: list[Any] = [None, [], "x", {}, {1: "x"}, FrozenDict(n=1), {"todos": [item, item]}]
    for value in _TRICKY:
        grid += [{"todos": [item, value]}, {"todos": [{"content": value, "status": "done"}]},
                 {"todos": [{"content": "a", "status": value}]}, {"todos": [{**item, "x": value}]},
                 {"todos": value}, {"todos": [item], "extra": value}, {"todos": [{"status": "x"}, value]},
                 {"n": value}, {"n": 1, "x": value}, {"n": 1, "tag": value}, {"n": 1, "open": {"k": value}},
                 {"n": 1, "open": {"a": value}}, {"n": 1, "free": value}, {"n": 1, "free": [value]},
                 {"n": "1", "free": {"k": value}}, {"n": value, "x": value, "q": value}]
    return grid


@pytest.mark.parametrize("parameters", _REFUSAL_SCHEMAS, ids=["closed-items", "open-and-untyped"])
def test_a_refusal_answers_what_the_lossless_check_then_the_validator_would(parameters: dict[str, Any]) -> None:
    """``refuse`` is one walk (decision 0031) for two answers whose order is the contract: arguments that are not
    lossless JSON are refused for that alone, whatever else is wrong; otherwise every violation, in order."""
    from dsh_todo.harness.frozen import is_lossless
    from dsh_todo.harness.tools.validate import compile_refusal

    schema = compile_parameters(parameters)
    refuse = compile_refusal(schema)
    for args in _args_grid():
        expected = violations(schema, args) if is_lossless(args) else None
        assert refuse(args) == expected, args


_NESTED_SCHEMA = {
    "rows": {"type": "array", "required": True, "items": {"type": "array", "items": {
        "type": "object", "additionalProperties": False,
        "properties": {"a": {"type": "string", "required": True}, "b": {"type": "integer", "enum": [1, 2]}}}}},
    "tags": {"type": "array", "items": {"type": "object", "additionalProperties": True,
                                        "properties": {"k": {"type": "string", "const": "t"}}}},
    "last": {"type": "boolean", "required": True},
}


def _nested_grid() -> list[Any]:
    row = {"a": "x", "b": 1}
    grid: list[Any] = []
    for value in _TRICKY:
        grid += [{"rows": [[row, value]], "last": True}, {"rows": [[row], [{**row, "b": value}]], "last": value},
                 {"rows": [[row]], "tags": [{}, {"k": value}, value], "last": True},
                 {"rows": [[row]], "tags": [{"k": "t"}, {"j": value}], "last": False},
                 {"rows": value, "tags": [value], "last": 1}, {"rows": [[row]], "last": True, "z": value}]
    return grid


@pytest.mark.parametrize(("parameters", "grid"), [*((schema, _args_grid) for schema in _REFUSAL_SCHEMAS),
                                                  (_NESTED_SCHEMA, _nested_grid)],
                         ids=["closed-items", "open-and-untyped", "nested-arrays"])
def test_the_judge_answers_what_the_acceptor_then_the_refusal_would(
        parameters: dict[str, Any], grid: Any) -> None:
    """The registry asks one generated walk (decision 0031) instead of the acceptor then the refusal: ``()`` for
    what the acceptor passes, else the refusal's answer (``None`` for lossy, every violation in order), whether
    the walk resumes inside an array, inside a loop within a loop, or starts the refusal afresh."""
    from dsh_todo.harness.frozen import is_lossless
    from dsh_todo.harness.tools.validate import compile_refusal

    schema = compile_parameters(parameters)
    accept, refuse, judge = compile_acceptor(schema), compile_refusal(schema), compile_judge(schema)
    for args in grid():
        expected = () if accept(args) else violations(schema, args) if is_lossless(args) else None
        assert judge(args) == expected, args
        assert expected == () or refuse(args) == expected, args


def test_the_judge_resumes_at_the_refused_item_and_names_every_one_after_it() -> None:
    """The judge's walk resumes at the item refused, found by identity among the items (the same object may come
    more than once), and says every refused item after it, in order, each once."""
    schema = compile_parameters(_REFUSAL_SCHEMAS[0])

    judge = compile_judge(schema)
    item, bad = {"content": "a", "status": "pending"}, {"content": "a", "status": "done"}
    assert judge({"todos": [item, item, dict(bad)]}) == ['"todos[2].status" must be one of ["pending","completed"]']
    assert judge({"todos": [item, bad, dict(item), bad, {"status": 1}]}) == [
        '"todos[1].status" must be one of ["pending","completed"]',
        '"todos[3].status" must be one of ["pending","completed"]',
        'missing required property "todos[4].content"', '"todos[4].status" must be a string']
    assert judge({"todos": [item, bad], "extra": float("nan")}) is None


def test_the_acceptor_refuses_a_key_that_is_not_a_string() -> None:
    """An open object's undeclared values were checked lossless, but not their keys: ``{1: "x"}`` was accepted, and
    the lossless check it skipped would have refused it."""
    schema = compile_parameters({"n": {"type": "integer"}})
    assert compile_acceptor(schema)({"n": 1, "k": "x"})
    assert not compile_acceptor(schema)({"n": 1, 2: "x"})


async def test_a_refused_call_says_lossless_first_then_every_violation() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())
    lossy = await registry.execute("echo", {"n": "x", "tag": 1, "z": float("nan")})
    assert lossy.text == "Error: tool execution arguments must be losslessly JSON-serializable"
    assert lossy.is_error and lossy.error is None
    wrong = await registry.execute("echo", {"n": "x", "tag": 1, 2: "y"})
    assert wrong.text == "Error: tool execution arguments must be losslessly JSON-serializable"
    both = await registry.execute("echo", {"n": "x", "tag": 1})
    assert both.text == 'Error: invalid arguments: "n" must be an integer; "tag" must be a string'
    assert both.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}


# -- the registry --------------------------------------------------------------------------------------------------

def test_register_schemas_and_change_events() -> None:
    registry = ToolRegistry()
    changes: list[list[str]] = []
    registry.on_change(lambda: changes.append(registry.names()))
    unregister = registry.register(echo_tool())
    assert registry.schemas() == [{"name": "echo", "description": "echo", "parameters": echo_tool().parameters}]
    with pytest.raises(ValueError) as caught:
        registry.register(echo_tool())
    assert str(caught.value) == 'tool "echo" is already registered'
    unregister()
    unregister()
    assert changes == [["echo"], []]


def test_a_failing_change_listener_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry()
    heard: list[int] = []

    def broken() -> None:
        raise RuntimeError("bug")

    registry.on_change(broken)
    registry.on_change(lambda: heard.append(1))
    with caplog.at_level(logging.WARNING, logger="dsh_todo.tools"):
        registry.register(echo_tool())
    assert heard == [1]
    assert any("tools/change listener failed" in r.getMessage() for r in caplog.records)


def test_todo_write_is_exclusive(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    assert ctx.tools.scheduling("todo_write") == "exclusive"
    definition = ctx.tools.get("todo_write")
    assert definition is not None and definition.concurrency_safe is False


async def test_unknown_tool() -> None:
    result = await ToolRegistry().execute("nope", {})
    assert result == ToolResult(True, [{"type": "text", "text": 'Error: unknown tool "nope"'}], None,
                                {"name": "ToolNotFoundError", "code": "NOT_FOUND"})


async def test_execute_pipeline_results() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())
    ok = await registry.execute("echo", {"n": 3, "other": "ignored"})
    assert ok == ToolResult(False, [{"type": "text", "text": "n=3"}], {"n": 3}, None)
    assert ok.text == "n=3"
    bad = await registry.execute("echo", {"n": "3", "tag": 1})
    assert bad.text == 'Error: invalid arguments: "n" must be an integer; "tag" must be a string'
    assert bad.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    frozen = await registry.execute("echo", lossless_copy({"n": 4}))
    assert frozen.value == {"n": 4}


async def test_body_failures_become_error_results() -> None:
    def plain(args: Any, call: ToolExecution) -> Any:
        raise ValueError("plain failure")

    def classified(args: Any, call: ToolExecution) -> Any:
        raise HarnessError("classified failure", name="CustomError", code="CUSTOM")

    def args_error(args: Any, call: ToolExecution) -> Any:
        raise ToolArgsError("invalid arguments: from the body")

    registry = ToolRegistry()
    registry.register(echo_tool("plain", execute=plain))
    registry.register(echo_tool("classified", execute=classified))
    registry.register(echo_tool("args", execute=args_error))
    assert await registry.execute("plain", {"n": 1}) == error_result("plain failure")
    assert (await registry.execute("classified", {"n": 1})).error == {"name": "CustomError", "code": "CUSTOM"}
    assert (await registry.execute("args", {"n": 1})).error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}


async def test_async_bodies_and_the_execution_record() -> None:
    seen: list[ToolExecution] = []

    async def body(args: Any, call: ToolExecution) -> Any:
        seen.append(call)
        return {"n": args["n"] * 2}

    registry = ToolRegistry()
    registry.register(echo_tool(execute=body))
    result = await registry.execute("echo", {"n": 2}, agent="the-agent", call_id="c1")
    assert result.text == "n=4"
    assert seen == [ToolExecution("the-agent", None, "c1")]


def test_tools_service_through_the_context() -> None:
    import dsh_todo.harness.tools as tools_plugin

    ctx = Context()
    handle = ctx.plugin(tools_plugin)
    assert isinstance(ctx.tools, ToolRegistry)
    handle.dispose()
    assert not ctx.has("tools")


@pytest.mark.anyio
async def test_arguments_nested_past_the_recursion_limit_are_answered(make_ctx: BootFactory) -> None:
    """Repro (issue 13 item 2): ``arguments`` nested about 330 levels made the lossless walk raise RecursionError, so
    the registry raised instead of answering (an MCP client got error code 0 and a traceback on stderr)."""
    from dsh_todo.harness import Agent

    ctx = make_ctx(allow_parallel=True)
    agent = Agent("deep", ctx.sessions.create("deep"))
    deep: Any = 1
    for _ in range(2000):
        deep = {"a": [deep]}
    result = await ctx.tools.execute("todo_write", {"todos": [], "x": deep}, agent)
    assert result.text == "Updated todo list: 0 pending, 0 in progress, 0 completed."
    bad: Any = float("inf")
    for _ in range(2000):
        bad = [bad]
    result = await ctx.tools.execute("todo_write", {"todos": [], "x": bad}, agent)
    assert result.text == "Error: tool execution arguments must be losslessly JSON-serializable"
