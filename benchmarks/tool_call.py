"""Median cost of one full ``todo_write`` call and of the ``todos`` fold.

The call is measured end to end as a model-driven call pays it: lossless snapshot of the arguments, schema
validation, canonicalisation, the append (with the projection registry advancing its cell) and the render. Each
sample times a batch of calls inside one running event loop, so event-loop start-up is not counted.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from dsh_todo.harness import Agent, boot
from dsh_todo.tool_todo.projection import TODOS_UNIT

COMPOSITION: list[dict[str, Any]] = [
    {"id": "tools", "name": "@deepseek-ai/dsh-tools"},
    {"id": "session", "name": "@deepseek-ai/dsh-session"},
    {"id": "projections", "name": "@deepseek-ai/dsh-session-projection"},
    {"id": "tool-todo", "name": "@deepseek-ai/dsh-tool-todo", "config": {"allowParallelInProgress": True}},
]

ARGS = {"todos": [{"content": f"  step {i}: do the thing number {i}  ",
                   "status": ("completed", "in_progress", "pending")[i % 3]} for i in range(10)]}


async def _time_calls(batch: int, samples: int) -> list[float]:
    """Each sample: a fresh session taking ``batch`` calls (a long session's worth), closed afterwards."""
    ctx = boot(COMPOSITION)
    tools = ctx.tools
    results = []
    for sample in range(samples):
        session = ctx.sessions.create(f"bench-{sample}")
        agent = Agent("bench", session)
        start = time.process_time()
        for _ in range(batch):
            await tools.execute("todo_write", ARGS, agent=agent)
        results.append((time.process_time() - start) / batch * 1e6)
        ctx.sessions.close(session.id)
    ctx.dispose()
    return results


def bench_call(batch: int = 500, samples: int = 101) -> float:
    per_op = asyncio.run(_time_calls(batch, samples))
    return statistics.median(per_op)


def bench_fold(events: int = 100_000, samples: int = 9) -> float:
    """µs per event folded over a realistic mix (a ``todo/write`` every ~20 events, turns around them)."""
    log: list[dict[str, Any]] = []
    for i in range(events):
        if i % 200 == 0:
            log.append({"type": "turn/start", "seq": i, "time": 0, "data": {"turn": i // 200 + 1}})
        elif i % 20 == 0:
            log.append({"type": "todo/write", "seq": i, "time": 0, "data": ARGS})
        else:
            log.append({"type": "step/start", "seq": i, "time": 0, "data": {"turn": 1, "step": 1}})
    times = []
    for _ in range(samples):
        start = time.process_time()
        TODOS_UNIT.fold(log)
        times.append((time.process_time() - start) / events * 1e6)
    return statistics.median(times)


def main() -> None:
    call = bench_call()
    fold = bench_fold()
    print(f"todo_write full call (10 items, projections mounted): median {call:.1f} us/op")
    print(f"todos fold: median {fold * 1000:.0f} ns/event ({1 / fold:.1f}M events/s)")


if __name__ == "__main__":
    main()
