"""``dsh_todo.testing.start_cluster``: says why when no cluster can be started (the real start is what every
``postgres`` test stands on, through the ``pg_url`` fixture in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from dsh_todo.testing import ClusterUnavailable, start_cluster
from dsh_todo.testing import postgres as rig
from tests import needs


def test_no_server_binaries_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rig, "find_bindir", lambda: None)
    with pytest.raises(ClusterUnavailable, match="install Debian's postgresql package"):
        start_cluster()


def test_the_suite_cluster_answers(pg_url: str) -> None:
    psycopg = needs.module("psycopg")
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT current_user").fetchone()
    assert row is not None
