"""How a long-running command ends on SIGTERM, SIGINT or SIGHUP: the way it ends on its own, log closed and flushed.

``run``, ``mcp`` (stdio), ``acp`` and ``web`` each hand :data:`STOPPING` what ends their work (``serve``): the MCP
connection's stop event, the ``run`` turn's or the ACP connection's task's ``cancel``, the web server's done event.
The first signal calls it; the command then closes what it holds (a turn ``completed`` or ``aborted``, the log
flushed, the writer lock let go) exactly as when its input ends, and exits with the status it documents.

The handlers are Python-level (``signal.signal``), not an event loop's, and are installed for the command's whole
life: a loop's handlers are removed when it closes, which puts the defaults back (SIGTERM and SIGHUP kill, SIGINT
raises ``KeyboardInterrupt`` and prints a traceback) while the session is still being closed, and clients send a
second signal soon after the first (Claude Code: SIGTERM 100 ms after SIGINT). A signal during the boot is
remembered, so the work ends as soon as it starts; signals while the command closes change nothing. The command's
own caller (a test, an application calling ``cli.main(argv)`` in-process) gets its handlers back when the command
is done, and its process is otherwise left as it was. Only in the command line's own process
(:attr:`Stopping.own_process`) are the signals ignored at interpreter exit, so a late one cannot turn a clean exit
into a kill, and the heap frozen so the exit is quick (:meth:`Stopping._exiting`).
"""

from __future__ import annotations

import atexit
import gc
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import asyncio

__all__ = ["STOPPING", "STOP_SIGNALS", "Stopping"]

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Signals that end a command's work as the end of its input does."""


class Stopping:
    """:data:`STOP_SIGNALS` for the whole life of a command (see the module's docstring)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        """The first stop signal that came (``None``: none did)."""
        self._stop: Callable[[], object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}
        self._at_exit = False
        self.own_process = False
        """The command line is this process's own (``cli.main`` without ``argv``): once the work is done there is
        no caller to give the handlers back to, and the process is about to exit, so :meth:`done` ignores the
        signals at once instead; given back, the defaults would let a signal that arrives between the command's end
        and interpreter exit (a burst's last, or one a stand-in passed on late) kill a process that closed cleanly."""

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def install(self) -> None:
        """Handle the stop signals from now until :meth:`done` (a signal before :meth:`serve` is remembered)."""
        self.signal, self._stop, self._loop = None, None, None
        self._previous = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}
        if not self._at_exit:
            atexit.register(self._exiting)
            self._at_exit = True

    def serve(self, stop: Callable[[], object]) -> None:
        """``stop`` ends the work being served: called on the next signal, or now if one came already. Called from
        inside an event loop, it runs on that loop (``call_soon_threadsafe``: an ``Event.set`` or a task's
        ``cancel``); outside one, from the handler itself, on the main thread (a ``threading.Event.set``)."""
        self._loop = _running_loop()
        self._stop = stop
        if self.requested:
            self._call()

    def done(self) -> None:
        """The work is closed: the caller's handlers are back, or, in the process's own command (:attr:`own_process`),
        the signals are ignored from now on (otherwise that happens at interpreter exit, :meth:`ignore`)."""
        self._stop, self._loop = None, None
        if self.own_process:
            self.ignore()
        else:
            for number, handler in self._previous.items():
                signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    def ignore(self) -> None:
        """Later stop signals are ignored: the process is exiting, and interpreter shutdown would otherwise put the
        defaults back, so a SIGTERM 100 ms after a SIGINT would kill a process that has already exited 0."""
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)

    def _exiting(self) -> None:
        """At interpreter exit, in the command line's own process only (:attr:`own_process`; a process that embeds
        this machinery keeps its handlers and its collector): :meth:`ignore`, and freeze the heap (``gc.freeze``),
        since everything was closed explicitly and the interpreter's own finalization would otherwise walk it in
        full collections, about 150 ms with a model client loaded: most of the time from a signal to the exit
        (``benchmarks/stop_signals.py``: 32–36 ms with it, 165–270 ms without; the goal is 100 ms). Only garbage in
        reference cycles is left to the operating system, which takes the whole process anyway."""
        if not self.own_process:
            return
        self.ignore()
        gc.freeze()

    def _handle(self, signum: int, _frame: object) -> None:
        if self.signal is None:
            self.signal = signum
            self._call()

    def _call(self) -> None:
        stop, loop = self._stop, self._loop
        if stop is None:
            return
        if loop is None:
            stop()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(stop)


STOPPING: Final = Stopping()
"""The process's one :class:`Stopping` (signal handlers are per process)."""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any. None can run where :mod:`asyncio` was never imported, so it is
    looked up among the loaded modules rather than imported: the CLI marks every command's process
    (:attr:`Stopping.own_process`) through this module, and a ``dsh-todo plan`` process has no event loop to pay
    for (decision 0014)."""
    loaded = sys.modules.get("asyncio")
    if loaded is None:
        return None
    try:
        running: asyncio.AbstractEventLoop = loaded.get_running_loop()
    except RuntimeError:
        return None
    return running
