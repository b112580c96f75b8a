"""Listing a root costs the same whether its sessions share one project directory or have one each (issue 22).

The cost is asserted by structure, not by time (``benchmarks/listing.py`` times it): the listing is counted in
directory scans and ``stat`` calls, through spies that count and pass every call on unchanged.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.logview import list_sessions
from dsh_todo.standard import open_runtime
from tests.crafted import spread_sessions
from tests.harness.persistence.test_checkpoints import turn


def build(root: Path, count: int, folders: int) -> None:
    """``count`` copied logs (DSH 0.1's, format v0) and three written by the runtime (format v4, each with its
    checkpoint, in the root's encoding: raw), over ``folders`` working directories plus three."""
    spread_sessions(root, count, folders=folders)
    ctx = open_runtime(root, batch_delay_ms=60_000)
    for index in range(3):
        session = ctx.sessions.create(f"w{index}", cwd=f"/home/dev/written/{index}")
        turn(ctx, session, 1, ("step", "in_progress"))
    ctx.session_persistence.flush()
    ctx.dispose()
    assert sorted({path.name for path in root.glob("*/*/session*.jsonl*")}) == ["session.jsonl", "session.v4.jsonl"]


def counted_listing(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], int, int]:
    """The listing of ``root``: how often each directory was scanned, how many ``stat`` calls it made, its rows.
    Only this thread's calls count: a thread an earlier test left behind (an exporter still retrying) may call
    ``os.stat`` meanwhile, and once made the counts differ by 6 for no fault of the listing's."""
    scanned: Counter[str] = Counter()
    stats = [0]
    real_scandir, real_stat = os.scandir, os.stat
    listing = threading.get_ident()

    def scandir(path: str | os.PathLike[str]) -> os._ScandirIterator[str]:
        if threading.get_ident() == listing:
            scanned[os.fspath(path)] += 1
        return real_scandir(path)

    def stat(*args: object, **kwargs: object) -> os.stat_result:
        if threading.get_ident() == listing:
            stats[0] += 1
        return real_stat(*args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(os, "scandir", scandir)
        patched.setattr(os, "stat", stat)
        views = list_sessions(JsonlBackend(root))
    assert all(view.health.ok for view in views), [view.health for view in views if not view.health.ok]
    return scanned, stats[0], len(views)


def test_listing_scans_each_directory_once_however_many_project_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro: one session per working directory listed in 8.3 s at 250 sessions, 36.6 s at 500 and 149 s at 1,000
    (the same 500 in one folder: 0.46 s): each session's read looked its id up again in every project directory
    (``JsonlBackend.find``: a scan of the root and two ``stat`` calls per project directory, several times per
    session). Here 40 sessions in one folder and 40 in a folder each: every directory is scanned at most once, and
    the folders cost no ``stat`` calls beyond the first."""
    count = 40
    one, each = tmp_path / "one", tmp_path / "each"
    build(one, count, folders=1)
    build(each, count, folders=count)
    scanned_one, stats_one, rows_one = counted_listing(one, monkeypatch)
    scanned_each, stats_each, rows_each = counted_listing(each, monkeypatch)
    assert rows_one == rows_each == count + 3
    assert max(scanned_each.values()) == 1, scanned_each.most_common(3)
    assert max(scanned_one.values()) == 1, scanned_one.most_common(3)
    assert len(scanned_each) == 1 + count + 3  # the root, then each project directory
    assert stats_each == stats_one, (stats_each, stats_one)
