"""Port of ``loader-composition.spec.ts`` (SPEC §11.4): boot a real composition file, plus the §1.1 config texts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dsh_todo.tool_todo as tool_todo_module
from dsh_todo.harness import Agent, Context, boot
from dsh_todo.harness.errors import BootError, ConfigError
from dsh_todo.tool_todo.description import PARALLEL, SINGLE
from tests.conftest import BootFactory, todo_writes

pytestmark = pytest.mark.anyio

MISSING = ("invalid config:\n  - $.allowParallelInProgress missing required value (at allowParallelInProgress)")


def expected_boolean(shown: str) -> str:
    return ("invalid config:\n  - $.allowParallelInProgress expected boolean but got "
            f"{shown} (at allowParallelInProgress)")


def write_composition(tmp_path: Path, config_block: str) -> Path:
    path = tmp_path / "cordis.yml"
    path.write_text(
        "- id: tools\n"
        "  name: '@deepseek-ai/dsh-tools'\n"
        "- id: session\n"
        "  name: '@deepseek-ai/dsh-session'\n"
        "- id: session-projection\n"
        "  name: '@deepseek-ai/dsh-session-projection'\n"
        "- id: tool-todo\n"
        "  name: '@deepseek-ai/dsh-tool-todo'\n"
        f"{config_block}",
        encoding="utf-8")
    return path


PARALLEL_PAIR = [{"content": "run subagent a", "status": "in_progress"},
                 {"content": "run subagent b", "status": "in_progress"}]


async def test_single_active_composition(tmp_path: Path, make_ctx: BootFactory) -> None:
    ctx = make_ctx(write_composition(tmp_path, "  config:\n    allowParallelInProgress: false\n"))
    definition = ctx.tools.get("todo_write")
    assert definition is not None
    assert SINGLE in definition.description
    assert PARALLEL not in definition.description
    agent = Agent("a", ctx.sessions.create("a"))
    result = await ctx.tools.execute("todo_write", {"todos": PARALLEL_PAIR}, agent=agent)
    assert result.is_error
    assert "at most one task may be in_progress" in result.text
    assert todo_writes(agent.session) == []


async def test_parallel_composition(tmp_path: Path, make_ctx: BootFactory) -> None:
    ctx = make_ctx(write_composition(tmp_path, "  config:\n    allowParallelInProgress: true\n"))
    definition = ctx.tools.get("todo_write")
    assert definition is not None
    assert PARALLEL in definition.description
    assert SINGLE not in definition.description
    agent = Agent("a", ctx.sessions.create("a"))
    result = await ctx.tools.execute("todo_write", {"todos": PARALLEL_PAIR}, agent=agent)
    assert not result.is_error
    assert todo_writes(agent.session) == [PARALLEL_PAIR]


async def test_mapping_form_with_plugins_key(tmp_path: Path, make_ctx: BootFactory) -> None:
    path = tmp_path / "cordis.yml"
    path.write_text("plugins:\n"
                    "  - name: '@deepseek-ai/dsh-tools'\n"
                    "  - name: '@deepseek-ai/dsh-tool-todo'\n"
                    "    config: {allowParallelInProgress: true}\n", encoding="utf-8")
    assert [schema["name"] for schema in make_ctx(path).tools.schemas()] == ["todo_write"]


@pytest.mark.parametrize(("config_block", "message"), [
    pytest.param("", MISSING, id="config-omitted"),
    pytest.param("  config: {}\n", MISSING, id="config-empty"),
    pytest.param("  config:\n    allowParallelInProgress: null\n", MISSING, id="null-counts-as-missing"),
    pytest.param("  config:\n    allowParallelInProgress: \"no\"\n", expected_boolean("no"), id="string-no"),
    pytest.param("  config:\n    allowParallelInProgress: 'true'\n", expected_boolean("true"), id="string-true"),
    pytest.param("  config:\n    allowParallelInProgress: 1\n", expected_boolean("1"), id="one-is-not-a-boolean"),
    pytest.param("  config:\n    allowParallelInProgress: 0\n", expected_boolean("0"), id="zero"),
    # YAML 1.2 (what DSH's loader reads) has only true/false as booleans: an unquoted `no` is the string "no".
    pytest.param("  config:\n    allowParallelInProgress: no\n", expected_boolean("no"), id="bare-no"),
    pytest.param("  config:\n    allowParallelInProgress: yes\n", expected_boolean("yes"), id="bare-yes"),
    pytest.param("  config:\n    allowParallelInProgress: off\n", expected_boolean("off"), id="bare-off"),
])
def test_bad_config_fails_the_boot_naming_the_row(tmp_path: Path, config_block: str, message: str) -> None:
    ctx = Context()
    with pytest.raises(BootError) as caught:
        boot(write_composition(tmp_path, config_block), ctx)
    text = str(caught.value)
    assert text == f'composition row "tool-todo" (@deepseek-ai/dsh-tool-todo): {message}'
    # Nothing stays mounted: the tool does not exist and earlier rows were unwound.
    assert not ctx.has("tools")
    assert not ctx.has("sessions")


@pytest.mark.parametrize("value", ["True", "TRUE", "true"])
def test_yaml_core_schema_booleans_are_booleans(tmp_path: Path, make_ctx: BootFactory, value: str) -> None:
    ctx = make_ctx(write_composition(tmp_path, f"  config:\n    allowParallelInProgress: {value}\n"))
    definition = ctx.tools.get("todo_write")
    assert definition is not None and PARALLEL in definition.description


@pytest.mark.parametrize(("raw", "message"), [
    pytest.param(None, MISSING, id="none"),
    pytest.param({}, MISSING, id="empty"),
    pytest.param({"allowParallelInProgress": None}, MISSING, id="null"),
    pytest.param({"allowParallelInProgress": "no"}, expected_boolean("no"), id="string-no"),
    pytest.param({"allowParallelInProgress": 1}, expected_boolean("1"), id="one"),
    pytest.param({"allowParallelInProgress": 1.5}, expected_boolean("1.5"), id="float"),
    pytest.param({"allowParallelInProgress": [True]}, expected_boolean("true"), id="array"),
    pytest.param({"allowParallelInProgress": {}}, expected_boolean("[object Object]"), id="object"),
])
def test_config_error_texts(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        tool_todo_module.Config.parse(raw)
    assert str(caught.value) == message
    ctx = Context()
    with pytest.raises(ConfigError) as mounted:
        ctx.plugin(tool_todo_module, raw)
    assert str(mounted.value) == message
    assert not ctx.has("tools")


@pytest.mark.parametrize("value", [True, False])
def test_an_extra_config_key_is_accepted(value: bool) -> None:
    parsed = tool_todo_module.Config.parse({"allowParallelInProgress": value, "somethingElse": 1})
    assert parsed.allow_parallel_in_progress is value
