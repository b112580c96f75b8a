"""Pytest wiring for the persistence tests: fixture-log parametrization and writable copies of fixture stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.persistence.fixture_logs import (
    DAMAGED_NAMES,
    FIXTURE_NAMES,
    INTACT_NAMES,
    RAW_INTACT_NAMES,
    RECOVERABLE_NAMES,
    ZSTD_INTACT_NAMES,
    Fixture,
    copy_store,
    load_fixture,
)

_MISSING = pytest.param(None, marks=pytest.mark.skip(reason="DSH fixture logs (tests/fixtures) are absent"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``<kind>_name`` arguments over the matching fixture folders."""
    for argname, names in (("fixture_name", FIXTURE_NAMES), ("intact_name", INTACT_NAMES),
                           ("damaged_name", DAMAGED_NAMES), ("recoverable_name", RECOVERABLE_NAMES),
                           ("raw_intact_name", RAW_INTACT_NAMES), ("zstd_intact_name", ZSTD_INTACT_NAMES)):
        if argname in metafunc.fixturenames:
            metafunc.parametrize(argname, names or [_MISSING])


@pytest.fixture
def fixture_copy(fixture_name: str, tmp_path: Path) -> Iterator[tuple[Fixture, Path]]:
    """``(fixture, root)`` with the fixture's store copied to a writable root under ``tmp_path``."""
    fixture = load_fixture(fixture_name)
    yield fixture, copy_store(fixture, tmp_path / "store")


@pytest.fixture
def damaged_copy(damaged_name: str, tmp_path: Path) -> Iterator[tuple[Fixture, Path]]:
    fixture = load_fixture(damaged_name)
    yield fixture, copy_store(fixture, tmp_path / "store")


@pytest.fixture
def recoverable_copy(recoverable_name: str, tmp_path: Path) -> Iterator[tuple[Fixture, Path]]:
    """A damaged variant that DSH recovered (rather than refused), copied to a writable root."""
    fixture = load_fixture(recoverable_name)
    yield fixture, copy_store(fixture, tmp_path / "store")
