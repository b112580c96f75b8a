"""One writer per session log, across processes and within one; readers are never blocked."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dsh_todo.harness.persistence import SessionLockedError
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.lock import WriterLock

EVENTS = [
    {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
    {"type": "turn/end", "seq": 1, "time": 2, "data": {"turn": 1, "reason": {"kind": "completed"}}},
]

HOLDER = textwrap.dedent("""
    import sys
    from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
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


FILE_SIZE_CAP = textwrap.dedent("""
    import resource, signal, sys
    from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
    root, mode = sys.argv[1:3]
    store = JsonlBackend(root, "none")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG instead of killing us
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    take = (lambda: store.create({"id": "s", "createdAt": 1})) if mode == "create" else (lambda: store.resume("s")[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))  # no file may grow: the pid cannot be written
    try:
        take()
    except OSError as exc:
        print("refused", exc.errno, flush=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    writer = take()
    print("locked", flush=True)
    writer.close()
""")


@pytest.mark.parametrize("mode", ["create", "resume"])
def test_a_lock_whose_pid_cannot_be_written_holds_nothing(tmp_path: Path, mode: str) -> None:
    """Repro: ``WriterLock.acquire`` flocked ``session.lock``, then wrote its pid; when that write failed (EFBIG
    here, a file size cap; ENOSPC or EIO alike) the locked descriptor leaked, and once the cap was lifted every
    later call in the process answered ``session "s" is already open for writing by another process``."""
    if mode == "resume":
        write_log(tmp_path)
    done = subprocess.run([sys.executable, "-c", FILE_SIZE_CAP, str(tmp_path), mode], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"refused {errno.EFBIG}\nlocked\n", "")


@contextmanager
def small_disk(where: Path, size: str = "256k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (root only; the test is skipped where mounting is not allowed)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; returns the filler to delete."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_while_taking_the_lock_leaves_no_lock_behind(tmp_path: Path) -> None:
    """Repro (a real full filesystem): with the disk full, ``resume`` failed writing its pid into ``session.lock``
    (``[Errno 28] No space left on device``); after the disk was freed the same process got ``session "s" is
    already open for writing by another process``: its own leaked lock."""
    with small_disk(tmp_path / "disk") as disk:
        store = write_log(disk)
        filler = fill(disk)
        with pytest.raises(OSError) as refused:
            store.resume("s")
        assert refused.value.errno == errno.ENOSPC
        filler.unlink()
        _, writer = store.resume("s")
        writer.close()
        with pytest.raises(OSError) as again:  # and a create on a full disk, the same
            fill(disk)
            store.create({"id": "t", "createdAt": 1})
        assert again.value.errno == errno.ENOSPC
        (disk / "filler").unlink()
        store.create({"id": "t", "createdAt": 1}).close()


FOREIGN_HOLDER = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.read()
""")


@contextmanager
def bare_holder(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the ``flock`` on ``path`` without writing its pid there: one caught between its
    lock and its pid's write, or a program other than dsh-todo."""
    proc = subprocess.Popen([sys.executable, "-c", FOREIGN_HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


needs_proc_locks = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="no /proc/locks on this system")


@needs_proc_locks
def test_a_holder_that_wrote_no_pid_is_named_by_the_kernel(tmp_path: Path) -> None:
    """Repro (issue 34 item 9): a holder whose pid is not in ``session.lock`` (it has just taken the lock, or it is not
    dsh-todo) was refused as ``already open for writing by another process``, though the README says a refusal
    names the holder. ``/proc/locks`` names it."""
    path = tmp_path / "session.lock"
    with bare_holder(path) as proc, pytest.raises(SessionLockedError) as caught:
        WriterLock.acquire(path, "s")
    assert caught.value.holder_pid == proc.pid
    assert str(caught.value) == (f'session "s" is already open for writing by process {proc.pid} (lock: {path}); '
                                 "a session log takes one writer at a time")


@needs_proc_locks
def test_a_stale_pid_in_the_lock_file_is_not_taken_for_the_holder(tmp_path: Path) -> None:
    """A crashed writer's pid stays in ``session.lock``; the next holder takes the lock before it writes its own.
    A rival refused in between named the dead process; now it names the live holder."""
    path = tmp_path / "session.lock"
    path.write_text("4194999\n")  # above any pid_max: a process that is gone
    with bare_holder(path) as proc, pytest.raises(SessionLockedError) as caught:
        WriterLock.probe(path, "s")
    assert caught.value.holder_pid == proc.pid


def test_a_holder_nothing_names_is_refused_saying_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel cannot be asked (no ``/proc/locks``: not Linux) and the lock file holds no pid, the refusal
    says so instead of a bare "another process"."""
    from dsh_todo.harness.persistence.jsonl import lock

    monkeypatch.setattr(lock, "PROC_LOCKS", str(tmp_path / "no-proc-locks"))
    path = tmp_path / "session.lock"
    with bare_holder(path), pytest.raises(SessionLockedError) as caught:
        WriterLock.acquire(path, "s")
    assert caught.value.holder_pid is None
    assert str(caught.value) == (
        'session "s" is already open for writing by another process, unnamed: its pid is not in the lock file and '
        f"this system has no /proc/locks (lock: {path}); a session log takes one writer at a time")
