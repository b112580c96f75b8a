"""Sessions and their logs share one lifetime: a refused log never leaves a live session, and closing unlocks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_todo.harness import Session
from dsh_todo.harness.persistence import SessionLockedError
from dsh_todo.standard import open_runtime


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


def _refuse(session_id: str) -> Callable[[Session], None]:
    def hook(session: Session) -> None:
        if session.id == session_id:
            raise RuntimeError(f'"{session_id}" refused by a later hook')
    return hook


@pytest.mark.parametrize("flushed_first", [False, True])
def test_a_session_refused_after_persistence_took_its_lock_lets_it_go(tmp_path: Path, flushed_first: bool) -> None:
    """A later ``on_open`` hook refusing a session that persistence already attached (its lock taken, its queue
    open): it never went live, so no close hook runs for it; the next flush lets its lock go (whatever was flushed
    before it), and another runtime can then open it."""
    first = open_runtime(tmp_path)
    second = open_runtime(tmp_path)
    try:
        other = first.sessions.create("other", cwd="/p")
        other.append("turn/start", {"turn": 1})
        if flushed_first:
            first.session_persistence.flush()
        first.sessions.on_open(_refuse("refused"))
        with pytest.raises(RuntimeError, match="refused by a later hook"):
            first.sessions.create("refused", cwd="/p")
        assert first.sessions.get("refused") is None
        other.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        first.session_persistence.flush("other")
        second.sessions.create("refused", cwd="/p").append("turn/start", {"turn": 1})
        second.session_persistence.flush()
    finally:
        first.dispose()
        second.dispose()


def test_a_refused_session_that_cannot_be_written_does_not_fail_another_sessions_flush(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Repro: a hook appends to a session, a later hook refuses it, and its log cannot be written; the next
    ``flush("other")`` let the refused session go and raised ``SessionWriteError: could not write 1 events of session
    "refused"`` to the caller who flushed ``other``, whose events were durable (an MCP call would have been answered
    as failed). Nobody was ever told the refused session's events were kept: the failure is logged, ``other``'s flush
    succeeds, and the refused session's lock is still let go."""
    first = open_runtime(tmp_path)
    second = open_runtime(tmp_path)
    try:
        other = first.sessions.create("other", cwd="/p")
        other.append("turn/start", {"turn": 1})
        first.session_persistence.flush()

        def start(session: Session) -> None:
            if session.id == "refused":
                session.append("turn/start", {"turn": 1})
                writes = first.session_persistence._writes.get("refused")  # the log it cannot write
                assert writes is not None

                def broken(batch: object) -> None:
                    raise OSError(28, "No space left on device")

                writes.writer.append = broken  # type: ignore[method-assign]

        first.sessions.on_open(start)
        first.sessions.on_open(_refuse("refused"))
        with pytest.raises(RuntimeError, match="refused by a later hook"):
            first.sessions.create("refused", cwd="/p")
        other.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        with caplog.at_level("WARNING", logger="dsh_todo.persistence"):
            first.session_persistence.flush("other")
        assert [r.getMessage() for r in caplog.records] == [
            'could not write what a refused session "refused" logged before it was refused: could not write 1 '
            'events of session "refused": [Errno 28] No space left on device']
        stored = second.session_persistence.read("other")
        assert [e["type"] for e in stored.events] == ["turn/start", "turn/end"]
        second.sessions.create("refused", cwd="/p")  # its lock was let go all the same
    finally:
        first.dispose()
        second.dispose()
