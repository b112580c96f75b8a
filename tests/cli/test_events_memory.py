"""``dsh-todo events`` streams: a log of any size costs it a read piece, not the log (issue 22 item 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.long_logs import EVENTS_PER_TURN, long_log

_HWM = """
import atexit, sys
def _hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
atexit.register(lambda: print(f"VmHWM {_hwm()}", file=sys.stderr))
from dsh_todo.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``dsh-todo`` in a fresh interpreter that prints its own peak resident size (VmHWM) as the last stderr line."""

MEMORY_BOUND = 64 << 20
"""What ``events`` may peak at beyond the same command on a one-turn log."""


def events_with_peak(log: Path, out: Path) -> tuple[int, int]:
    """Exit code and peak resident bytes of ``dsh-todo events LOG > out``."""
    with out.open("wb") as sink:
        proc = subprocess.run([sys.executable, "-c", _HWM, "events", str(log)], stdout=sink, stderr=subprocess.PIPE,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
    peak = proc.stderr.splitlines()[-1]
    assert peak.startswith("VmHWM "), proc.stderr
    return proc.returncode, int(peak.split()[1])


@pytest.mark.slow
def test_events_of_a_long_log_holds_no_more_than_a_short_one(tmp_path: Path) -> None:
    """Repro: ``dsh-todo events`` read and kept the whole log before printing a line (610 MB for a 100 MB log). Here
    a 38 MB log (240,000 events) peaks within 64 MB of a one-turn log, and every event is printed once, in order."""
    short = long_log(tmp_path / "short", 1)
    long = long_log(tmp_path / "long", 16_000)
    code, baseline = events_with_peak(short, tmp_path / "short.out")
    assert code == 0
    code, peak = events_with_peak(long, tmp_path / "long.out")
    assert code == 0
    assert peak - baseline <= MEMORY_BOUND, f"one turn: {baseline >> 20} MiB, 16,000 turns: {peak >> 20} MiB"
    count = 0
    with (tmp_path / "long.out").open("rb") as printed:
        for count, line in enumerate(printed, 1):
            if count in (1, 4, 9, 240_000):
                assert json.loads(line)["seq"] == count - 1
    assert count == 16_000 * EVENTS_PER_TURN
