"""The large crash run: a writing child process SIGKILLed at random moments, 200 times per encoding by default.

The child (``tests/harness/persistence/crash_child.py``) appends turns with ``todo/write`` events through the standard
persistence and projection-checkpoint plugins, flushing after every ``todo/write``, ``step/end`` and ``turn/end`` and
reporting each acknowledged range of seqs with a digest. After every kill the log must load (recovery committed on
every other run, left to the next child's load on the others), hold every acknowledged event byte for byte, have its
open turn closed as interrupted, and give the same standing plan through its checkpoint as through a full read.

Run: ``uv run python benchmarks/crash.py [--kills 200] [--seed N]``; the test suite runs the same driver 12 times
per encoding (``tests/harness/persistence/test_crash.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.harness.persistence

from tests.harness.persistence.crash_child import run_crashes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=200, help="kills per encoding (default 200)")
    parser.add_argument("--seed", type=int, default=20260600)
    args = parser.parse_args()
    failed = False
    for offset, compression in enumerate(("none", "zstd")):
        with tempfile.TemporaryDirectory(prefix="dsh-crash-") as tmp:
            start = time.perf_counter()
            report = run_crashes(Path(tmp) / "root", compression, args.kills, args.seed + offset)
            elapsed = time.perf_counter() - start
        print(f"{compression}: {report.kills} kills in {elapsed:.0f} s, {report.acknowledged} acknowledged flushes "
              f"all present, {report.interrupted_turns} interrupted turns closed, {report.torn_tails} torn tails "
              f"cut, {report.killed_before_start} kills during start-up/recovery, {report.events} events at the end, "
              f"{report.checkpointed_reads} cold reads served by the checkpoint; failures: {len(report.failures)}")
        for failure in report.failures:
            print("  " + failure)
        failed = failed or bool(report.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
