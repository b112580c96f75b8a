"""The postgres tests' booted contexts: the standard runtime in each test's own schema.

The server itself (``pg_url``, ``pg_schema``) comes from ``tests/conftest.py``, so tests elsewhere that need a
database (the persistence contract, the CLI's storage options) share it.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness import Context
from dsh_todo.testing import database_composition
from tests.conftest import BootFactory


@pytest.fixture
def boot_pg(pg_url: str, pg_schema: str, make_ctx: BootFactory) -> BootFactory:
    """``boot_pg(**options) -> Context``: the standard runtime in this test's schema (``options`` as for
    :func:`dsh_todo.testing.database_composition`); disposed after, as every ``make_ctx`` context is."""

    def make(**options: Any) -> Context:
        return make_ctx(database_composition(pg_url, schema=pg_schema, **options))

    return make
