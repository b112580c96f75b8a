"""The stop-signal mechanism every long-running command shares (:mod:`dsh_todo.carriers.stopping`), in process.

The commands themselves are driven by real signals in ``tests/cli/test_stop_signals.py`` and
``tests/carriers/mcp/test_mcp_lifecycle.py``; here are the rules they rest on, which a subprocess can hardly time: a
signal during the boot is remembered, only the first one acts, and the caller's handlers come back afterwards.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import pytest

from dsh_todo.carriers.stopping import STOP_SIGNALS, Stopping


@pytest.fixture
def stopping() -> Iterator[Stopping]:
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    stopping = Stopping()
    stopping.install()
    try:
        yield stopping
    finally:
        stopping.done()
        for number, handler in previous.items():
            signal.signal(number, handler)


def test_a_signal_during_the_boot_stops_the_work_as_soon_as_it_is_served(stopping: Stopping) -> None:
    signal.raise_signal(signal.SIGHUP)
    assert stopping.signal == signal.SIGHUP
    calls: list[str] = []
    stopping.serve(lambda: calls.append("stop"))
    assert calls == ["stop"]


def test_only_the_first_signal_acts(stopping: Stopping) -> None:
    calls: list[str] = []
    stopping.serve(lambda: calls.append("stop"))
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGTERM, signal.SIGHUP):
        signal.raise_signal(number)
    assert calls == ["stop"]
    assert stopping.signal == signal.SIGINT


def test_served_from_a_loop_it_runs_on_that_loop(stopping: Stopping) -> None:
    """A task's ``cancel`` (``run``'s turn, the ACP connection) is called on its loop, not inside the handler."""

    async def served() -> str:
        task = asyncio.current_task()
        assert task is not None
        stopping.serve(task.cancel)
        signal.raise_signal(signal.SIGTERM)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "cancelled"
        return "slept"

    assert asyncio.run(served()) == "cancelled"


def test_done_gives_the_caller_its_handlers_back() -> None:
    """``cli.main`` called in process (a test) must not leave SIGINT ignored or swallowed for its caller."""
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    stopping = Stopping()
    stopping.install()
    assert all(signal.getsignal(number) != previous[number] for number in STOP_SIGNALS)
    stopping.done()
    assert {number: signal.getsignal(number) for number in STOP_SIGNALS} == previous


def test_done_in_the_process_own_command_ignores_later_signals() -> None:
    """Repro: a full ``.ci/run`` failed ``test_signals_in_a_burst_end_it_once`` with exit 143: the server had closed
    its turn ``completed``, then :meth:`Stopping.done` gave the defaults back and the burst's SIGTERM, passed on by
    the stand-in a moment late, killed the process before interpreter exit ignored the signals. In the process's own
    command (``cli.main`` without ``argv``) ``done`` ignores them at once."""
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    stopping = Stopping()
    stopping.own_process = True
    try:
        stopping.install()
        stopping.done()
        assert {number: signal.getsignal(number) for number in STOP_SIGNALS} == dict.fromkeys(
            STOP_SIGNALS, signal.SIG_IGN)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


_AT_EXIT = """
import atexit, gc, signal, sys
from dsh_todo.carriers.stopping import STOPPING

def report():  # registered first, so it runs last: after the stop machinery's own exit hook
    print(gc.get_freeze_count() > 0, signal.getsignal(signal.SIGTERM) == signal.SIG_IGN)

atexit.register(report)
STOPPING.own_process = sys.argv[1] == "own"
STOPPING.install()
STOPPING.done()
"""


@pytest.mark.parametrize(("owner", "expected"), [("embedding", "False False"), ("own", "True True")])
def test_only_the_cli_own_process_is_frozen_and_deaf_at_exit(owner: str, expected: str) -> None:
    """Repro: a process that embeds the stop machinery (a test, an application calling ``cli.main(argv)`` or a
    carrier) had its whole heap frozen (``gc.freeze``) and its stop signals ignored by the machinery's exit hook,
    which is process policy only the command line's own process may set. Printed before: ``True True`` for both."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _AT_EXIT, owner], capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.split() == expected.split()
