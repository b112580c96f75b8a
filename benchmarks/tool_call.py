"""Cost of one full ``todo_write`` call (valid and refused) and of the ``todos`` fold.

The call is measured end to end as a model-driven call pays it: lossless check of the arguments, schema
validation, the list rules, the append (with the projection registry advancing its cell) and the render, inside one
running event loop (its start-up is not counted), in CPU time, so a shared machine's other jobs count less (the
garbage collector's work is CPU time and does count).

- *short sessions*: the runtime holds nothing but the session being called; median of 400-call batches;
- *realistic heap*: 20 sessions × 1,000 logged calls stay alive, as a long-running agent holds them (the
  reference's benchmark keeps its sessions too), and the calls go on logging into them; amortised over 10,000
  calls per round, median of rounds, so the collector's full passes are in the figure;
- *error path*: the same list with one invalid ``status`` against the same heap (nothing is appended);
- *every item new*: the realistic heap again, each call's items never sent before (the tool remembers nothing).

Ratios: the reference's 581 µs (TypeScript, same machine kind) over ours, and our error path over our valid path.
Usage: ``uv run python benchmarks/tool_call.py [--quick]``.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from typing import Any

from dsh_todo.harness import Agent, boot
from dsh_todo.harness.context import Context
from dsh_todo.tool_todo.projection import TODOS_UNIT

REFERENCE_US = 581.0
"""The reference's full call with its sessions kept (TypeScript, same machine kind; 581–600 µs measured)."""

COMPOSITION: list[dict[str, Any]] = [
    {"id": "tools", "name": "@deepseek-ai/dsh-tools"},
    {"id": "session", "name": "@deepseek-ai/dsh-session"},
    {"id": "projections", "name": "@deepseek-ai/dsh-session-projection"},
    {"id": "tool-todo", "name": "@deepseek-ai/dsh-tool-todo", "config": {"allowParallelInProgress": True}},
]

ARGS = {"todos": [{"content": f"  step {i}: do the thing number {i}  ",
                   "status": ("completed", "in_progress", "pending")[i % 3]} for i in range(10)]}
BAD_ARGS = {"todos": [*ARGS["todos"][:9], {"content": "step 9: do the thing number 9", "status": "done"}]}

HEAP_SESSIONS = 20
HEAP_EVENTS = 1_000


def _fill_heap(ctx: Context) -> list[Any]:
    """20 sessions × 1,000 logged ``todo_write`` calls, kept alive by the caller."""
    async def fill() -> None:
        for index in range(HEAP_SESSIONS):
            agent = Agent("kept", ctx.sessions.create(f"kept-{index}"))
            for _ in range(HEAP_EVENTS):
                await ctx.tools.execute("todo_write", ARGS, agent=agent)

    asyncio.run(fill())
    return ctx.sessions.list()


def _new_lists(calls: int) -> list[dict[str, Any]]:
    """``calls`` argument lists whose items were never sent before: nothing the tool remembers applies."""
    return [{"todos": [{"content": f"  call {n}, step {i}  ", "status": item["status"]}
                       for i, item in enumerate(ARGS["todos"])]} for n in range(calls)]


async def _calls(ctx: Context, agents: list[Agent], args: list[dict[str, Any]], calls: int) -> float:
    """CPU µs per call over ``calls`` calls, spread over ``agents`` in turn, the argument lists in turn."""
    execute = ctx.tools.execute
    count, kinds = len(agents), len(args)
    start = time.process_time()
    for index in range(calls):
        await execute("todo_write", args[index % kinds], agent=agents[index % count])
    return (time.process_time() - start) / calls * 1e6


def bench_short(batch: int = 400, samples: int = 61) -> float:
    """Median µs per call over batches, each on a fresh session that is closed and dropped afterwards."""
    ctx = boot(COMPOSITION)
    times: list[float] = []

    async def body() -> None:
        for sample in range(samples):
            agent = Agent("bench", ctx.sessions.create(f"bench-{sample}"))
            times.append(await _calls(ctx, [agent], [ARGS], batch))
            ctx.sessions.close(agent.session.id)

    asyncio.run(body())
    ctx.dispose()
    return statistics.median(times)


def bench_heap(calls: int = 10_000, rounds: int = 5) -> tuple[float, float, float]:
    """(valid, error, new items): medians over rounds of the amortised CPU µs per call with the realistic heap.

    Each round boots a runtime, fills the heap, collects once (every round starts from the same collector state),
    then times ``calls`` valid calls to the kept sessions in turn (they stay logged, so the heap grows by
    ``calls`` events and the collector's full passes land inside the window, as in a long-running agent: a
    median of short batches would leave them out), ``calls`` invalid-status calls (nothing is logged), and
    ``calls`` valid calls whose items are all new (the worst case for the remembered items; logged too).
    """
    valid: list[float] = []
    error: list[float] = []
    new: list[float] = []
    for _ in range(rounds):
        ctx = boot(COMPOSITION)
        kept = _fill_heap(ctx)
        agents = [Agent("kept", session) for session in kept]
        lists = _new_lists(calls)
        gc.collect()

        async def body(ctx: Context, agents: list[Agent], lists: list[dict[str, Any]]) -> None:
            valid.append(await _calls(ctx, agents, [ARGS], calls))
            error.append(await _calls(ctx, agents, [BAD_ARGS], calls))
            new.append(await _calls(ctx, agents, lists, calls))

        asyncio.run(body(ctx, agents, lists))
        assert sum(s.seq for s in kept) == HEAP_SESSIONS * HEAP_EVENTS + 2 * calls
        ctx.dispose()
        del ctx, kept, agents, lists
        gc.collect()
    return statistics.median(valid), statistics.median(error), statistics.median(new)


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
    quick = "--quick" in sys.argv
    short = bench_short(samples=21 if quick else 61)
    valid, error, new = bench_heap(rounds=3 if quick else 5)
    fold = bench_fold()
    print(f"todo_write full call, short sessions (10 items, projections mounted): median {short:.1f} us/op "
          f"({REFERENCE_US / short:.1f}x the reference's {REFERENCE_US:.0f} us)")
    print(f"todo_write full call, realistic heap ({HEAP_SESSIONS} sessions x {HEAP_EVENTS:,} events kept): "
          f"median {valid:.1f} us/op ({REFERENCE_US / valid:.1f}x the reference; goal >= 30x)")
    print(f"todo_write invalid-status call, same heap: median {error:.1f} us/op "
          f"({error / valid:.2f}x our valid path; goal <= 1.5x)")
    print(f"todo_write full call, same heap, every item new to the call (nothing remembered): median {new:.1f} us/op "
          f"({REFERENCE_US / new:.1f}x the reference)")
    print(f"todos fold: median {fold * 1000:.0f} ns/event ({1 / fold:.1f}M events/s)")


if __name__ == "__main__":
    main()
