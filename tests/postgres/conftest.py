"""A real PostgreSQL server for the postgres tests.

``$DSH_TODO_TEST_DATABASE_URL`` names a server to use (each test works in its own schema, dropped afterwards).
Without it, the first test that needs a database starts a throwaway cluster
(:func:`dsh_todo.harness.persistence.postgres.cluster.start_cluster`: ``initdb`` into a temporary directory,
``pg_ctl start`` on a free loopback port, no fsync), stopped and deleted when the session ends. Without the server
binaries (Debian's ``postgresql`` package) the tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dsh_todo.harness import Context, boot
from dsh_todo.harness.persistence.postgres.cluster import Cluster, ClusterUnavailable, start_cluster

ENV_URL = "DSH_TODO_TEST_DATABASE_URL"
POSTGRES = "@deepseek-ai/dsh-session-persistence-postgres"


@dataclass
class Server:
    """The server the tests use: a throwaway cluster (``cluster`` set) or the one ``$DSH_TODO_TEST_DATABASE_URL``
    names."""

    url: str
    cluster: Cluster | None = None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    url = os.environ.get(ENV_URL)
    if url:
        yield Server(url)
        return
    try:
        cluster = start_cluster(durable=False)
    except ClusterUnavailable as exc:
        pytest.skip(f"{exc}, and ${ENV_URL} is not set")
    try:
        yield Server(cluster.url, cluster)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_url(pg_server: Server) -> str:
    return pg_server.url


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A fresh schema name for one test (its tables appear on first use); dropped afterwards."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    yield schema
    with contextlib.suppress(psycopg.Error), psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def pg_rows(url: str, schema: str, *, batch_delay_ms: int = 200, poll_ms: int = 5000,
            allow_parallel: bool = True) -> list[dict[str, Any]]:
    """The standard composition with PostgreSQL persistence in ``schema``."""
    from dsh_todo.runtime import composition

    rows = composition(None, allow_parallel=allow_parallel, database=url)
    persistence = next(row for row in rows if row["id"] == "persistence")
    assert persistence["name"] == POSTGRES
    persistence["config"] = {"url": url, "schema": schema, "writeBatchMaxDelayMs": batch_delay_ms,
                             "pollIntervalMs": poll_ms}
    return rows


@pytest.fixture
def boot_pg(pg_url: str, pg_schema: str) -> Iterator[Any]:
    """``boot_pg(**options) -> Context`` with PostgreSQL persistence in this test's schema; disposed after."""
    contexts: list[Context] = []

    def make(**options: Any) -> Context:
        ctx = boot(pg_rows(pg_url, pg_schema, **options))
        contexts.append(ctx)
        return ctx

    yield make
    for ctx in reversed(contexts):
        with contextlib.suppress(Exception):
            ctx.dispose()
