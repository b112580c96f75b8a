"""``@deepseek-ai/dsh-session-persistence-postgres``: every live session written to PostgreSQL.

The JSONL plugin's contract on a database shared by many processes and machines (see ``README.md`` beside this file):
events as exact JSON text keyed by ``(session id, seq)``, write batches as transactions, one writer per session
through an advisory lock, the same crash recovery, and ``LISTEN``/``NOTIFY`` so that any process can follow a
session another one writes. Needs the ``postgres`` extra (psycopg 3); nothing else in ``dsh_todo`` imports it.

Config: ``url`` (required: a libpq URI or connection string), ``schema`` (``"public"``), ``writeBatchMaxDelayMs``
(200, as JSONL), ``pollIntervalMs`` (5000: the followers' safety poll behind ``NOTIFY``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.persistence.postgres.backend import PgBackend
from dsh_todo.harness.persistence.postgres.schema import SCHEMA_NAME
from dsh_todo.harness.persistence.service import MAX_BATCH_DELAY_MS, backend_config, install, text_field

name = "@deepseek-ai/dsh-session-persistence-postgres"
inject = ["sessions"]

_KEYS: Final = frozenset({"url", "schema", "pollIntervalMs"})

VARIANTS: Final[tuple[str, ...]] = ("",)
"""The configurations the contract tests run this backend in (:mod:`..registry`): one."""

NEEDS: Final[tuple[str, ...]] = ("pg_url", "pg_schema")
"""The test fixtures a scratch store needs: a server, and a schema of the test's own."""

__all__ = ["NEEDS", "VARIANTS", "Config", "PgBackend", "apply", "inject", "name", "scratch"]


@dataclass(frozen=True, slots=True)
class Config:
    url: str
    schema: str = "public"
    writeBatchMaxDelayMs: int = 200  # the JSONL plugin's (DSH's) key name, kept
    pollIntervalMs: int = 5000

    @classmethod
    def parse(cls, raw: Any) -> Config:
        raw, delay = backend_config(name, raw, keys=_KEYS, needs="a database 'url'")
        url = text_field(name, raw, "url", "PostgreSQL connection string")
        schema = raw.get("schema", "public")
        if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
            raise ConfigError(f"{name}: 'schema' must match [a-z_][a-z0-9_]{{0,39}}, not {schema!r}")
        poll = raw.get("pollIntervalMs", 5000)
        if type(poll) is not int or not 10 <= poll <= MAX_BATCH_DELAY_MS:
            raise ConfigError(f"{name}: 'pollIntervalMs' must be an integer between 10 and {MAX_BATCH_DELAY_MS}")
        return cls(url=url, schema=schema, writeBatchMaxDelayMs=delay, pollIntervalMs=poll)


def apply(ctx: Context, config: Config) -> None:
    backend = PgBackend(config.url, schema=config.schema, poll_interval=config.pollIntervalMs / 1000)
    backend.open()
    install(ctx, backend, config.writeBatchMaxDelayMs)


def scratch(place: Path, fixture: Callable[[str], Any], variant: str) -> Callable[[int], dict[str, Any]]:
    """A throwaway store for a test: the test's own schema on the test server (``fixture`` gives both)."""
    url, schema = fixture("pg_url"), fixture("pg_schema")
    return lambda batch_delay_ms: {"url": url, "schema": schema, "writeBatchMaxDelayMs": batch_delay_ms}
