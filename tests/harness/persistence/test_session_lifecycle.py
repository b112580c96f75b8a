"""Sessions and their logs share one lifetime: a refused log never leaves a live session, and closing unlocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_todo.harness.persistence import SessionLockedError
from dsh_todo.runtime import open_runtime


def test_a_session_whose_log_is_locked_never_goes_live(tmp_path: Path) -> None:
    first = open_runtime(tmp_path)
    second = open_runtime(tmp_path)
    try:
        first.sessions.create("shared", cwd="/p").append("turn/start", {"turn": 1})
        first.session_persistence.flush()
        with pytest.raises(SessionLockedError, match="shared"):
            second.sessions.create("shared", cwd="/p")
        assert second.sessions.get("shared") is None
        assert second.sessions.list() == []
    finally:
        first.dispose()
        second.dispose()


def test_closing_a_session_flushes_and_unlocks_it(tmp_path: Path) -> None:
    writer = open_runtime(tmp_path, batch_delay_ms=60_000)  # only flush or close can make it durable
    reader = open_runtime(tmp_path)
    try:
        session = writer.sessions.create("s", cwd="/p")
        session.append("turn/start", {"turn": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        writer.sessions.close("s")
        loaded = reader.session_persistence.load("s")
        assert [e["type"] for e in loaded.events] == ["turn/start", "turn/end", "session/end-seed"]
    finally:
        writer.dispose()
        reader.dispose()
