"""``dsh_todo.testing``'s compositions: the standard runtime in memory, and its rows on a PostgreSQL schema."""

from __future__ import annotations

import anyio
import pytest

from dsh_todo.harness import Agent
from dsh_todo.standard import composition
from dsh_todo.testing import database_composition, memory_composition, memory_context


def test_memory_context_is_the_standard_runtime_without_persistence() -> None:
    assert memory_composition() == composition(None)
    with memory_context(allow_parallel=False) as ctx:
        assert [schema["name"] for schema in ctx.tools.schemas()] == ["todo_write"]
        assert not ctx.has("session_persistence")
        session = ctx.sessions.create("s")
        args = {"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}
        result = anyio.run(lambda: ctx.tools.execute("todo_write", args, agent=Agent("me", session)))
        assert result.text == "Error: invalid todos: at most one task may be in_progress (got 2)"
    assert not ctx.has("tools")  # disposed on exit


def test_memory_context_mounts_the_invariant_companions_when_asked() -> None:
    with memory_context(invariants=True) as ctx:
        assert ctx.has("invariants")
    with memory_context() as ctx:
        assert not ctx.has("invariants")


def test_memory_context_disposes_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), memory_context() as ctx:
        raise RuntimeError("boom")
    assert not ctx.has("tools")


def test_database_composition_is_the_standard_one_in_a_schema() -> None:
    rows = database_composition("postgresql://h/db", schema="t_1", batch_delay_ms=5, poll_ms=50)
    standard = composition(None, database="postgresql://h/db")
    assert [row["name"] for row in rows] == [row["name"] for row in standard]
    persistence = next(row for row in rows if row["id"] == "persistence")
    assert persistence["config"] == {"url": "postgresql://h/db", "schema": "t_1", "writeBatchMaxDelayMs": 5,
                                     "pollIntervalMs": 50}
