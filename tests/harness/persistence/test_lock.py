"""One writer per session log, across processes and within one; readers are never blocked."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dsh_todo.harness.persistence import JsonlBackend, SessionLockedError
from dsh_todo.harness.persistence.lock import WriterLock

EVENTS = [
    {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
    {"type": "turn/end", "seq": 1, "time": 2, "data": {"turn": 1, "reason": {"kind": "completed"}}},
]

HOLDER = textwrap.dedent("""
    import sys
    from dsh_todo.harness.persistence import JsonlBackend
    root, mode, session_id = sys.argv[1:4]
    store = JsonlBackend(root, "none")
    if mode == "create":
        writer = store.create({"id": session_id, "createdAt": 1})
    else:
        _, writer = store.resume(session_id)
    print("locked", flush=True)
    sys.stdin.read()
    writer.close()
    print("released", flush=True)
""")


@contextmanager
def holder(root: Path, mode: str, session_id: str = "s") -> Iterator[subprocess.Popen[str]]:
    """Another process holding the writer lock of ``session_id`` until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), mode, session_id],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)


def write_log(root: Path, session_id: str = "s") -> JsonlBackend:
    store = JsonlBackend(root, "none")
    writer = store.create({"id": session_id, "createdAt": 1})
    writer.append(EVENTS)
    writer.close()
    return store


def test_a_second_process_cannot_write_but_can_read(tmp_path: Path) -> None:
    store = write_log(tmp_path / "root")
    before = store.find("s").read_bytes()  # type: ignore[union-attr]
    with holder(tmp_path / "root", "resume") as proc:
        for attempt in (lambda: store.load("s"), lambda: store.resume("s"), lambda: store.continue_live("s", EVENTS)):
            with pytest.raises(SessionLockedError) as caught:
                attempt()
            assert caught.value.holder_pid == proc.pid
            assert f'session "s" is already open for writing by process {proc.pid}' in str(caught.value)
        assert len(store.read("s").events) == 2  # readers never wait for the lock
        assert [entry.id for entry in store.stored_sessions()] == ["s"]
    assert store.find("s").read_bytes() == before  # type: ignore[union-attr]
    loaded, writer = store.resume("s")  # the lock is free again once the holder let go
    writer.close()
    assert len(loaded.events) == 2


def test_a_new_session_is_locked_from_creation(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = JsonlBackend(root, "none")
    with holder(root, "create") as proc, pytest.raises(SessionLockedError, match=f"process {proc.pid}"):
        store.create({"id": "s", "createdAt": 1})
    writer = store.create({"id": "s", "createdAt": 1})
    writer.close()


def test_a_crashed_holder_leaves_no_lock(tmp_path: Path) -> None:
    store = write_log(tmp_path / "root")
    with holder(tmp_path / "root", "resume") as proc:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        _, writer = store.resume("s")
        writer.close()


def test_two_writers_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    store = write_log(tmp_path / "root")
    _, writer = store.resume("s")
    other = JsonlBackend(tmp_path / "root", "none")
    with pytest.raises(SessionLockedError):
        other.load("s")
    writer.close()
    other.load("s")


def test_release_removes_the_lock_file_and_a_stale_file_is_reused(tmp_path: Path) -> None:
    path = tmp_path / "session.lock"
    lock = WriterLock.acquire(path, "s")
    assert path.read_text().strip().isdigit()
    lock.release()
    assert not path.exists()
    path.write_text("12345\n")  # left by a process that crashed
    with WriterLock.acquire(path, "s") as again:
        assert again.held
