"""Throwaway virtual environments for the tests that drive a package our own environment cannot hold (CrewAI needs
openai 2, Phoenix is a server of its own): made with uv, stopped with the reason (:mod:`tests.needs`) when uv is
missing, the install fails or takes too long."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests import needs

INSTALL_TIMEOUT_S = 600


def environment(venv: Path, packages: list[str], what: str, *, no_config: bool = False) -> Path:
    """The interpreter of ``venv`` with ``packages`` installed (``uv pip install`` arguments; a no-op once they are
    there); the test stops, saying why, when that cannot be had. ``no_config``: uv ignores this project's own
    settings (its constraint pins, which ``what`` may not install beside)."""
    uv = shutil.which("uv")
    if uv is None:
        needs.unavailable(f"uv is not on PATH: cannot install {what} into an environment of its own")
    python = venv / "bin" / "python"
    config = ["--no-config"] if no_config else []
    steps = [] if python.exists() else [[uv, "venv", "-q", *config, "--python", sys.executable, str(venv)]]
    steps.append([uv, "pip", "install", "-q", *config, "--python", str(python), *packages])
    try:
        for argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                needs.unavailable(f"{what} could not be installed: {done.stderr.strip()[-300:]}")
    except subprocess.TimeoutExpired:
        needs.unavailable(f"installing {what} took over {INSTALL_TIMEOUT_S} s")
    return python
