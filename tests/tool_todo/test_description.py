"""What the model reads (SPEC §1.3, §3): the description, the parameter schema bytes and their token cost."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from dsh_todo.harness.llm.wire import function_tool
from dsh_todo.jsonutil import dumps
from dsh_todo.tokens import count_tokens
from dsh_todo.tool_todo import build_tool
from dsh_todo.tool_todo import description as text
from dsh_todo.tool_todo.description import describe
from tests.conftest import BootFactory

# SPEC §3.1, compact form, with our description texts replaced by "<ours>".
PARAMETERS_SHAPE = (
    '{"type":"object","properties":{"todos":{"type":"array","description":"<ours>","items":{"type":"object",'
    '"additionalProperties":false,"properties":{"content":{"type":"string","description":"<ours>"},"status":'
    '{"type":"string","description":"<ours>","enum":["pending","in_progress","completed"]}},"required":'
    '["content","status"]}}},"required":["todos"]}')

# SPEC §3.2, verbatim.
OUTPUT_SCHEMA = (
    '{"type":"object","additionalProperties":false,"properties":{"todos":{"type":"array","items":{"type":"object",'
    '"additionalProperties":false,"properties":{"content":{"type":"string"},"status":{"type":"string","enum":'
    '["pending","in_progress","completed"]}},"required":["content","status"]}},"counts":{"type":"object",'
    '"additionalProperties":false,"properties":{"pending":{"type":"integer"},"inProgress":{"type":"integer"},'
    '"completed":{"type":"integer"}},"required":["pending","inProgress","completed"]}},"required":["todos","counts"]}')

TOKEN_BUDGET = {True: 254, False: 235}


def placeholders(node: Any) -> Any:
    """The schema with every description text replaced by ``"<ours>"`` (key order kept)."""
    if isinstance(node, dict):
        return {k: "<ours>" if k == "description" else placeholders(v) for k, v in node.items()}
    if isinstance(node, list):
        return [placeholders(v) for v in node]
    return node


def shared_prefix_length(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_parallel_and_single_clauses() -> None:
    parallel, single = describe(True), describe(False)
    assert "several at once" in parallel and "AT MOST ONE" not in parallel
    assert "AT MOST ONE" in single and "several at once" not in single


def test_only_the_middle_clause_differs() -> None:
    parallel, single = describe(True), describe(False)
    assert parallel == text.HEAD + text.PARALLEL + text.TAIL
    assert single == text.HEAD + text.SINGLE + text.TAIL
    # Independently of how the constants are cut: everything outside the middle clause is shared byte for byte.
    assert shared_prefix_length(parallel, single) >= len(text.HEAD)
    assert shared_prefix_length(parallel[::-1], single[::-1]) >= len(text.TAIL)
    # HEAD: the whole list replaces the previous one; plan multi-step work, one todo per step, written first.
    assert "REPLACES" in text.HEAD and "in_progress" not in text.HEAD
    # The policy clauses carry the in_progress rule and nothing else the tail says.
    assert "in_progress" in text.PARALLEL and "in_progress" in text.SINGLE
    # TAIL: complete promptly, none active only when all is done, skip trivial tasks, the three statuses.
    for word in ("completed", "pending", "in_progress", "trivial", "no batching"):
        assert word in text.TAIL


def test_description_is_a_constant() -> None:
    assert describe(True) == describe(True) and describe(False) == describe(False)
    assert describe(True) != describe(False)
    assert build_tool(True).description == describe(True)
    assert build_tool(False).description == describe(False)


@pytest.mark.parametrize("allow", [True, False])
def test_parameter_schema_key_order_follows_spec(allow: bool) -> None:
    parameters = build_tool(allow).parameters
    assert dumps(placeholders(parameters)) == PARAMETERS_SHAPE
    assert "additionalProperties" not in parameters  # the root stays open (SPEC §13.4)


def test_parameter_schema_does_not_depend_on_the_policy() -> None:
    assert dumps(build_tool(True).parameters) == dumps(build_tool(False).parameters)


def test_output_schema_compiles_to_the_spec_string() -> None:
    for allow in (True, False):
        assert dumps(build_tool(allow).output_schema) == OUTPUT_SCHEMA


def test_schemas_are_byte_identical_across_calls_and_boots(make_ctx: BootFactory) -> None:
    first = make_ctx(allow_parallel=True)
    again = make_ctx(allow_parallel=True)
    once = dumps(first.tools.schemas())
    assert dumps(first.tools.schemas()) == once
    assert dumps(again.tools.schemas()) == once
    assert [set(s) for s in first.tools.schemas()] == [{"name", "description", "parameters"}]


def test_schemas_are_byte_identical_across_processes() -> None:
    script = ("import sys\nfrom dsh_todo.harness.llm.wire import function_tool\n"
              "from dsh_todo.jsonutil import dumps\nfrom dsh_todo.tool_todo import build_tool\n"
              "sys.stdout.write(dumps([function_tool(build_tool(a).schema()) for a in (True, False)]))\n")
    outputs = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True,
                              encoding="utf-8")
        outputs.add(done.stdout)
    here = dumps([function_tool(build_tool(a).schema()) for a in (True, False)])
    assert outputs == {here}


def test_function_tool_wrapper_shape() -> None:
    wrapped = function_tool(build_tool(True).schema())
    assert list(wrapped) == ["type", "function"]
    assert wrapped["type"] == "function"
    assert list(wrapped["function"]) == ["name", "description", "parameters"]
    assert "strict" not in dumps(wrapped)


@pytest.mark.parametrize("allow", [True, False])
def test_token_budget(allow: bool) -> None:
    wire = dumps(function_tool(build_tool(allow).schema()))
    tokens = count_tokens(wire)
    assert 0 < tokens <= TOKEN_BUDGET[allow], tokens
