"""How many modules one warm MCP ``tools/call`` over stdio crosses from its request line to the fsync.

Counted, not timed (:mod:`tests.carriers.mcp.walk`: the stdio server in process, the call traced with
``sys.setprofile``), so the count is the same on every machine. Issue 35 found 22 modules on the main path (this
count: 21); merging the direct answers into the carrier's call module and looking the registry up once brought it to
19 (decision 0046). The issue's goal is 10, out of reach without folding the core's and persistence's modules into
one another: eleven of the 19 are modules the carrier, the turn writer and the write path use without owning (the
decision's arithmetic). These ceilings keep the walk from growing back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.carriers.mcp.walk import Walk, trace_call

MAIN_PATH_CEILING = 19
CROSSED_CEILING = 11


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    return trace_call(Path(tmp_path_factory.mktemp("walk")))


def test_the_call_reaches_the_disk_through_a_bounded_number_of_modules(walk: Walk) -> None:
    assert len(walk.main_path) <= MAIN_PATH_CEILING, walk.report()
    assert len(walk.crossed) <= CROSSED_CEILING, walk.report()


def test_the_walk_is_the_call_and_its_write(walk: Walk) -> None:
    """The trace starts at the transport reading the line and ends at the writer's fsync: a walk that lost either end
    would count too little."""
    main = walk.main_path
    assert main[0] == "dsh_todo.carriers.mcp.wire"
    assert walk.steps[-1][0] == "dsh_todo.harness.persistence.jsonl.writer"
    assert {"dsh_todo.carriers.mcp.calls", "dsh_todo.harness.turns", "dsh_todo.harness.session",
            "dsh_todo.harness.persistence.batching"} <= set(main)
    assert "dsh_todo.harness.projections" in walk.modules  # the fan-out ran, and is not counted as the path
    assert "dsh_todo.harness.projections" not in main


def test_the_direct_answer_crosses_no_second_carrier_module(walk: Walk) -> None:
    """Decision 0046: the direct answer and the call's step are one module, and the context is not on the way."""
    carriers = [module for module in walk.main_path if module.startswith("dsh_todo.carriers.mcp.")]
    assert carriers == ["dsh_todo.carriers.mcp.wire", "dsh_todo.carriers.mcp.calls"]
    assert "dsh_todo.harness.context" not in walk.main_path
