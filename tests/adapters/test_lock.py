"""The binding's call lock across threads and event loops (issue 34, item 1). Threads are synchronised with events
and the lock's own queue, never timed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from dsh_todo.adapters.lock import CallLock

WAIT_S = 30.0


def wait_until(condition: Callable[[], bool]) -> None:
    pause = threading.Event()
    for _ in range(int(WAIT_S * 100)):
        if condition():
            return
        pause.wait(0.01)
    pytest.fail("the condition never held")


def test_waiters_on_other_threads_and_loops_get_the_lock_in_arrival_order() -> None:
    """Each holder runs in ``asyncio.run`` on a thread of its own, as ADK's tool thread pool runs each call. With an
    ``asyncio.Lock`` the second waiter hung for ever and the third raised ``… is bound to a different event loop``."""
    lock = CallLock()
    order: list[int] = []
    holding, release = threading.Event(), threading.Event()

    async def hold(index: int) -> None:
        async with lock:
            order.append(index)
            if index == 0:
                holding.set()
                assert await asyncio.to_thread(release.wait, WAIT_S)

    threads = [threading.Thread(target=lambda i=i: asyncio.run(hold(i)), daemon=True) for i in range(4)]
    threads[0].start()
    assert holding.wait(WAIT_S)
    for index in (1, 2, 3):
        threads[index].start()
        wait_until(lambda index=index: len(lock._waiters) == index)
    release.set()
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive()
    assert order == [0, 1, 2, 3]
    assert not lock.locked()


def test_a_waiter_cancelled_before_its_turn_leaves_the_queue() -> None:
    lock = CallLock()

    async def main() -> list[str]:
        seen: list[str] = []
        await lock.acquire()
        cancelled = asyncio.ensure_future(lock.acquire())
        later = asyncio.ensure_future(lock.acquire())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        lock.release()
        await later
        seen.append("later holds it")
        lock.release()
        return seen

    assert asyncio.run(main()) == ["later holds it"]
    assert not lock.locked()


def test_a_waiter_cancelled_after_the_lock_was_handed_to_it_hands_it_on() -> None:
    """The lock is handed to a waiter on another loop whose loop is busy; before the waiter wakes, its task is
    cancelled: the lock it was given goes to the next waiter instead of being held by nobody for ever."""
    lock = CallLock()
    loop_busy, handed = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    async def waiter_side() -> None:
        task = asyncio.ensure_future(lock.acquire())
        await asyncio.sleep(0)  # queued behind the holder
        loop_busy.set()
        assert handed.wait(WAIT_S)  # the loop is blocked here while the lock is handed over from the other thread
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            outcome["cancelled"] = True

    async def holder_side() -> None:
        await lock.acquire()
        thread = threading.Thread(target=lambda: asyncio.run(waiter_side()), daemon=True)
        thread.start()
        assert await asyncio.to_thread(loop_busy.wait, WAIT_S)
        lock.release()  # handed to the waiter, whose wake-up is queued behind the busy callback
        handed.set()
        await asyncio.to_thread(thread.join, WAIT_S)
        await asyncio.wait_for(lock.acquire(), WAIT_S)  # the lock came back: it was not lost
        outcome["reacquired"] = True
        lock.release()

    asyncio.run(holder_side())
    assert outcome == {"cancelled": True, "reacquired": True}
    assert not lock.locked()
