"""The plugin context and the loader (SPEC §8, DESIGN "Names other code relies on")."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import dsh_todo.harness.projections as projections_plugin
import dsh_todo.harness.session as session_plugin
import dsh_todo.harness.tools as tools_plugin
import dsh_todo.tool_todo as tool_todo_module
import dsh_todo.tool_todo.invariant as todo_invariant
from dsh_todo.harness import Context, boot
from dsh_todo.harness.errors import BootError
from dsh_todo.harness.loader import ENTRY_POINT_GROUP, check_plugin_shape, resolve
from tests.conftest import (
    INVARIANTS,
    PROJECTIONS,
    SESSION,
    SESSION_INVARIANT,
    TODO_INVARIANT,
    TOOL_TODO,
    TOOLS,
    BootFactory,
)

PLUGIN_WITH_DEFAULT = '''\
name = "with-default"
inject = ["tools"]


def apply(ctx, config=None):
    ctx.tools.names()


default = apply
'''


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for module in [m for m in sys.modules if m.startswith("dsh_test_plugin_")]:
        del sys.modules[module]


def test_a_module_with_a_default_export_is_refused_at_boot(plugin_dir: Path) -> None:
    (plugin_dir / "dsh_test_plugin_default.py").write_text(PLUGIN_WITH_DEFAULT, encoding="utf-8")
    ctx = Context()
    with pytest.raises(BootError) as caught:
        boot([{"id": "tools", "name": TOOLS}, {"id": "acp", "name": "dsh_test_plugin_default"}], ctx)
    message = str(caught.value)
    assert message.startswith('composition row "acp" (dsh_test_plugin_default): ')
    assert "exports 'default'" in message
    assert "drop 'inject'" in message
    assert "no services" in message
    assert "Remove the 'default' export" in message
    assert not ctx.has("tools")


@pytest.mark.parametrize("plugin", [
    pytest.param(SimpleNamespace(name="x", inject=[], apply=lambda ctx: None, default=lambda ctx: None),
                 id="namespace-with-default"),
    pytest.param(lambda ctx: None, id="bare-function"),
    pytest.param(SimpleNamespace(name="x", inject=[]), id="no-apply"),
    pytest.param(SimpleNamespace(inject=[], apply=lambda ctx: None), id="no-name"),
    pytest.param(SimpleNamespace(name="x", inject="tools", apply=lambda ctx: None), id="inject-not-a-list"),
])
def test_ctx_plugin_refuses_what_is_not_a_namespace_plugin(plugin: Any) -> None:
    ctx = Context()
    with pytest.raises(BootError):
        ctx.plugin(plugin)
    with pytest.raises(BootError):
        check_plugin_shape(plugin)


@pytest.mark.parametrize("name", ["@deepseek-ai/dsh-nope", "no_such_module_for_dsh_tests", "not a module"])
def test_an_unknown_plugin_fails_naming_the_row(name: str) -> None:
    ctx = Context()
    with pytest.raises(BootError) as caught:
        boot([{"id": "tools", "name": TOOLS}, {"id": "mystery", "name": name}], ctx)
    message = str(caught.value)
    assert message.startswith(f'composition row "mystery" ({name}): unknown plugin "{name}"')
    assert not ctx.has("tools")


def test_a_row_without_an_id_is_named_by_its_name() -> None:
    with pytest.raises(BootError) as caught:
        boot([{"name": "@deepseek-ai/dsh-nope"}])
    assert str(caught.value).startswith('composition row "@deepseek-ai/dsh-nope" (@deepseek-ai/dsh-nope): ')


def test_a_row_without_a_name_is_refused() -> None:
    with pytest.raises(BootError) as caught:
        boot([{"id": "x"}])
    assert str(caught.value) == "composition row 0 needs a string 'name'"


def test_disabled_rows_are_skipped(make_ctx: BootFactory) -> None:
    ctx = make_ctx([{"name": TOOLS}, {"name": TOOL_TODO, "disabled": True}])
    assert ctx.tools.names() == []


def test_a_plugin_by_dotted_path(make_ctx: BootFactory) -> None:
    ctx = make_ctx([{"name": "dsh_todo.harness.tools"},
                    {"name": "dsh_todo.tool_todo", "config": {"allowParallelInProgress": True}}])
    assert ctx.tools.names() == ["todo_write"]


def test_every_dsh_name_resolves_through_the_entry_point_group() -> None:
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    expected = {TOOLS: tools_plugin, SESSION: session_plugin, PROJECTIONS: projections_plugin,
                TOOL_TODO: tool_todo_module, TODO_INVARIANT: todo_invariant}
    assert set(expected) | {INVARIANTS, SESSION_INVARIANT} <= names
    for name, module in expected.items():
        assert resolve(name) is module


def test_a_plugin_whose_service_appears_later_starts_then() -> None:
    ctx = Context()
    todo = ctx.plugin(tool_todo_module, {"allowParallelInProgress": True})
    assert not todo.active
    assert not ctx.has("tools")
    tools = ctx.plugin(tools_plugin)
    assert todo.active
    assert ctx.tools.names() == ["todo_write"]
    # The service leaves: the plugin unwinds; it comes back: the plugin starts again.
    tools.dispose()
    assert not todo.active and not ctx.has("tools")
    ctx.plugin(tools_plugin)
    assert todo.active
    assert ctx.tools.names() == ["todo_write"]
    ctx.dispose()


def test_disposing_the_plugin_unregisters_its_tool_and_fires_tools_change(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False)
    changes: list[list[str]] = []
    ctx.tools.on_change(lambda: changes.append(ctx.tools.names()))
    handle = ctx.plugin(tool_todo_module, {"allowParallelInProgress": True})
    assert changes == [["todo_write"]]
    assert [s["name"] for s in ctx.tools.schemas()] == ["todo_write"]
    handle.dispose()
    assert changes == [["todo_write"], []]
    assert ctx.tools.schemas() == []
    handle.dispose()  # twice is harmless
    assert changes == [["todo_write"], []]


def test_the_todos_unit_follows_the_registry_and_the_tool(make_ctx: BootFactory) -> None:
    ctx = make_ctx(projections=False, allow_parallel=True)
    registry_fiber = ctx.plugin(projections_plugin)
    registry = ctx.session_projections
    assert registry.keys() == ["todos"]
    registry_fiber.dispose()
    assert not ctx.has("session_projections")
    assert registry.keys() == []  # the old registry lost the unit when it went away
    ctx.plugin(projections_plugin)
    assert ctx.session_projections.keys() == ["todos"]


def test_a_failed_mount_leaves_nothing_behind(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False)
    first = ctx.plugin(tool_todo_module, {"allowParallelInProgress": True})
    with pytest.raises(ValueError) as caught:
        ctx.plugin(tool_todo_module, {"allowParallelInProgress": False})
    assert str(caught.value) == 'tool "todo_write" is already registered'
    # The failed mount's projection unit was rolled back: the key is held once, by the first mount.
    assert ctx.session_projections.keys() == ["todos"]
    first.dispose()
    assert ctx.session_projections.keys() == []
    assert ctx.tools.names() == []
    # Nothing comes back to life when the tree changes later.
    ctx.plugin(SimpleNamespace(name="late-service", inject=[], apply=lambda c: c.provide("late", object())))
    assert ctx.tools.names() == []
    assert ctx.session_projections.keys() == []


def test_disposing_the_tool_removes_the_unit() -> None:
    ctx = Context()
    ctx.plugin(tools_plugin)
    ctx.plugin(session_plugin)
    ctx.plugin(projections_plugin)
    tool = ctx.plugin(tool_todo_module, {"allowParallelInProgress": False})
    assert ctx.session_projections.keys() == ["todos"]
    tool.dispose()
    assert ctx.session_projections.keys() == []
    assert ctx.tools.names() == []
    ctx.dispose()
    assert not ctx.has("tools") and not ctx.has("sessions") and not ctx.has("session_projections")


def test_disposing_the_root_context_unwinds_every_plugin(make_ctx: BootFactory) -> None:
    ctx = boot([{"name": TOOLS}, {"name": SESSION}, {"name": PROJECTIONS},
                {"name": INVARIANTS, "config": {}}, {"name": SESSION_INVARIANT},
                {"name": TOOL_TODO, "config": {"allowParallelInProgress": True}}, {"name": TODO_INVARIANT}])
    invariants = ctx.invariants
    assert invariants.packages() == ["@deepseek-ai/dsh-session", "@deepseek-ai/dsh-tool-todo"]
    ctx.dispose()
    for service in ("tools", "sessions", "session_projections", "invariants"):
        assert not ctx.has(service)
    assert invariants.packages() == []


def test_a_service_can_be_provided_only_once() -> None:
    ctx = Context()
    ctx.plugin(tools_plugin)
    with pytest.raises(ValueError) as caught:
        ctx.plugin(tools_plugin)
    assert str(caught.value) == 'service "tools" is already provided'
    ctx.dispose()


def test_a_missing_service_names_itself() -> None:
    with pytest.raises(AttributeError) as caught:
        _ = Context().tools
    assert str(caught.value) == 'cannot get service "tools": it is not provided (is its plugin mounted?)'
    assert Context().get("tools") is None


def test_plugins_without_config_refuse_one() -> None:
    from dsh_todo.harness.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        Context().plugin(tools_plugin, {"x": 1})
    assert str(caught.value) == "plugin '@deepseek-ai/dsh-tools' takes no config"


def test_tool_todo_export_shape() -> None:
    assert tool_todo_module.name == "tool-todo"
    assert tool_todo_module.inject == ["tools"]
    assert callable(tool_todo_module.apply)
    assert callable(tool_todo_module.Config.parse)
    assert not hasattr(tool_todo_module, "default")
    assert "default" not in tool_todo_module.__all__


def test_tool_todo_invariant_export_shape() -> None:
    assert todo_invariant.name == "tool-todo-invariant"
    assert todo_invariant.inject == ["invariants"]
    assert callable(todo_invariant.apply)
    assert not hasattr(todo_invariant, "default")
    assert getattr(todo_invariant, "Config", None) is None


def test_the_standard_plugins_are_the_entry_points_pyproject_declares() -> None:
    """``open_runtime`` mounts our plugins from the modules ``dsh_todo.standard`` imports instead of looking them up
    among the entry points (start-up time, and go-to-definition follows); the two must name the same modules."""
    from importlib.metadata import entry_points

    from dsh_todo.harness.persistence.registry import backend_plugin, backends
    from dsh_todo.standard import PLUGINS, POSTGRES, plugin_of

    declared = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    registered = [getattr(backend_plugin(short), "name", None) for short in backends()]  # each backend's plugin too
    assert declared == {name: getattr(plugin_of(name), "__name__", None) for name in {*PLUGINS, POSTGRES, *registered}}
