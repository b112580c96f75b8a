"""A JSONL log's projection checkpoint: ``projections.json`` beside the log, and the proof of the bytes before it.

The file::

    {"version": 1, "log": "session.jsonl.zstd", "identity": {"createdAt": …, "cwd"?: …},
     "offset": <int>, "rows": {"todos": {"ver": 2, "seq": <n>, "val": …}}, "proof"?: {"sha256": <hex>}}

``offset`` is the start of a log record (a raw line, or a zstd frame) at or before the one holding event ``seq``:
decoding from there yields events from some seq ≤ ``seq`` + 1, and the reader skips what the rows already cover.
Pointing at or before the record is what lets a reader prove the checkpoint does not lead the log: the event
``seq`` must be among the decoded ones. Row-level checks (version, schema, seq within the log) are the projection
registry's; :func:`usable_checkpoint` checks the rest.

A checkpointed read trusts the bytes before ``offset``: an append-only log never changes them, but a hand edit or a
bad disk can, and a reader that owes an exact verdict must not trust rows computed from bytes that are gone
(decision 0007). So ``proof`` (:func:`prefix_digest`) is the SHA-256 of ``log[0:offset]`` followed by the
checkpoint's own offset and rows (an edited ``projections.json`` fails it too); without it only the projection-cache
service uses the checkpoint.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from dsh_todo.harness.persistence.errors import SessionLogError
from dsh_todo.harness.persistence.header import Meta, log_identity
from dsh_todo.harness.persistence.jsonl.regular import open_fd, read_bytes, temporary
from dsh_todo.jsonutil import dumps_bytes, loads

if TYPE_CHECKING:
    from dsh_todo.harness.persistence.contract import Rows

CHECKPOINT_NAME: Final = "projections.json"
FORMAT_VERSION: Final = 1


class Checkpoint(NamedTuple):
    """One ``projections.json``: the rows, and where in ``log`` (a file name) a reader starts decoding."""

    log: str
    identity: dict[str, Any]
    offset: int
    rows: Rows
    proof: str | None = None
    """The SHA-256 (hex) of the log's bytes before ``offset``, then :meth:`sealed` (:func:`prefix_digest`); older
    checkpoints have none."""

    def sealed(self) -> bytes:
        """What the proof covers after the log's prefix: the offset and the rows, as canonical JSON."""
        return dumps_bytes({"offset": self.offset, "rows": self.rows})

    def encode(self) -> bytes:
        value: dict[str, Any] = {"version": FORMAT_VERSION, "log": self.log, "identity": self.identity,
                                 "offset": self.offset, "rows": self.rows}
        if self.proof is not None:
            value["proof"] = {"sha256": self.proof}
        return dumps_bytes(value)


def read_checkpoint(log_path: Path) -> Checkpoint | None:
    """The checkpoint beside ``log_path`` if it is well-formed and names that log; ``None`` otherwise."""
    try:
        value = loads(read_bytes(log_path.parent / CHECKPOINT_NAME))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("version") != FORMAT_VERSION or value.get("log") != log_path.name:
        return None
    identity, offset, rows = value.get("identity"), value.get("offset"), value.get("rows")
    if not isinstance(identity, dict) or type(offset) is not int or offset < 1 or not isinstance(rows, dict):
        return None
    proof = value.get("proof")
    digest = proof.get("sha256") if isinstance(proof, dict) else None
    return Checkpoint(log_path.name, identity, offset, rows, digest if isinstance(digest, str) else None)


def write_checkpoint(log_path: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint beside ``log_path`` atomically (temporary file, fsync, rename). The directory is not
    fsynced: a rename lost in a power cut leaves the previous checkpoint, which only lags."""
    target = log_path.parent / CHECKPOINT_NAME
    with temporary(target, checkpoint.encode()) as tmp:
        os.replace(tmp, target)


class HeaderReader(Protocol):
    """What :func:`usable_checkpoint` reads a header with: the JSONL reader, which imports this module (a protocol
    here, so the two do not import each other, decision 0044)."""

    def read_header(self, path: Path) -> Meta | None: ...


def usable_checkpoint(backend: HeaderReader, log_path: Path) -> tuple[Meta, Checkpoint] | None:
    """The log's header and its checkpoint, if the checkpoint belongs to this log (its identity, the log where its
    header says) and points inside it."""
    checkpoint = read_checkpoint(log_path)
    if checkpoint is None:
        return None
    try:
        meta = backend.read_header(log_path)
        if meta is None or log_identity(meta) != checkpoint.identity:
            return None
        if checkpoint.offset > os.stat(log_path).st_size:
            return None
    except (OSError, SessionLogError):
        return None
    return meta, checkpoint


# -- the proof ------------------------------------------------------------------------------------------------
#
# A reader hashes the prefix (about 1.3 GB/s here: a million-event raw log in 0.13 s, its zstd form in 6 ms). The
# writer hashes incrementally: offsets only grow while a process writes a log, so each checkpoint adds the bytes since
# the previous one to a running hash kept per file (the first checkpoint after a resume hashes the prefix once).

PIECE: Final = 1 << 20
"""Bytes hashed at a time (memory stays at one piece)."""

KEPT: Final = 1024
"""Running hashes kept (the most recently used files'); a file dropped from them is hashed from the start again."""

SMALL: Final = 512 << 10
"""Prefixes up to this size are hashed without OpenSSL: loading ``hashlib`` costs about 4 ms, which the built-in
SHA-256 (230 MB/s here, against 1.6 GB/s) only loses back after half a megabyte."""

_running: dict[tuple[int, int], tuple[int, Any]] = {}
_lock = threading.Lock()


def _sha256(size: int) -> Any:
    """A SHA-256 for hashing about ``size`` bytes once (the same digest either way, see :data:`SMALL`)."""
    if size <= SMALL:
        for name in ("_sha256", "_sha2"):  # the interpreter's own: Python 3.11, then 3.12 on
            try:
                return importlib.import_module(name).sha256()
            except ImportError:
                continue
    import hashlib

    return hashlib.sha256()


def _update(fd: int, digest: Any, start: int, end: int) -> None:
    at = start
    while at < end:
        piece = os.pread(fd, min(PIECE, end - at), at)
        if not piece:
            raise OSError(f"the log ended at byte {at}, before the checkpoint's offset {end}")
        digest.update(piece)
        at += len(piece)


def prefix_digest(path: Path, offset: int, sealed: bytes) -> str:
    """SHA-256 (hex) of the first ``offset`` bytes of the file at ``path`` (read piece by piece), then ``sealed``."""
    digest = _sha256(offset)
    fd = open_fd(path)
    try:
        _update(fd, digest, 0, offset)
    finally:
        os.close(fd)
    digest.update(sealed)
    return str(digest.hexdigest())


def running_digest(path: Path, offset: int, sealed: bytes) -> str:
    """:func:`prefix_digest`, continued from the last call for the same file when its offset was not beyond this
    one (a writer's checkpoints), so each call hashes only the bytes added since. Always OpenSSL's: a running hash
    outgrows :data:`SMALL`."""
    import hashlib

    fd = open_fd(path)
    try:
        stat = os.fstat(fd)
        key = (stat.st_dev, stat.st_ino)
        with _lock:
            done, digest = _running.pop(key, (0, None))
            if digest is None or done > offset:
                done, digest = 0, hashlib.sha256()
            _update(fd, digest, done, offset)
            _running[key] = (offset, digest)
            if len(_running) > KEPT:
                del _running[next(iter(_running))]
            final = digest.copy()
        final.update(sealed)
        return str(final.hexdigest())
    finally:
        os.close(fd)
