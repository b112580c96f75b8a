"""Fixtures of the real-``dsh`` tests: its command (required in CI) and the scratch folders every run shares."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dsh.runtime import Scratch, dsh_command


@pytest.fixture(scope="session")
def dsh() -> Path:
    """The pinned ``dsh`` command: a test without it fails in CI and skips elsewhere, saying why."""
    return dsh_command()


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    """``HOME`` and ``TMPDIR`` for every ``dsh`` of the run: its 81 MB unpack into ``$HOME/.cache/pkg`` happens
    once."""
    yield Scratch.make(tmp_path_factory.mktemp("dsh-scratch"))
