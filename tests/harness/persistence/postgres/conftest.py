"""The postgres tests' booted contexts: the standard runtime in each test's own schema.

The server itself (``pg_url``, ``pg_schema``) comes from ``tests/conftest.py``, so tests elsewhere that need a
database (the persistence contract, the CLI's storage options) share it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_todo.harness import Context, boot
from dsh_todo.testing import database_composition


@pytest.fixture
def boot_pg(pg_url: str, pg_schema: str) -> Iterator[Any]:
    """``boot_pg(**options) -> Context``: the standard runtime in this test's schema (``options`` as for
    :func:`dsh_todo.testing.database_composition`); disposed after."""
    contexts: list[Context] = []

    def make(**options: Any) -> Context:
        ctx = boot(database_composition(pg_url, schema=pg_schema, **options))
        contexts.append(ctx)
        return ctx

    yield make
    for ctx in reversed(contexts):
        with contextlib.suppress(Exception):
            ctx.dispose()
