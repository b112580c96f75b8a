"""The long-log generator the memory tests and benchmarks share writes, in either format, a log the reader takes
as healthy: every turn's events, its plan standing, nothing to recover."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.logview import read_plan
from tests.long_logs import EVENTS_PER_TURN, SESSION_ID, long_log


@pytest.mark.parametrize(("version", "name"), [(4, "session.v4.jsonl"), (0, "session.jsonl")])
def test_a_long_log_is_a_healthy_log_of_its_format(tmp_path: Path, version: int, name: str) -> None:
    kwargs = {} if version == 4 else {"version": 0}
    log = long_log(tmp_path / "root", 3, **kwargs)
    assert log.name == name
    text = log.read_bytes()
    assert (b'"type":"text-chunks"' in text) == (version == 0)
    assert (b'"role":"tool"' in text) == (version == 4)
    stored = JsonlBackend(tmp_path / "root").read(SESSION_ID)
    assert stored.meta["version"] == version
    assert [event["seq"] for event in stored.events] == list(range(3 * EVENTS_PER_TURN))
    assert [event["data"]["turn"] for event in stored.events if event["type"] == "turn/end"] == [1, 2, 3]
    view = read_plan(log)
    assert view.health.state == "ok" and view.as_of_seq == 3 * EVENTS_PER_TURN - 1
    assert view.plan is not None and [item["status"] for item in view.plan] == ["completed", "in_progress", "pending"]
