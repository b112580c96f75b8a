"""A backend is one folder and one registration (issue 35, goal 1; decision 0042).

Repro of what this holds: the in-memory backend was named in 9 files outside ``persistence/memory.py`` (the entry
points, the standard composition, the test helpers and their docs, the import-graph test, the contract tests, an MCP
test and its own tests beside the others); a new backend had to touch as many.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh_todo.harness.persistence.contract import LogBackend
from dsh_todo.harness.persistence.recorder import Recorder, WholeLogBackend
from dsh_todo.harness.persistence.registry import backend_plugin, backends

REPO = Path(__file__).resolve().parents[3]

MEMORY_NAMES = re.compile(r"persistence[./]memory\b|\bMemory(Backend|Writer)\b|dsh-session-persistence-memory")
"""How a file names the in-memory backend: imports its folder, names its classes, or names its plugin. Choosing a
registered backend by its short name (``backend_composition("memory", ...)``), as a user chooses one, is not
naming it."""


def files_naming(pattern: re.Pattern[str], *, outside: tuple[str, ...]) -> list[str]:
    """The code files (``src``, ``tests``, ``benchmarks``, ``pyproject.toml``) outside the ``outside`` folders whose
    text matches ``pattern``, relative to the repository."""
    found = []
    paths = [REPO / "pyproject.toml", *[path for top in ("src", "tests", "benchmarks")
                                        for path in sorted((REPO / top).rglob("*.py"))]]
    for path in paths:
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(outside) or relative == "tests/harness/persistence/test_registry.py":
            continue
        if pattern.search(path.read_text(encoding="utf-8")):
            found.append(relative)
    return found


def test_the_memory_backend_is_named_outside_its_folders_by_its_registration_alone() -> None:
    """Outside ``persistence/memory/`` and its own tests, only ``pyproject.toml`` names it: the entry point that
    registers it (and its plugin's, for compositions written by name). A file more fails here."""
    outside = ("src/dsh_todo/harness/persistence/memory/", "tests/harness/persistence/memory/")
    assert files_naming(MEMORY_NAMES, outside=outside) == ["pyproject.toml"]


def test_the_count_fails_for_a_file_that_imports_the_backend(tmp_path: Path) -> None:
    """The pattern catches each way of naming it (so the count above can fail)."""
    for text in ("from dsh_todo.harness.persistence.memory import x", "MemoryBackend()",
                 '"@deepseek-ai/dsh-session-persistence-memory"', "import dsh_todo.harness.persistence.memory"):
        assert MEMORY_NAMES.search(text), text
    assert not MEMORY_NAMES.search('memory_log_composition(batch_delay_ms=5)  # "memory"')


@pytest.mark.parametrize("short", sorted(backends()))
def test_each_registered_backend_says_how_to_make_a_scratch_store(short: str) -> None:
    plugin = backend_plugin(short)
    assert callable(plugin.scratch) and callable(plugin.apply) and plugin.VARIANTS
    assert plugin.name.startswith("@deepseek-ai/dsh-session-persistence-")


def test_the_recorder_is_seven_members_and_the_backend_sixteen() -> None:
    """The contract a new backend writes (decision 0042) against the one the service and readers call."""
    def members(protocol: type) -> set[str]:
        """The public names a protocol and its protocol bases declare (methods and annotated attributes)."""
        found: set[str] = set()
        for cls in protocol.__mro__:
            if getattr(cls, "_is_protocol", False) and cls.__module__.startswith("dsh_todo"):
                found |= {name for name in [*vars(cls), *getattr(cls, "__annotations__", {})]
                          if not name.startswith("_")}
        return found

    assert members(Recorder) - {"location"} == {"stored_sessions", "read_stored", "writer_alive", "lock",
                                                "write_checkpoint", "read_checkpointed", "follow"}
    assert len(members(LogBackend) - {"location"}) == 16
    derived = {name for name in members(LogBackend) if name in vars(WholeLogBackend)}
    assert derived == members(LogBackend) - members(Recorder) - {"location"}
    assert len(derived) == 10
