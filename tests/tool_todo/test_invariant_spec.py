"""Port of ``invariant.spec.ts`` (SPEC §11.3) and the exact companion texts of SPEC §7 and §2.4."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

import dsh_todo.harness.invariants as invariants_plugin
import dsh_todo.tool_todo.invariant as todo_invariant
from dsh_todo.harness import Agent, Context, boot
from dsh_todo.harness.errors import BootError, InvariantError
from dsh_todo.harness.invariants import InvariantViolation
from dsh_todo.tool_todo import build_tool
from dsh_todo.tool_todo.invariant import check_todos
from tests.conftest import INVARIANTS, TODO_INVARIANT, BootFactory, todo_writes

pytestmark = pytest.mark.anyio

PREFIX = 'invariant violated by "@deepseek-ai/dsh-tool-todo": '
SESSION_PREFIX = 'invariant violated by "@deepseek-ai/dsh-session": '


def item(content: Any, status: Any = "pending") -> dict[str, Any]:
    return {"content": content, "status": status}


def guarded(make_ctx: BootFactory, **kwargs: Any) -> Context:
    return make_ctx(invariants={"enabled": True}, todo_invariant=True, **kwargs)


async def test_parallel_history_is_accepted_under_a_single_active_policy(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=False)
    session = ctx.sessions.create("s")
    parallel = [item("a", "in_progress"), item("b", "in_progress"), item("c"), item("d", "completed")]
    session.append("todo/write", {"todos": parallel})
    ctx.plugin(invariants_plugin, {"enabled": True})
    companion = ctx.plugin(todo_invariant)
    assert companion.active
    session.append("todo/write", {"todos": parallel})
    assert todo_writes(session) == [parallel, parallel]


BAD_TODOS: list[Any] = [
    pytest.param({"todos": "not-an-array"}, "todo/write todos must be an array", id="string"),
    pytest.param({"todos": None}, "todo/write todos must be an array", id="null"),
    pytest.param({"todos": {"0": item("a")}}, "todo/write todos must be an array", id="object"),
    pytest.param({}, "todo/write todos must be an array", id="todos-key-missing"),
    pytest.param([], "todo/write todos must be an array", id="data-not-an-object"),
    pytest.param({"todos": [None]}, "todo/write entries must be objects", id="null-item"),
    pytest.param({"todos": [42]}, "todo/write entries must be objects", id="number-item"),
    pytest.param({"todos": ["a"]}, "todo/write entries must be objects", id="string-item"),
    pytest.param({"todos": [[]]}, "todo/write content must be non-empty and already trimmed",
                 id="array-item-passes-object-check"),
    pytest.param({"todos": [item(42)]}, "todo/write content must be non-empty and already trimmed",
                 id="content-number"),
    pytest.param({"todos": [{"status": "pending"}]}, "todo/write content must be non-empty and already trimmed",
                 id="content-missing"),
    pytest.param({"todos": [item("")]}, "todo/write content must be non-empty and already trimmed",
                 id="content-empty"),
    pytest.param({"todos": [item(" padded ")]}, "todo/write content must be non-empty and already trimmed",
                 id="content-padded"),
    pytest.param({"todos": [item("\ufeffbom")]}, "todo/write content must be non-empty and already trimmed",
                 id="content-bom"),
    pytest.param({"todos": [item("same"), item("same", "completed")]}, 'todo/write repeats content "same"',
                 id="repeat"),
    pytest.param({"todos": [item('q"x'), item('q"x')]}, 'todo/write repeats content "q\\"x"', id="repeat-quoted"),
    pytest.param({"todos": [item("task", 42)]}, "todo/write carries unknown status 42", id="status-number"),
    pytest.param({"todos": [item("task", "paused")]}, 'todo/write carries unknown status "paused"',
                 id="status-paused"),
    pytest.param({"todos": [item("task", None)]}, "todo/write carries unknown status null", id="status-null"),
    pytest.param({"todos": [item("task", True)]}, "todo/write carries unknown status true", id="status-bool"),
    pytest.param({"todos": [item("task", ["pending"])]}, 'todo/write carries unknown status ["pending"]',
                 id="status-array"),
    pytest.param({"todos": [{"content": "task"}]}, "todo/write carries unknown status undefined",
                 id="status-missing"),
    pytest.param({"todos": [item("ok"), item(" bad")]}, "todo/write content must be non-empty and already trimmed",
                 id="second-item"),
    pytest.param({"todos": [item("same", "paused"), item("same")]}, 'todo/write carries unknown status "paused"',
                 id="per-item-order-status-before-later-repeat"),
    pytest.param({"todos": [item("same"), item("same", "paused")]}, 'todo/write repeats content "same"',
                 id="repeat-before-status-of-same-item"),
]


@pytest.mark.parametrize(("data", "text"), BAD_TODOS)
async def test_bad_writes_are_vetoed_with_the_exact_text(make_ctx: BootFactory, data: Any, text: str) -> None:
    ctx = guarded(make_ctx)
    session = ctx.sessions.create("s")
    with pytest.raises(InvariantError) as caught:
        session.append("todo/write", data)
    assert str(caught.value) == PREFIX + text
    assert caught.value.package_name == "@deepseek-ai/dsh-tool-todo"
    assert caught.value.info() == {"name": "InvariantError", "code": "INVARIANT"}
    assert session.seq == 0


@pytest.mark.parametrize(("data", "text"), BAD_TODOS)
def test_check_todos_alone(data: Any, text: str) -> None:
    with pytest.raises(InvariantViolation) as caught:
        check_todos(data)
    assert str(caught.value) == text


@pytest.mark.parametrize("data", [
    pytest.param({"todos": []}, id="empty-list"),
    pytest.param({"todos": [{"content": "a", "status": "pending", "extra": 1}]}, id="extra-item-key"),
    pytest.param({"todos": [item("a", "in_progress"), item("b", "in_progress")]}, id="parallel"),
    pytest.param({"todos": [item("\u0085nel"), item("\x1cfs")]}, id="js-keeps-nel-and-fs"),
    pytest.param({"todos": [item("a"), item("A")]}, id="case-sensitive"),
    pytest.param({"todos": [item("x")], "extra": True}, id="extra-data-key"),
])
async def test_accepted_writes(make_ctx: BootFactory, data: Any) -> None:
    ctx = guarded(make_ctx)
    session = ctx.sessions.create("s")
    session.append("todo/write", data)
    check_todos(data)
    assert session.seq == 1


async def test_ignores_other_events(make_ctx: BootFactory) -> None:
    ctx = guarded(make_ctx)
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("custom/x", {"todos": "not-an-array"})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    # A tools/change (a tool registered while the companion is live) does not reach it either.
    changes: list[int] = []
    ctx.tools.on_change(lambda: changes.append(1))
    other = SimpleNamespace(name="other", inject=["tools"],
                            apply=lambda c: c.tools.register(replace(build_tool(True), name="other_tool")))
    handle = ctx.plugin(other)
    assert handle.active
    assert changes == [1]
    assert session.seq == 3


async def test_late_registration_checks_the_existing_history(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": [item("duplicate"), item("duplicate", "completed")]})
    ctx.plugin(invariants_plugin, {"enabled": True})
    with pytest.raises(InvariantError) as caught:
        ctx.plugin(todo_invariant)
    assert str(caught.value) == PREFIX + 'todo/write repeats content "duplicate"'
    # The failed registration left nothing behind: the package is free and appends are not checked.
    assert "@deepseek-ai/dsh-tool-todo" not in ctx.invariants.packages()
    session.append("todo/write", {"todos": [item("x"), item("x")]})
    # The failed companion does not retry (and fail again) when the plugin tree changes later.
    ctx.plugin(SimpleNamespace(name="late-service", inject=[], apply=lambda c: c.provide("late", object())))
    assert "@deepseek-ai/dsh-tool-todo" not in ctx.invariants.packages()


async def test_late_registration_through_the_loader_names_the_row(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": [item("duplicate"), item("duplicate", "completed")]})
    with pytest.raises(BootError) as caught:
        boot([{"id": "inv", "name": INVARIANTS, "config": {"enabled": True}},
              {"id": "todo-inv", "name": TODO_INVARIANT}], ctx)
    message = str(caught.value)
    assert message.startswith('composition row "todo-inv" (@deepseek-ai/dsh-tool-todo/invariant): ')
    assert message.endswith(PREFIX + 'todo/write repeats content "duplicate"')
    # boot unwound the rows it had mounted.
    assert not ctx.has("invariants")


async def test_disabled_registry_checks_nothing_but_still_reserves_the_name(make_ctx: BootFactory) -> None:
    ctx = make_ctx(invariants={"enabled": False}, todo_invariant=True)
    session = ctx.sessions.create("s")
    session.append("todo/write", {"todos": "not-an-array"})
    assert session.seq == 1
    with pytest.raises(ValueError) as caught:
        ctx.invariants.register("@deepseek-ai/dsh-tool-todo", lambda s, e: None)
    assert str(caught.value) == 'invariants: package "@deepseek-ai/dsh-tool-todo" is already registered'


@pytest.mark.parametrize(("config", "checked"), [
    pytest.param({"package_blocklist": ["tool-todo"]}, False, id="blocked"),
    pytest.param({"package_allowlist": ["^@deepseek-ai/dsh-session$"]}, False, id="not-allowed"),
    pytest.param({"package_allowlist": ["dsh-tool"]}, True, id="allowed"),
    pytest.param({"package_allowlist": ["dsh-tool"], "package_blocklist": ["todo$"]}, False,
                 id="block-beats-allow"),
])
async def test_allow_and_block_lists(make_ctx: BootFactory, config: dict[str, Any], checked: bool) -> None:
    ctx = make_ctx(invariants=config, todo_invariant=True)
    session = ctx.sessions.create("s")
    if checked:
        with pytest.raises(InvariantError):
            session.append("todo/write", {"todos": None})
        assert session.seq == 0
    else:
        session.append("todo/write", {"todos": None})
        assert session.seq == 1


async def test_disposing_the_companion_stops_the_checks(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    ctx.plugin(invariants_plugin, {"enabled": True})
    companion = ctx.plugin(todo_invariant)
    session = ctx.sessions.create("s")
    with pytest.raises(InvariantError):
        session.append("todo/write", {"todos": None})
    companion.dispose()
    session.append("todo/write", {"todos": None})
    assert session.seq == 1
    assert "@deepseek-ai/dsh-tool-todo" not in ctx.invariants.packages()


def test_companion_export_shape() -> None:
    assert todo_invariant.name == "tool-todo-invariant"
    assert todo_invariant.inject == ["invariants"]
    assert callable(todo_invariant.apply)
    assert not hasattr(todo_invariant, "default")


# -- §2.4: the session companion and the tool ---------------------------------------------------------------------

async def test_tool_call_outside_a_turn_is_vetoed_by_the_session_companion(make_ctx: BootFactory) -> None:
    ctx = make_ctx(invariants={"enabled": True}, session_invariant=True, todo_invariant=True)
    session = ctx.sessions.create("s")
    result = await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=Agent("a", session))
    assert result.is_error
    assert result.text == ("Error: " + SESSION_PREFIX + "todo/write appended outside any open turn "
                           "(core execution events must be turn-enclosed)")
    assert result.value is None
    assert session.seq == 0


async def test_tool_call_inside_a_turn_passes_both_companions(make_ctx: BootFactory) -> None:
    ctx = make_ctx(invariants={"enabled": True}, session_invariant=True, todo_invariant=True)
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    result = await ctx.tools.execute("todo_write", {"todos": []}, agent=Agent("a", session))
    assert not result.is_error
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    with pytest.raises(InvariantError) as caught:
        session.append("todo/write", {"todos": []})
    assert str(caught.value) == (SESSION_PREFIX + "todo/write appended outside any open turn "
                                 "(core execution events must be turn-enclosed)")
    assert [event["type"] for event in session.events] == [
        "turn/start", "step/start", "todo/write", "step/end", "turn/end"]


async def test_registry_alone_does_not_enforce_turn_enclosure(make_ctx: BootFactory) -> None:
    ctx = make_ctx(invariants={"enabled": True}, todo_invariant=True)
    session = ctx.sessions.create("s")
    result = await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=Agent("a", session))
    assert not result.is_error
    assert session.seq == 1

