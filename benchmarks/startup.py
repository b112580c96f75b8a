"""How long a fresh ``dsh-todo plan`` process spends importing (issue goal: ≤ 50 ms).

Runs ``python -X importtime -m dsh_todo.cli plan <log>`` on a small real log (written by ``dsh-todo demo``) many
times and sums the top-level import times of each run; prints the median and the minimum (the minimum is the
least disturbed by other work on a shared machine) and the largest top-level imports of the fastest run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def import_times(stderr: str) -> list[tuple[int, str]]:
    """``(cumulative µs, module)`` of each top-level import in ``-X importtime`` output."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if cumulative.strip().isdigit() and not name.startswith("  "):
            rows.append((int(cumulative), name.strip()))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        subprocess.run([sys.executable, "-m", "dsh_todo.cli", "demo", "--root", root], check=True,
                       capture_output=True)
        log = next(Path(root).glob("*/*/session.jsonl*"))
        totals, best = [], None
        for _ in range(args.runs):
            done = subprocess.run([sys.executable, "-X", "importtime", "-m", "dsh_todo.cli", "plan", str(log)],
                                  capture_output=True, text=True, check=True)
            rows = import_times(done.stderr)
            total = sum(us for us, _ in rows) / 1000
            totals.append(total)
            if best is None or total < best[0]:
                best = (total, rows)
    assert best is not None
    print(f"dsh-todo plan imports: median {statistics.median(totals):.1f} ms, min {min(totals):.1f} ms "
          f"({args.runs} runs; goal ≤ 50 ms)")
    print("largest top-level imports of the fastest run:")
    for us, name in sorted(best[1], reverse=True)[:8]:
        print(f"  {us / 1000:6.1f} ms  {name}")


if __name__ == "__main__":
    main()
