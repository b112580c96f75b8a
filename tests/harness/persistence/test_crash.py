"""Crash test with real processes: a writing child is SIGKILLed at random moments, and the log must always load,
hold every acknowledged event, and have its open turn closed as interrupted (SPEC §5.5).

12 kills per encoding with a fixed seed (24 in all, about 10 s here); ``benchmarks/crash.py`` runs 200.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.persistence.crash_child import run_crashes


@pytest.mark.slow
@pytest.mark.parametrize(("compression", "seed"), [("none", 20260601), ("zstd", 20260602)])
def test_sigkill_at_random_moments(tmp_path: Path, compression: str, seed: int) -> None:
    report = run_crashes(tmp_path / "root", compression, kills=12, seed=seed)
    assert report.failures == []
    assert report.kills == 12
    assert report.acknowledged > 0
    assert report.interrupted_turns > 0, "no kill landed inside a turn"
