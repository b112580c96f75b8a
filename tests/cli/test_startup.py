"""What a fresh ``dsh-todo plan`` process imports: the reader's modules, not the writer's nor the servers'.

Issue 14 goal 4 (a ``plan`` process spends ≤ 50 ms importing) is timed in ``benchmarks/startup.py``; this pins the
behaviour behind it. Repro of the defect: ``python -X importtime -m dsh_todo.cli plan LOG`` spent about 140 ms
importing, a third of it in modules a reader never runs: the persistence package ``__init__`` imported the
service, write-behind (``threading``, ``logging``) and the lock; the ``todos`` projection imported the whole tool
(its registry and validators) and the live session machinery; the parser imported every command's module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_todo.cli import main
from tests.crafted import copy_fixture

PROBE = """
import json, sys
from dsh_todo.cli import main
code = main(["plan", *sys.argv[1:]])
print(json.dumps([code, sorted(sys.modules)]))
"""

NEVER = [
    "asyncio", "yaml", "importlib.metadata", "dataclasses_json",
    "dsh_todo.harness.loader", "dsh_todo.harness.context", "dsh_todo.harness.session",
    "dsh_todo.harness.frozen", "dsh_todo.harness.tools", "dsh_todo.tool_todo.description", "dsh_todo.tool_todo.tool",
    "dsh_todo.standard", "dsh_todo.harness.plugin_shape", "difflib", "textwrap",
    "dsh_todo.harness.persistence.service", "dsh_todo.harness.persistence.batching",
    "dsh_todo.harness.persistence.jsonl.writer", "dsh_todo.harness.persistence.jsonl.lock",
    "dsh_todo.harness.persistence.jsonl.backend",
    "dsh_todo.harness.persistence.checkpoints", "dsh_todo.harness.persistence.postgres",
    "dsh_todo.commands.run", "dsh_todo.commands.web", "dsh_todo.commands.mcp", "dsh_todo.commands.demo",
    "logging", "psycopg", "starlette", "uvicorn",
]
"""Modules a ``plan`` process must not load: the event loop and YAML (the loader's), distribution metadata (the
version), the live harness, the writer side of persistence, other commands, the servers."""


def loaded_by_plan(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60,
                          check=True)
    code, modules = json.loads(done.stdout.splitlines()[-1])
    return code, set(modules)


def demo_log(root: Path, compression: str, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["demo", "--root", str(root), "--compression", compression]) == 0
    capsys.readouterr()
    return next(root.glob("*/*/session*.jsonl*"))


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_plan_of_a_checkpointed_log_loads_no_writer(tmp_path: Path, compression: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = demo_log(tmp_path, compression, capsys)
    assert (log.parent / "projections.json").exists()  # the checkpointed read: its small prefix needs no OpenSSL
    code, modules = loaded_by_plan(str(log))
    assert code == 0
    assert "dsh_todo.logview.reader" in modules  # the probe did read through the one reader
    assert sorted(modules.intersection([*NEVER, "hashlib", "_hashlib"])) == []


@pytest.mark.parametrize("fixture", ["b-three-turns/none", "b-three-turns/zstd"])
def test_plan_of_a_log_without_checkpoint_does_not_hash(tmp_path: Path, fixture: str) -> None:
    """A log with no ``projections.json`` (DSH's own) is read in one pass: no digest to check, so no ``hashlib``."""
    log = copy_fixture(fixture, tmp_path)
    code, modules = loaded_by_plan(str(log))
    assert code == 0
    assert sorted(modules.intersection([*NEVER, "hashlib"])) == []


def test_plan_by_id_under_a_root_loads_no_writer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = demo_log(tmp_path / "root", "zstd", capsys)
    (log.parent / "projections.json").unlink()
    code, modules = loaded_by_plan(log.parent.name, "--root", str(tmp_path / "root"))
    assert code == 0
    assert sorted(modules.intersection(NEVER)) == []
