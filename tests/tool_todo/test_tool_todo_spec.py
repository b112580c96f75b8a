"""Port of the reference's ``tool-todo.spec.ts`` (SPEC §11.1): the tool through ``ctx.tools.execute``."""

from __future__ import annotations

import pytest

import dsh_todo.tool_todo as tool_todo_module
from dsh_todo.harness import Agent, Context
from dsh_todo.harness.loader import check_plugin_shape, resolve
from dsh_todo.tool_todo.description import PARALLEL, SINGLE
from tests.conftest import BootFactory, composition, todo_writes

pytestmark = pytest.mark.anyio


def item(content: str, status: str) -> dict[str, str]:
    return {"content": content, "status": status}


def agent_for(ctx: Context, agent_id: str = "writer") -> Agent:
    return Agent(agent_id, ctx.sessions.create(agent_id))


async def test_schema_shape(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    schemas = {schema["name"]: schema for schema in ctx.tools.schemas()}
    assert "todo_write" in schemas
    params = schemas["todo_write"]["parameters"]
    assert list(params["properties"]) == ["todos"]
    todos = params["properties"]["todos"]
    assert todos["type"] == "array"
    assert sorted(todos["items"]["properties"]) == ["content", "status"]
    assert todos["items"]["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert set(schemas["todo_write"]) == {"name", "description", "parameters"}


async def test_appends_the_list_and_returns_the_canonical_value(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    todos = [item("plan", "in_progress"), item("build", "pending")]
    result = await ctx.tools.execute("todo_write", {"todos": todos}, agent=agent)
    assert result.is_error is False
    assert result.error is None
    assert result.value == {"todos": todos, "counts": {"pending": 1, "inProgress": 1, "completed": 0}}
    assert "1 pending, 1 in progress, 0 completed" in result.text
    assert result.text == "Updated todo list: 1 pending, 1 in progress, 0 completed."
    assert result.content == [{"type": "text", "text": result.text}]
    assert todo_writes(agent.session)[-1] == todos


async def test_trims_content_before_logging(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    result = await ctx.tools.execute("todo_write", {"todos": [item("  plan the work  ", "pending")]}, agent=agent)
    assert not result.is_error
    assert todo_writes(agent.session) == [[item("plan the work", "pending")]]
    assert result.value["todos"] == [item("plan the work", "pending")]


async def test_each_call_replaces_the_whole_list(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    await ctx.tools.execute("todo_write", {"todos": [item("a", "pending")]}, agent=agent)
    second = [item("a", "completed"), item("b", "in_progress")]
    await ctx.tools.execute("todo_write", {"todos": second}, agent=agent)
    writes = todo_writes(agent.session)
    assert len(writes) == 2
    assert writes[-1] == second


async def test_bad_status_is_rejected_before_execute(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    result = await ctx.tools.execute("todo_write", {"todos": [item("x", "doing")]}, agent=agent)
    assert result.is_error
    assert result.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert agent.session.seq == 0


async def test_non_array_todos_is_an_error(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    result = await ctx.tools.execute("todo_write", {"todos": "nope"}, agent=agent)
    assert result.is_error
    assert agent.session.seq == 0


async def test_parallel_in_progress_allowed(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    todos = [item("run subagent a", "in_progress"), item("run subagent b", "in_progress"), item("merge", "pending")]
    result = await ctx.tools.execute("todo_write", {"todos": todos}, agent=agent)
    assert not result.is_error
    assert result.value["counts"] == {"pending": 1, "inProgress": 2, "completed": 0}
    assert todo_writes(agent.session) == [todos]


PARALLEL_PAIR = [item("run subagent a", "in_progress"), item("run subagent b", "in_progress")]


async def test_parallel_in_progress_refused_under_single_active(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=False)
    agent = agent_for(ctx)
    result = await ctx.tools.execute("todo_write", {"todos": PARALLEL_PAIR}, agent=agent)
    assert result.is_error
    assert "at most one task may be in_progress" in result.text
    assert result.text == "Error: invalid todos: at most one task may be in_progress (got 2)"
    assert result.error is None
    assert todo_writes(agent.session) == []


async def test_single_active_accepted_under_single_active(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=False)
    agent = agent_for(ctx)
    todos = [item("one", "in_progress"), item("two", "pending")]
    result = await ctx.tools.execute("todo_write", {"todos": todos}, agent=agent)
    assert not result.is_error
    assert todo_writes(agent.session) == [todos]


async def test_same_parallel_list_succeeds_under_the_other_config(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    result = await ctx.tools.execute("todo_write", {"todos": PARALLEL_PAIR}, agent=agent)
    assert not result.is_error
    assert todo_writes(agent.session) == [PARALLEL_PAIR]


async def test_description_follows_the_config(make_ctx: BootFactory) -> None:
    single = make_ctx(allow_parallel=False).tools.get("todo_write")
    parallel = make_ctx(allow_parallel=True).tools.get("todo_write")
    assert single is not None and parallel is not None
    # SPEC §11 test 11: the two texts differ in the policy clause alone, and a test tells them apart by it.
    assert SINGLE in single.description and PARALLEL not in single.description
    assert PARALLEL in parallel.description and SINGLE not in parallel.description
    assert parallel.description.replace(PARALLEL, SINGLE) == single.description


@pytest.mark.parametrize(("todos", "fragment"), [
    pytest.param([item("   ", "pending")], "non-empty", id="blank-content"),
    pytest.param([item("dup", "pending"), item("dup", "completed")], "duplicate", id="duplicate"),
    pytest.param([{"content": "a", "status": "pending", "children": []}], "not a declared property",
                 id="undeclared-key"),
])
async def test_rejects_as_an_is_error_result(make_ctx: BootFactory, todos: list[object], fragment: str) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = agent_for(ctx)
    result = await ctx.tools.execute("todo_write", {"todos": todos}, agent=agent)
    assert result.is_error
    assert fragment in result.text
    assert result.text.startswith("Error: ")
    assert agent.session.seq == 0


async def test_a_call_without_an_agent_is_refused(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    result = await ctx.tools.execute("todo_write", {"todos": [item("a", "pending")]})
    assert result.is_error
    assert "owning agent session" in result.text
    assert result.text == "Error: todo_write requires an owning agent session"
    assert result.error is None
    assert result.value is None


async def test_present_call(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    definition = ctx.tools.get("todo_write")
    assert definition is not None
    todos = [item("a", "pending")]
    assert definition.present({"todos": todos}) == {
        "card": "generic", "title": "Update todo list", "kind": "other", "rawInput": todos}


async def test_present_call_keeps_the_raw_untrimmed_list_and_ignores_extra_top_level_keys(
        make_ctx: BootFactory) -> None:
    definition = make_ctx(allow_parallel=True).tools.get("todo_write")
    assert definition is not None
    todos = [item(" a ", "pending")]
    view = definition.present({"todos": todos, "extra": 1})
    assert view == {"card": "generic", "title": "Update todo list", "kind": "other", "rawInput": todos}


@pytest.mark.parametrize("arguments", [
    pytest.param({"todos": [item("x", "doing")]}, id="bad-status"),
    pytest.param({"todos": "nope"}, id="todos-not-array"),
    pytest.param({}, id="todos-missing"),
    pytest.param([], id="not-an-object"),
    pytest.param("{\"todos\": [", id="raw-string"),
])
async def test_present_call_soft_validation_falls_back_to_the_generic_card(
        make_ctx: BootFactory, arguments: object) -> None:
    definition = make_ctx(allow_parallel=True).tools.get("todo_write")
    assert definition is not None
    assert definition.present(arguments) is None


async def test_hmr_disposing_the_plugin_unregisters_the_tool() -> None:
    ctx = Context()
    for row in composition(tool=False):
        ctx.plugin(resolve(row["name"]), row.get("config"))
    fiber = ctx.plugin(tool_todo_module, {"allowParallelInProgress": True})
    assert "todo_write" in [schema["name"] for schema in ctx.tools.schemas()]
    fiber.dispose()
    assert "todo_write" not in [schema["name"] for schema in ctx.tools.schemas()]
    ctx.dispose()


def test_export_shape() -> None:
    module = tool_todo_module
    assert not hasattr(module, "default")
    assert "default" not in vars(module)
    assert module.name == "tool-todo"
    assert module.inject == ["tools"]
    assert callable(module.apply)
    # The loader takes the module as it is: it neither refuses nor unwraps it.
    check_plugin_shape(module)
    ctx = Context()
    handle = ctx.plugin(module, {"allowParallelInProgress": True})
    assert handle.plugin is module
    ctx.dispose()
