"""How many modules one warm MCP ``tools/call`` over stdio crosses from its request line to the fsync.

Counted, not timed (:mod:`tests.carriers.mcp.walk`: the stdio server in process, the call traced with
``sys.setprofile``), so the count is the same on every machine. Issue 35 found 22 modules on the main path (this
count: 21) and set the goal at 10 modules *crossed* from the request line to the fsync: the modules the call passes
through, calling on into another of ours, not the leaves it only consults (ids, JSON, frozen values, the plan rules,
the lock's flag, zstd, the file helpers, the call's dataclass). Merging the direct answers into the carrier's call
module brought it to 11 crossed (19 on the main path); folding a batch's bytes into the file writer, to 10 (18);
the plain core's one module of measured tricks (``harness/tools/speed.py``, a leaf) makes the main path 19: decisions
0045, 0046. ``CROSSED_CEILING`` is the issue's goal, met; ``MAIN_PATH_CEILING`` keeps the whole walk from growing
back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.carriers.mcp.walk import Walk, trace_call

MAIN_PATH_CEILING = 19
CROSSED_CEILING = 10


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


def test_the_write_path_crosses_the_service_the_queue_and_the_writer(walk: Walk) -> None:
    """Decision 0046, second round: a batch's bytes are made by the file writer, so below the session the call
    crosses persistence's service, its queue and the writer, and only consults the lock, zstd and the file helpers."""
    persistence = "dsh_todo.harness.persistence."
    assert [module for module in walk.crossed if module.startswith(persistence)] == [
        f"{persistence}service", f"{persistence}batching", f"{persistence}jsonl.writer"], walk.report()
    assert {f"{persistence}jsonl.lock", f"{persistence}jsonl.zstd", f"{persistence}jsonl.regular"} <= (
        set(walk.main_path) - set(walk.crossed))
