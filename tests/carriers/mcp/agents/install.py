"""The coding-agent CLIs the suite drives ``dsh-todo mcp`` with, pinned, and where they are installed.

They come from the npm registry (about 1.1 GB together), so they live outside the repository, in one folder per
set of pinned versions under the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``), shared by every checkout:
``.ci/run`` installs them before the tests (``python -m tests.carriers.mcp.agents.install``), and the first test
that needs them installs them when npm is there and they are not. Without npm their tests skip, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PINNED = {
    "@openai/codex": "0.171.0",
    "@anthropic-ai/claude-code": "2.1.332",
    "@google/gemini-cli": "0.61.0",
    "opencode-ai": "1.18.33",
}
"""The CLIs and their exact versions (raise them together with the tests that drive them)."""

BINARIES = {"codex": "codex", "claude": "claude", "gemini": "gemini", "opencode": "opencode"}
"""The command each package puts in ``node_modules/.bin``."""

INSTALL_SECONDS = 900


def prefix() -> Path:
    """The folder the pinned set is installed in: one per set, so a version bump installs beside the old one."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(json.dumps(PINNED, sort_keys=True).encode()).hexdigest()[:12]
    return cache / "dsh-todo" / f"agent-clis-{key}"


def _done(where: Path) -> Path:
    return where / "installed"


def install() -> Path | str:
    """The install folder, installing the pinned CLIs first if they are not there; a reason (str) when they cannot
    be had here (no npm, or npm's install failed)."""
    where = prefix()
    if _done(where).exists():
        return where
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed, so the coding-agent CLIs cannot be (apt-get install npm)"
    where.mkdir(parents=True, exist_ok=True)
    (where / "package.json").write_text(json.dumps({"private": True, "dependencies": PINNED}, indent=2) + "\n")
    command = [npm, "install", "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(command, cwd=where, capture_output=True, text=True, timeout=INSTALL_SECONDS,
                              check=False)
    except subprocess.TimeoutExpired:
        return f"npm install of the coding-agent CLIs took over {INSTALL_SECONDS} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"npm install of the coding-agent CLIs failed: {last}"
    missing = [name for name in BINARIES.values() if not (where / "node_modules" / ".bin" / name).exists()]
    if missing:
        return f"npm installed the coding-agent CLIs without {', '.join(missing)}"
    _done(where).write_text(json.dumps(PINNED) + "\n")
    return where


def binary(name: str) -> Path | str:
    """The path of one CLI's command (``codex``, ``claude``, ``gemini``, ``opencode``), or why it is missing."""
    where = install()
    if isinstance(where, str):
        return where
    return where / "node_modules" / ".bin" / BINARIES[name]


if __name__ == "__main__":
    result = install()
    if isinstance(result, str):
        print(f"coding-agent CLIs: {result}", file=sys.stderr)
        sys.exit(0)  # the tests skip with the same reason; CI goes on
    print(f"coding-agent CLIs installed in {result}")
