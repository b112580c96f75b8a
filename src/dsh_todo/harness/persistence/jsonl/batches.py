"""A JSONL log's write batches, found again from its bytes, and the bytes our writer makes of them.

Moving a log to another backend and back must give the same file (``persistence/transfer.py``), and a file's bytes
depend on where its batches were cut: a zstd log's frames are its batches; a raw log leaves no trace of them, so
they are cut before every line whose first event could have continued the previous line's delta run. Re-encoding
the batches says whether the file is what our writer writes for them (every log DSH or we write is).
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any

from dsh_todo.harness.event_types import Event
from dsh_todo.harness.persistence.contract import StoredLog
from dsh_todo.harness.persistence.jsonl.chunk_rows import ROW_TYPES
from dsh_todo.harness.persistence.jsonl.lock import WriterLock
from dsh_todo.harness.persistence.jsonl.paths import LOCK_NAME, Compression, compression_of
from dsh_todo.harness.persistence.jsonl.reading import read_stable
from dsh_todo.harness.persistence.jsonl.writer import encode_batch, encode_header
from dsh_todo.harness.persistence.jsonl.zstd import decode_frame, scan_frames
from dsh_todo.jsonutil import loads


def _members(line: bytes) -> int:
    """How many events one storage line stands for."""
    record = loads(line)
    if isinstance(record, dict) and record.get("type") in ROW_TYPES:
        return len(record["data"]["dt"]) + 1
    return 1


def _split(events: Sequence[Event], counts: Iterable[int]) -> list[list[Event]]:
    bounds = [0, *accumulate(counts)]
    if bounds[-1] != len(events):
        raise ValueError(f"storage records account for {bounds[-1]} events, the log has {len(events)}")
    return [list(events[start:stop]) for start, stop in pairwise(bounds)]


def _raw_batches(lines: Sequence[bytes], events: Sequence[Event]) -> list[list[Event]]:
    """Batches for a raw log: one per run of lines, cut wherever a delta run could have spanned two lines."""
    batches: list[list[Event]] = []
    for record in _split(events, map(_members, lines)):
        if batches and not (batches[-1][-1].get("type") == "assistant/chunk" == record[0].get("type")):
            batches[-1].extend(record)
        else:
            batches.append(record)
    return batches


def encode_log(meta: Mapping[str, Any], batches: Sequence[Sequence[Event]], compression: Compression) -> bytes:
    """The bytes our JSONL writer produces for ``meta`` and these batches (packed chunk rows in format v0, seq ranges
    in v4, as the writer chooses by the header's version)."""
    v0 = meta.get("version") == 0
    return encode_header(meta, compression) + b"".join(encode_batch(batch, compression, pack_chunks=v0, ranges=not v0)
                                                       for batch in batches)


def source_batches(stored: StoredLog) -> tuple[list[list[Event]], bool]:
    """The kept events of ``stored`` cut into their write batches, and whether re-encoding them gives the file."""
    assert stored.path is not None, "a JSONL backend's logs are files"
    buffer = read_stable(stored.path)
    compression = compression_of(stored.path)
    torn = stored.torn
    kept = stored.events[:len(stored.events) - (len(torn.recovered) if torn is not None else 0)]
    end = torn.truncate_to if torn is not None else len(buffer)
    if compression == "zstd":
        frames = (decode_frame(buffer[start:stop]) for start, stop in scan_frames(buffer[:end]).frames[1:])
        batches = _split(kept, [sum(map(_members, frame.split(b"\n")[:-1])) for frame in frames])
    else:
        lines = buffer[buffer.find(b"\n") + 1:end].split(b"\n")[:-1]
        batches = _raw_batches(lines, kept)
        if encode_log(stored.meta, batches, "none") != buffer[:end]:
            batches = _split(kept, map(_members, lines))  # one batch per line reproduces any packing
    return batches, encode_log(stored.meta, batches, compression) == buffer[:end]


def lock_to_copy(path: Path, session_id: str) -> WriterLock | None:
    """The writer lock of the log at ``path``, taken while it is copied elsewhere; ``None`` on a read-only root, where
    no writer can be at work."""
    try:
        return WriterLock.acquire(path.parent / LOCK_NAME, session_id)
    except OSError as exc:
        if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
            return None
        raise
