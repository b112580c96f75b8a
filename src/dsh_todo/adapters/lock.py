"""One call at a time on a binding, whatever thread or event loop each call runs in.

Frameworks run a tool's calls in more places than one event loop: Google ADK's tool thread pool runs every call of
an async tool on a pool thread in an event loop of its own (``asyncio.run`` per call), LangChain runs a synchronous
agent on its executor thread, and one binding may be shared by ``run_sync`` calls on several threads. An
``asyncio.Lock`` binds itself to the first loop that waits on it and wakes a waiter with that loop's ``call_soon``,
which is not thread-safe: a waiter on another loop is never woken (a hang) or refused (``RuntimeError: … is bound to
a different event loop``). A ``threading.Lock`` waited on by a coroutine would block its whole loop.

:class:`CallLock` is both: waiting is a future on the waiter's own loop, woken with ``call_soon_threadsafe``, and
the bookkeeping sits under a plain thread lock held for a few lines. It is fair (first come, first served), so a
model's parallel calls are written in the order they reached the tool.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType

__all__ = ["CallLock"]


class _Waiter:
    __slots__ = ("future", "granted", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.granted = False
        """Whether the lock was handed to this waiter (it then owns it, even if it is cancelled before it wakes)."""


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class CallLock:
    """A fair lock for coroutines on any event loop in any thread (``async with lock:``)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiters: deque[_Waiter] = deque()

    def locked(self) -> bool:
        return self._held

    async def acquire(self) -> None:
        with self._mutex:
            if not self._held:
                self._held = True
                return
            waiter = _Waiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except BaseException:  # cancelled while waiting: give the lock on if it was handed over meanwhile
            with self._mutex:
                if waiter.granted:
                    self._hand_on()
                else:
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        with self._mutex:
            if not self._held:
                raise RuntimeError("the call lock is not held")
            self._hand_on()

    def _hand_on(self) -> None:
        """Give the held lock to the first waiter whose loop still runs, or free it (under the mutex)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            waiter.granted = True
            try:
                waiter.loop.call_soon_threadsafe(_wake, waiter.future)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                continue
            return
        self._held = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.release()
