"""Opening what a session directory holds without trusting what it is.

A session root is a directory anyone with write access can fill. ``open()`` on a FIFO waits for the other end, so a
FIFO named ``session.jsonl`` made ``dsh-todo sessions``, ``plan``, ``events`` and ``web`` hang for ever. Every log,
checkpoint and lock file is opened here instead: without blocking, then checked to be a regular file in the same
open (no window between check and open). Anything else is refused with :class:`NotRegularFileError`, a refused log
and an ``OSError`` (for callers that treat an unreadable checkpoint or lock as absent).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from dsh_todo.harness.errors import CorruptSessionLogError


class NotRegularFileError(CorruptSessionLogError, OSError):
    """What should be a log, a checkpoint or a lock is a FIFO, a device, a socket or a directory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(f"{path} is not a regular file")


def open_fd(path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """``os.open(path, flags)`` (close-on-exec, blocking once open) of a regular file, or
    :class:`NotRegularFileError` without waiting on anything else."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no one reads, opened for writing
            raise NotRegularFileError(path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_binary(path: str | os.PathLike[str], *, buffering: int = -1) -> BinaryIO:
    """A regular file opened for reading in binary mode, as ``open(path, "rb", buffering=…)``."""
    file: BinaryIO = os.fdopen(open_fd(path), "rb", buffering=buffering)
    return file


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular file, as ``Path.read_bytes``."""
    with open_binary(path) as file:
        return file.read()


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written (a write may take fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@contextlib.contextmanager
def temporary(target: Path, data: bytes) -> Iterator[Path]:
    """A new file beside ``target`` holding ``data`` durably (fsynced), for the caller to publish under ``target``'s
    name (``link``, ``replace``); removed afterwards, whatever happened."""
    tmp = target.with_name(f"{target.name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
