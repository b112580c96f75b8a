"""The README's picture of the board is made by ``scripts/board_screenshot.py`` from the demo's sessions; this keeps
the script working (a picture nobody can regenerate stops being true)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import needs
from tests.carriers.web.conftest import chromium_path
from tests.conftest import REPO_ROOT


@pytest.mark.browser
@pytest.mark.slow
def test_the_board_screenshot_script_writes_a_small_png(tmp_path: Path) -> None:
    if chromium_path() is None:
        needs.unavailable("Chromium is not installed (apt-get install -y chromium); browser tests need it")
    out = tmp_path / "board.png"
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "board_screenshot.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) < 200_000
    committed = REPO_ROOT / "docs" / "board.png"
    assert committed.stat().st_size < 200_000
