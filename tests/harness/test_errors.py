"""The one error tree (issue 12 item 4): every public error descends from ``DshTodoError``, grouped by remedy, and
the old import paths still name the very same classes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import boot
from dsh_todo.harness import errors as tree
from dsh_todo.harness.errors import (
    BootError,
    DshTodoError,
    HarnessError,
    InputError,
    SessionLogError,
    SetupError,
    TodoRejectedError,
    ToolCallError,
)
from dsh_todo.harness.tools import ToolExecution
from dsh_todo.tool_todo import build_tool
from tests.conftest import TOOL_TODO, TOOLS

OLD_HOMES = {
    "dsh_todo.commands": ["CommandError"],
    "dsh_todo.runtime": ["StorageError"],
    "dsh_todo.testing.postgres": ["ClusterUnavailable"],
    "dsh_todo.testing": ["ClusterUnavailable"],
    "dsh_todo.tool_todo.projection": ["InvalidTodosView"],
    "dsh_todo.harness": ["BootError", "ConfigError"],
    "dsh_todo.harness.frozen": ["NotLosslessJSON"],
    "dsh_todo.harness.session": ["SessionAppendError"],
    "dsh_todo.harness.invariants": ["InvariantViolation"],
    "dsh_todo.harness.tools.schema": ["SchemaAuthorError"],
    "dsh_todo.harness.llm": ["ModelError"],
    "dsh_todo.harness.llm.base": ["ModelError"],
    "dsh_todo.harness.persistence.jsonl.zstd": ["FrameError"],
    "dsh_todo.harness.persistence.jsonl.chunk_rows": ["MalformedRowError"],
    "dsh_todo.harness.persistence": [
        "CorruptSessionLogError", "SessionExistsError", "SessionFormatUnsupportedError", "SessionIdError",
        "SessionLockedError", "SessionLogError", "SessionNotFoundError", "SessionWriteError"],
    "dsh_todo.harness.persistence.errors": ["SessionLogError", "SessionNotFoundError"],
}


@pytest.mark.parametrize("name", tree.__all__)
def test_every_public_error_descends_from_the_root_and_is_drawn_in_the_tree(name: str) -> None:
    cls = getattr(tree, name)
    assert issubclass(cls, DshTodoError)
    assert f" {name}" in (tree.__doc__ or ""), f"{name} is missing from the tree in the module docstring"


@pytest.mark.parametrize(("module", "names"), sorted(OLD_HOMES.items()))
def test_old_import_paths_name_the_same_classes(module: str, names: list[str]) -> None:
    loaded = importlib.import_module(module)
    for name in names:
        assert getattr(loaded, name) is getattr(tree, name)


def test_the_web_carriers_rpc_error_is_an_input_error() -> None:
    from dsh_todo.carriers.web.protocol import RpcError

    assert issubclass(RpcError, InputError)


def test_the_standard_bases_callers_rely_on_stay() -> None:
    assert issubclass(tree.SessionNotFoundError, LookupError)
    assert issubclass(tree.SessionIdError, ValueError)
    assert issubclass(tree.StorageError, ValueError)
    assert issubclass(tree.FrameError, ValueError)
    assert issubclass(tree.MalformedRowError, ValueError)
    assert issubclass(tree.NotLosslessJSON, ValueError)
    assert issubclass(tree.ClusterUnavailable, RuntimeError)
    assert issubclass(tree.ToolArgsError, HarnessError)
    for cls in (tree.ConfigError, BootError, tree.StorageError):
        assert issubclass(cls, SetupError)
    for cls in (tree.CorruptSessionLogError, tree.SessionLockedError):
        assert issubclass(cls, SessionLogError)
    # Decoders' errors are caught and reworded by the readers; they must not look like a finished verdict.
    assert not issubclass(tree.FrameError, SessionLogError)


def test_todo_write_refusals_are_plain_tool_call_errors_without_name_and_code() -> None:
    """Repro: ``build_tool(False).execute`` with two ``in_progress`` items, or with no agent, raised a bare
    ``Exception``; SPEC §4 wants a plain Error (no ``{name, code}``), so the class must not be a HarnessError."""
    tool = build_tool(False)
    two_active = {"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}
    with pytest.raises(TodoRejectedError, match=r"^invalid todos: at most one task may be in_progress \(got 2\)$"):
        tool.execute(two_active, ToolExecution(None, None, "call-1"))
    with pytest.raises(TodoRejectedError, match=r"^todo_write requires an owning agent session$"):
        tool.execute({"todos": [{"content": "a", "status": "pending"}]}, ToolExecution(None, None, "call-2"))
    assert issubclass(TodoRejectedError, ToolCallError)
    assert not issubclass(TodoRejectedError, HarnessError)


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for module in [m for m in sys.modules if m.startswith("dsh_err_plugin_")]:
        del sys.modules[module]


def test_boot_error_carries_the_row_and_no_plugin_when_it_cannot_be_loaded() -> None:
    row = {"id": "x", "name": "no_such_module_for_dsh_todo", "config": {"a": 1}}
    with pytest.raises(BootError) as caught:
        boot([{"id": "tools", "name": TOOLS}, row])
    assert caught.value.row == row
    assert caught.value.plugin is None
    assert str(caught.value).startswith('composition row "x" (no_such_module_for_dsh_todo): unknown plugin')


def test_boot_error_carries_the_loaded_plugin_when_its_shape_is_wrong(plugin_dir: Path) -> None:
    (plugin_dir / "dsh_err_plugin_shape.py").write_text('name = "p"\ndefault = 1\n\ndef apply(ctx):\n    pass\n',
                                                       encoding="utf-8")
    row = {"id": "p", "name": "dsh_err_plugin_shape"}
    with pytest.raises(BootError) as caught:
        boot([row])
    assert caught.value.row == row
    assert caught.value.plugin is sys.modules["dsh_err_plugin_shape"]


def test_boot_error_carries_the_plugin_whose_config_was_refused() -> None:
    import dsh_todo.tool_todo as tool_todo

    row = {"id": "todo", "name": TOOL_TODO, "config": {"allowParallelInProgress": "no"}}
    with pytest.raises(BootError) as caught:
        boot([{"id": "tools", "name": TOOLS}, row])
    assert caught.value.row == row
    assert caught.value.plugin is tool_todo
    assert isinstance(caught.value.__cause__, tree.ConfigError)


def test_a_row_that_is_not_a_mapping_gives_no_row() -> None:
    with pytest.raises(BootError) as caught:
        boot(["just a string"])  # type: ignore[list-item]
    assert caught.value.row is None
    assert caught.value.plugin is None
    assert str(caught.value) == "composition row 0 needs a string 'name'"
