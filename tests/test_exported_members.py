"""The public surface, pinned: each package's ``__all__`` names exactly these, and each name exists.

A change to what a package exports is a change to this file too, made on purpose (as httpx's
``tests/test_exported_members.py`` does for its surface). Everything else is reachable by its module path but is
not promised to users.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import dsh_todo
from dsh_todo.harness.persistence.registry import backend_plugin, backends

SURFACE: dict[str, list[str]] = {
    "dsh_todo": ["__version__"],
    "dsh_todo.adapters": ["TodoBinding", "TurnScope", "bind_todo", "standing_plan"],
    "dsh_todo.carriers": [],
    "dsh_todo.carriers.acp": [],
    "dsh_todo.carriers.mcp": [],
    "dsh_todo.commands": ["COMMANDS", "Command", "CommandError", "all_commands", "command"],
    "dsh_todo.carriers.web": ["BackgroundServer", "WebApp", "run_web", "serve_in_background"],
    "dsh_todo.harness": ["Agent", "BootError", "ConfigError", "Context", "Disposer", "DshTodoError", "Plugin",
                         "PluginHandle", "Session", "SessionStore", "boot"],
    "dsh_todo.harness.llm": ["Model", "ModelError", "ModelReply", "ModelRequest", "OpenAICompatibleModel",
                             "ScriptedModel", "ToolCallRequest", "load_script", "make_model", "parse_script"],
    "dsh_todo.harness.persistence": [
        "SESSION_FORMAT_VERSION", "Batch", "CorruptSessionLogError", "LoadedLog", "LogBackend", "LogReader",
        "LogWriter", "Scan", "SessionExistsError", "SessionFormatUnsupportedError", "SessionIdError",
        "SessionLockedError", "SessionLogChangedError", "SessionLogError", "SessionNotFoundError",
        "SessionPersistence", "SessionWriteError", "StoredLog", "StoredSession", "TornTail",
        "interrupted_turn_closers"],
    # Nothing at the folder's face: a reader imports jsonl.reader, a writer jsonl.backend (decision 0014).
    "dsh_todo.harness.persistence.jsonl": [],
    "dsh_todo.harness.persistence.postgres": ["NEEDS", "VARIANTS", "Config", "PgBackend", "apply", "inject", "name",
                                              "scratch"],
    "dsh_todo.harness.persistence.upgrade": ["UpgradeError", "upgrade_to_v4"],
    "dsh_todo.coding_agents": ["AGENTS", "AgentPlanItem", "AgentSession", "PlanWrite", "Reader", "UnknownAgentError",
                               "reader", "selected"],
    "dsh_todo.harness.telemetry": ["Backend", "Capture", "Channel", "Coordinator", "Rule", "SessionTelemetry",
                                   "Severity", "Sharing", "Sink", "TelemetryRecord", "apply", "inject", "name"],
    "dsh_todo.harness.tools": ["AbortSignal", "ToolDefinition", "ToolExecution", "ToolRegistry", "ToolResult",
                               "apply", "define_tool", "error_result", "inject", "name"],
    "dsh_todo.logview": ["PLAN_EVENT_TYPES", "Backend", "Health", "PlanView", "Refusal", "SessionView", "find_log",
                         "list_sessions", "open_database", "read_events", "read_plan", "read_session", "resolve"],
    "dsh_todo.testing": ["Cluster", "ClusterUnavailable", "ModelReply", "ScriptedModel", "ToolCallRequest",
                         "backend_composition", "database_composition", "memory_composition", "memory_context",
                         "memory_kb", "memory_log_composition", "open_fds",
                         "reply", "rpc_result", "scripted_turn",
                         "start_cluster", "stop", "todo_call"],
    "dsh_todo.tool_todo": ["Config", "TodoItem", "apply", "build_tool", "inject", "name"],
    # A module, not a package: pinned because DESIGN names its plugin face.
    "dsh_todo.tool_todo.invariant": ["apply", "check_todos", "inject", "name"],
}


def packages() -> list[str]:
    """Every package under ``dsh_todo`` (importing one imports no optional SDK)."""
    found = ["dsh_todo"]
    for info in pkgutil.walk_packages(dsh_todo.__path__, "dsh_todo."):
        if info.ispkg:
            found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("name", sorted(SURFACE))
def test_the_exported_names_are_the_expected_ones_and_exist(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    exported = list(module.__all__)
    assert sorted(exported) == sorted(SURFACE[name])
    assert len(exported) == len(set(exported)), "a name is exported twice"
    missing = [member for member in exported if not hasattr(module, member)]
    assert missing == []


BACKEND_FACE = ["NEEDS", "VARIANTS", "Config", "apply", "inject", "name", "scratch"]
"""What a registered backend's plugin package exports beside its backend classes (decision 0042): its registration
pins its surface, so a new backend adds no line here."""


def registered_packages() -> list[str]:
    """The registered backends whose plugin module is their folder's package (``memory``, ``postgres``)."""
    return sorted(plugin for plugin in backends().values() if hasattr(importlib.import_module(plugin), "__path__"))


@pytest.mark.parametrize("short", sorted(backends()))
def test_each_registered_backend_exports_the_backend_face(short: str) -> None:
    module = backend_plugin(short)
    exported = list(module.__all__)
    assert set(BACKEND_FACE) <= set(exported)
    assert [member for member in exported if not hasattr(module, member)] == []
    assert len(exported) == len(set(exported)), "a name is exported twice"


def test_every_package_declares_its_surface() -> None:
    """A new package cannot slip in with an implicit surface: it needs ``__all__`` and a line above (a registered
    backend's package, the backend face)."""
    assert [name for name in packages() if name not in SURFACE and name not in registered_packages()] == []
    assert [name for name in packages() if not hasattr(importlib.import_module(name), "__all__")] == []


def test_the_plugin_faces_design_relies_on() -> None:
    tool_todo = importlib.import_module("dsh_todo.tool_todo")
    invariant = importlib.import_module("dsh_todo.tool_todo.invariant")
    for member in ("name", "inject", "Config", "apply"):
        assert hasattr(tool_todo, member)
    assert not hasattr(tool_todo, "default")  # a loader that unwraps `default` would drop `inject` (postmortem 0001)
    for member in ("name", "inject", "apply"):
        assert hasattr(invariant, member)
    assert not hasattr(invariant, "default")


def test_the_version_is_the_installed_distribution() -> None:
    from importlib import metadata

    assert dsh_todo.__version__ == metadata.version("dsh-todo")
    with pytest.raises(AttributeError):
        _ = dsh_todo.no_such_name  # type: ignore[attr-defined]
