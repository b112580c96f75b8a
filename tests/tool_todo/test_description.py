"""What the model reads (SPEC §1.3, §3): the description, the parameter schema bytes and their token cost."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from dsh_todo.cli import main
from dsh_todo.harness.llm.wire import function_tool, messages_tool
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

# The texts as sent, pinned whole (SPEC §1.3: our words; head + policy clause + tail).
PARALLEL_TEXT = (
    "Plan multi-step work up front, one todo per concrete step; skip it for trivial tasks. Each call replaces the "
    "whole list. Mark active todos in_progress, several only when work runs in parallel. Mark each todo completed "
    "once done.")
SINGLE_TEXT = (
    "Plan multi-step work up front, one todo per concrete step; skip it for trivial tasks. Each call replaces the "
    "whole list. Keep exactly one todo in_progress while work remains. Mark each todo completed once done.")
PARAMETER_TEXTS = ("The whole list.", "One concrete step.", "not started | underway | done")

# DeepSeek-V4 tokens of the whole tool JSON, compact: (OpenAI function wrapping, Anthropic tool wrapping).
TOKENS = {True: (156, 152), False: (152, 148)}
# Issue 33's ceiling: 0.8x DSH 0.2.1's 202 (parallel) and 192 (single) in the OpenAI function wrapping.
CEILING = {True: 161, False: 153}

# What a plan tool's text must not do (issue 33): push the model to keep writing, or add a closing check.
NAGGING = ("always", "remember", "don't forget", "make sure", "verify", "must", "important", "keep the list",
           "update the list", "before finishing", "before you finish", "all tasks")


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


def test_the_texts_as_sent() -> None:
    assert describe(True) == PARALLEL_TEXT
    assert describe(False) == SINGLE_TEXT
    parameters = build_tool(True).parameters["properties"]["todos"]
    item = parameters["items"]["properties"]
    assert (parameters["description"], item["content"]["description"], item["status"]["description"]) == \
        PARAMETER_TEXTS


def test_a_policy_is_told_apart_by_its_clause_alone() -> None:
    parallel, single = describe(True), describe(False)
    assert text.PARALLEL in parallel and text.SINGLE not in parallel
    assert text.SINGLE in single and text.PARALLEL not in single
    assert parallel.replace(text.PARALLEL, text.SINGLE) == single


def test_only_the_middle_clause_differs() -> None:
    parallel, single = describe(True), describe(False)
    assert parallel == text.HEAD + text.PARALLEL + text.TAIL
    assert single == text.HEAD + text.SINGLE + text.TAIL
    # Independently of how the constants are cut: everything outside the middle clause is shared byte for byte.
    assert shared_prefix_length(parallel, single) >= len(text.HEAD)
    assert shared_prefix_length(parallel[::-1], single[::-1]) >= len(text.TAIL)
    # HEAD: plan multi-step work, one todo per concrete step, written first; not for trivial tasks; every call
    # replaces the whole list. It says nothing about in_progress: that is the policy's clause.
    for words in ("multi-step", "up front", "one todo per concrete step", "trivial", "replaces the whole list"):
        assert words in text.HEAD
    assert "in_progress" not in text.HEAD and "in_progress" not in text.TAIL
    # The policy clauses carry the in_progress rule: several only for parallel work, or exactly one.
    assert "several only when work runs in parallel" in text.PARALLEL
    assert "exactly one" in text.SINGLE and "while work remains" in text.SINGLE
    # TAIL: mark a todo completed as soon as it is done.
    assert "completed" in text.TAIL and "done" in text.TAIL


@pytest.mark.parametrize("allow", [True, False])
def test_nothing_nags(allow: bool) -> None:
    sent = dumps(function_tool(build_tool(allow).schema())).lower()
    assert [words for words in NAGGING if words in sent] == []


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


def test_anthropic_wrapper_shape() -> None:
    schema = build_tool(True).schema()
    wrapped = messages_tool(schema)
    assert list(wrapped) == ["name", "description", "input_schema"]
    assert wrapped == {"name": "todo_write", "description": PARALLEL_TEXT, "input_schema": schema["parameters"]}


@pytest.mark.parametrize("allow", [True, False])
def test_token_counts(allow: bool) -> None:
    schema = build_tool(allow).schema()
    counts = (count_tokens(dumps(function_tool(schema))), count_tokens(dumps(messages_tool(schema))))
    assert counts == TOKENS[allow]
    assert counts[0] <= CEILING[allow]


@pytest.mark.parametrize(("argv", "allow", "policy"), [(["schema"], True, "parallel"),
                                                       (["schema", "--single-active"], False, "single-active")])
def test_the_schema_command_prints_the_tool_and_both_counts(argv: list[str], allow: bool, policy: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == dumps(function_tool(build_tool(allow).schema())) + "\n"
    openai, anthropic = TOKENS[allow]
    assert err == (f"# {openai} DeepSeek-V4 tokens ({policy}, compact JSON as sent to the model)\n"
                   f"# {anthropic} DeepSeek-V4 tokens ({policy}, the same tool in the Anthropic wrapping "
                   '{"name","description","input_schema"})\n')
