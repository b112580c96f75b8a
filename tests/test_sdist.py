"""The source distribution carries the project, never a tool's cache or a run's leftovers (issue 23).

Built the way a release is (``uv build --sdist``) from a copy of the project in which every cache this project's
tools leave behind is present, so the check does not depend on what the machine running it happened to create.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests import needs
from tests.conftest import REPO_ROOT

LEFTOVERS = {
    ".import_linter_cache/dsh_todo.meta.json": "{}",  # lint-imports (its own .gitignore is not read by hatchling)
    ".mypy_cache/3.11/cache.db": "",
    ".ruff_cache/CACHEDIR.TAG": "",
    ".pytest_cache/v/cache/nodeids": "[]",
    ".hypothesis/examples/x": "",
    ".benchmarks/Linux/0001.json": "{}",
    ".dsh-todo/sessions/--p--/s/session.jsonl": "{}\n",
    "src/dsh_todo/__pycache__/cli.cpython-311.pyc": "",
    "tests/__pycache__/conftest.cpython-311.pyc": "",
    "test-artifacts/shot.png": "",
    "dist/old.tar.gz": "",
    ".venv-3.13/pyvenv.cfg": "",  # the second interpreter's environment (.ci/run)
}
"""A file in each place a cache or a run's output lands, by relative path."""

NOT_COPIED = (".git", ".venv", *sorted({path.split("/")[0] for path in LEFTOVERS} - {"src", "tests"}))
"""What the copy leaves out: the repository, the environment, and every place :data:`LEFTOVERS` fills itself."""


@pytest.mark.slow
def test_the_sdist_carries_no_cache(tmp_path: Path) -> None:
    """Repro: ``uv build --sdist`` after ``uv run lint-imports`` put ``.import_linter_cache/*.json`` (and its
    ``CACHEDIR.TAG``) into ``dsh_todo-0.1.0.tar.gz``."""
    needs.program("uv", "the sdist is built with uv build --sdist")
    project = tmp_path / "project"
    shutil.copytree(REPO_ROOT, project, ignore=shutil.ignore_patterns(*NOT_COPIED, "__pycache__", "uv.lock"))
    for relative, text in LEFTOVERS.items():
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_text(text, encoding="utf-8")
    done = subprocess.run(["uv", "build", "--sdist", "--out-dir", str(tmp_path / "out"), str(project)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (sdist,) = (tmp_path / "out").glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    leaked = [name for name in names if name in LEFTOVERS or name.split("/")[0] in NOT_COPIED or "__pycache__" in name]
    assert leaked == []
    assert {"src/dsh_todo/cli.py", "tests/conftest.py", "pyproject.toml", "README.md"} <= set(names)
