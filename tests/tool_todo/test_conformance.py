"""The reference's recorded outputs (``tests/fixtures/conformance``), vector by vector.

``exec-vectors.jsonl``: one ``todo_write`` call each, run through ``ctx.tools.execute``. ``project-vectors.jsonl``:
the ``todos`` projection after every event of a session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dsh_todo.harness import Agent, Context, boot
from dsh_todo.harness.errors import BootError
from dsh_todo.tool_todo.projection import TODOS_UNIT
from tests.conftest import TOOL_TODO, composition, fixtures_dir, read_jsonl

pytestmark = pytest.mark.anyio

CONFORMANCE = fixtures_dir() / "conformance"
EXEC_VECTORS = read_jsonl(CONFORMANCE / "exec-vectors.jsonl")
PROJECT_VECTORS = read_jsonl(CONFORMANCE / "project-vectors.jsonl")

ARGS_PREFIX = "Error: invalid arguments: "
DECLARED = frozenset({"content", "status"})

# -- the one JavaScript object-model difference we do not copy (SPEC §2.1) ------------------------------------------

_CANONICAL_UINT = re.compile(r"0|[1-9][0-9]*")
_UNDECLARED = re.compile(r'"todos\[([0-9]+)\]\.(.*)" is not a declared property \(additionalProperties: false\)',
                         re.DOTALL)


def is_array_index(key: str) -> bool:
    """A canonical array-index string ("0" … "4294967294"): JavaScript lists such own keys first, ascending."""
    return _CANONICAL_UINT.fullmatch(key) is not None and int(key) < 2**32 - 1


def has_array_index_item_key(args: Any) -> bool:
    """Whether some item carries an undeclared key that JavaScript would report out of JSON order."""
    todos = args.get("todos") if isinstance(args, Mapping) else None
    if not isinstance(todos, list):
        return False
    return any(isinstance(item, Mapping) and any(k not in DECLARED and is_array_index(k) for k in item)
               for item in todos)


def js_key_order(violations: Sequence[str]) -> list[str]:
    """Our violations with each item's run of undeclared-key violations put in JavaScript's own-key order."""
    out = list(violations)
    i = 0
    while i < len(out):
        first = _UNDECLARED.fullmatch(out[i])
        if first is None:
            i += 1
            continue
        run: list[tuple[str, str]] = []
        j = i
        while j < len(out):
            match = _UNDECLARED.fullmatch(out[j])
            if match is None or match.group(1) != first.group(1):
                break
            run.append((match.group(2), out[j]))
            j += 1
        indexes = sorted((r for r in run if is_array_index(r[0])), key=lambda r: int(r[0]))
        others = [r for r in run if not is_array_index(r[0])]
        out[i:j] = [text for _, text in indexes + others]
        i = j
    return out


def test_array_index_predicate() -> None:
    assert [k for k in ["0", "1", "10", "4294967294", "4294967295", "01", "-1", "1.0", "", " 1", "١", "a"]
            if is_array_index(k)] == ["0", "1", "10", "4294967294"]


def test_js_key_order_only_moves_index_keys_within_one_item() -> None:
    def undeclared(i: int, key: str) -> str:
        return f'"todos[{i}].{key}" is not a declared property (additionalProperties: false)'

    ours = ['missing required property "todos[0].status"', undeclared(0, "zeta"), undeclared(0, "2"),
            undeclared(0, "01"), undeclared(0, "1"), '"todos[1].content" must be a string', undeclared(1, "b"),
            undeclared(1, "0"), undeclared(2, "x")]
    assert js_key_order(ours) == [
        'missing required property "todos[0].status"', undeclared(0, "1"), undeclared(0, "2"), undeclared(0, "zeta"),
        undeclared(0, "01"), '"todos[1].content" must be a string', undeclared(1, "0"), undeclared(1, "b"),
        undeclared(2, "x")]


_BOOTED: dict[str, Context] = {}


def booted(config: Any) -> Context:
    """One booted context per distinct config (the tool keeps no state; every vector gets its own session)."""
    key = json.dumps(config, sort_keys=True)
    if key not in _BOOTED:
        _BOOTED[key] = boot([*composition(tool=False), {"id": "tool-todo", "name": TOOL_TODO, "config": config}])
    return _BOOTED[key]


# -- exec vectors --------------------------------------------------------------------------------------------------

def _id(vector: Mapping[str, Any]) -> str:
    return str(vector["id"])


# The 13 loop-path vectors (raw argument strings) run through the real agent loop in tests/harness/test_agent_loop.py.
@pytest.mark.parametrize("vector", [v for v in EXEC_VECTORS if v["path"] == "direct"], ids=_id)
async def test_exec_vector(vector: dict[str, Any]) -> None:
    rows = [*composition(tool=False), {"id": "tool-todo", "name": TOOL_TODO, "config": vector["config"]}]
    if "configError" in vector:
        with pytest.raises(BootError) as caught:
            boot(rows)
        assert str(caught.value).endswith(vector["configError"])
        return
    ctx = booted(vector["config"])
    agent = Agent("agent", ctx.sessions.create(f"agent-{vector['id']}")) if vector["agent"] else None
    args = vector["args"]
    result = await ctx.tools.execute("todo_write", args, agent=agent)
    expected_error = vector.get("error")
    assert result.is_error is vector["isError"]
    assert result.content == [{"type": "text", "text": result.text}]
    if has_array_index_item_key(args):
        assert result.text.startswith(ARGS_PREFIX) and vector["text"].startswith(ARGS_PREFIX)
        definition = ctx.tools.get("todo_write")
        assert definition is not None
        ours = definition.validate(args)
        assert result.text == ARGS_PREFIX + "; ".join(ours)
        assert ARGS_PREFIX + "; ".join(js_key_order(ours)) == vector["text"]
    else:
        assert result.text == vector["text"]
    if expected_error is not None:
        assert vector["text"] == "Error: " + expected_error["message"]
    assert result.error == (expected_error or {}).get("info")
    assert result.value == vector["value"]
    events = [{"type": e["type"], "data": e["data"]} for e in agent.session.events] if agent else []
    assert events == vector["events"]


def test_the_key_order_difference_is_real_and_detected() -> None:
    affected = [v for v in EXEC_VECTORS if v["path"] == "direct" and has_array_index_item_key(v["args"])]
    assert any(v["id"] == "key-order/0000" for v in affected)
    # Some affected vector's reference text really differs from JSON order (otherwise the rule would be untested).
    differs = 0
    for vector in affected:
        raw = vector["text"]
        definition = booted(vector["config"]).tools.get("todo_write")
        assert definition is not None
        ours = ARGS_PREFIX + "; ".join(definition.validate(vector["args"]))
        differs += ours != raw
    assert differs >= 1


# -- projection vectors --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("vector", PROJECT_VECTORS, ids=_id)
def test_project_vector(vector: dict[str, Any]) -> None:
    ctx = booted({"allowParallelInProgress": True})
    registry = ctx.session_projections
    session = ctx.sessions.create(f"project-{vector['id']}")
    seen: list[Mapping[str, Any]] = []
    assert len(vector["steps"]) == len(vector["events"])
    for index, (event, step) in enumerate(zip(vector["events"], vector["steps"], strict=True)):
        assert step["type"] == event["type"]
        before = registry.state_of(session, "todos")
        log_before = list(session.events)
        try:
            logged: Mapping[str, Any] = session.append(
                event["type"], event["data"], surface_op=event.get("surfaceOp"),
                source_event_seqs=event.get("sourceEventSeqs"))
        except Exception as exc:
            assert "appendError" in step, f"step {index}: unexpected append error {exc}"
            assert step["appendError"] == f"Error: {exc}"
            assert list(session.events) == log_before
            logged = {"type": event["type"], "seq": session.seq, "time": 0, "data": event["data"]}
        else:
            assert "appendError" not in step, f"step {index}: the reference refused this append"
            assert logged["seq"] == index - sum("appendError" in s for s in vector["steps"][:index])
        seen.append(logged)
        assert registry.state_of(session, "todos") == step["state"], f"step {index}: state"
        assert registry.snapshot(session)["values"]["todos"] == step["view"], f"step {index}: view"
        assert TODOS_UNIT.apply(before, logged) == step["unit"], f"step {index}: unit"
        assert TODOS_UNIT.fold(seen) == step["fold"], f"step {index}: fold"


def test_vectors_are_all_here() -> None:
    assert len(EXEC_VECTORS) == len({v["id"] for v in EXEC_VECTORS})
    assert sum(v["path"] == "loop" for v in EXEC_VECTORS) == 13
    assert len(PROJECT_VECTORS) == len({v["id"] for v in PROJECT_VECTORS})
