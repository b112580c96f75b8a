"""One writer per session log, across processes: an exclusive ``flock`` on ``session.lock`` beside the log.

Two writers appending to one log would interleave batches and break the seq contract, and a loader repairing a
"torn" tail that is really another process's write in flight would destroy committed data. So every mutation
happens under this lock, and a second writer fails at once naming the session and the holder's pid (the kernel's
``/proc/locks`` names it; the pid written in the file is the fallback elsewhere, and where neither names it the
refusal says why). Readers never take it: they see a consistent prefix and at worst a torn tail, which a read does
not repair.

``flock`` locks belong to an open file description, so two stores in one process exclude each other as two
processes do, and the kernel drops a dead holder's lock: a crash never leaves a stale lock. The pid in the file is
for the error message only (and may be a crashed writer's until the next holder overwrites it). When it cannot be
written (a full disk, an I/O error), the lock is let go before the error is raised, so a failed acquire never locks
the process out by itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from dsh_todo.harness.persistence.errors import SessionLockedError, locked
from dsh_todo.harness.persistence.jsonl.regular import open_fd

PROC_LOCKS = "/proc/locks"
"""Where Linux lists every file lock with the pid of the process that took it."""


def _locked(path: Path, session_id: str, fd: int) -> SessionLockedError:
    """The refusal, naming the holder of the lock file open as ``fd``: by the kernel's word where it can be asked
    (``/proc/locks``), else by the pid the holder wrote into the file, else saying why it cannot be named. The
    kernel comes first: a holder writes its pid only after it has the lock, so in between the file is empty, or
    still holds the pid of a writer that crashed."""
    listed, pid = _kernel_holder(fd)
    if pid is None:
        pid = _written_pid(fd)
    if pid is not None:
        return locked(session_id, f"process {pid}", path, pid)
    why = ("/proc/locks does not list it (another PID namespace, or it let go just now)" if listed
           else "this system has no /proc/locks")
    return locked(session_id, f"another process, unnamed: its pid is not in the lock file and {why}", path, None)


def _kernel_holder(fd: int) -> tuple[bool, int | None]:
    """Whether ``/proc/locks`` could be read, and the pid it lists as holding an exclusive ``flock`` on the file
    open as ``fd`` (``None``: it lists none)."""
    try:
        st = os.fstat(fd)
        with open(PROC_LOCKS, encoding="ascii", errors="replace") as listing:
            lines = listing.read().splitlines()
    except OSError:
        return False, None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2245399 0 EOF" (a waiter's has "->")
        if len(fields) >= 6 and fields[1:4] == ["FLOCK", "ADVISORY", "WRITE"] and fields[5] == where:
            pid = fields[4]
            if pid.isdigit() and int(pid) > 0:
                return True, int(pid)
    return True, None


def _written_pid(fd: int) -> int | None:
    """The pid the holder wrote into the lock file open as ``fd``, when that reads."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


class WriterLock:
    """A held single-writer lock; :meth:`release` (or leaving a ``with`` block) lets the next writer in."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, session_id: str) -> WriterLock:
        """Take the lock at ``path`` (creating the file) or raise :class:`SessionLockedError` naming the holder."""
        while True:
            fd = open_fd(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                refusal = _locked(path, session_id, fd)
                os.close(fd)
                raise refusal from None
            except BaseException:
                os.close(fd)
                raise
            # A releasing writer may have unlinked the file after we opened it: then we locked an orphan inode
            # that nobody else will ever see, so start over on the file that is there now.
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                lock = cls(path, fd)
                try:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                except BaseException:  # a full disk, a file size cap, an I/O error: hold nothing
                    lock.release()
                    raise
                return lock
            os.close(fd)

    @classmethod
    def probe(cls, path: Path, session_id: str) -> None:
        """Raise :class:`SessionLockedError` (as :meth:`acquire` would) if a writer holds the lock at ``path``;
        leave it untouched otherwise."""
        try:
            fd = open_fd(path)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _locked(path, session_id, fd) from None
        finally:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Let go of the lock and remove the lock file, so a session directory holds only its log at rest. It is
        unlinked while still locked: a contender that opened it meanwhile sees the inode change in :meth:`acquire`
        and starts over, so removal never lets two writers in."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(fd)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
