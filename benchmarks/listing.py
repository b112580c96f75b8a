"""Listing a root: the same sessions in one project directory and one project directory each (issue 22, item 5).

``dsh-todo sessions`` and the web page's session list both run :func:`dsh_todo.logview.list_sessions`, which reads
every session's header, standing plan and verdict. A root where every session has its own working directory (an
MCP client started from a new folder each time) has one project directory per session; the listing must cost the
same there as in one folder. Each round builds nothing: both roots are built once (copies of a fixture log), then
listed alternately, ``--rounds`` times, in this process; medians.

Run: ``uv run python benchmarks/listing.py [--sessions 1000] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.crafted

from tests.crafted import spread_sessions

from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.logview import list_sessions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=1000, help="sessions per root (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="listings of each root (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-listing-") as tmp:
        roots = {"one folder": Path(tmp) / "one", "a folder each": Path(tmp) / "each"}
        spread_sessions(roots["one folder"], args.sessions, folders=1)
        spread_sessions(roots["a folder each"], args.sessions, folders=args.sessions)
        times: dict[str, list[float]] = {name: [] for name in roots}
        for _ in range(args.rounds):
            for name, root in roots.items():
                start = time.perf_counter()
                views = list_sessions(JsonlBackend(root))
                times[name].append(time.perf_counter() - start)
                bad = [view.health.describe() for view in views if not view.health.ok]
                if len(views) != args.sessions or bad:
                    print(f"{name}: {len(views)} rows, {len(bad)} not ok: {bad[:3]}")
                    return 1
    one, each = (statistics.median(times[name]) for name in roots)
    for name in roots:
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"{args.sessions} sessions, {name}: median {statistics.median(times[name]):.3f} s (runs: {runs})")
    print(f"a folder each / one folder: {each / one:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
