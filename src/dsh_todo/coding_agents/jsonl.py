"""What the readers of JSONL transcripts share: records one line at a time, and their timestamps.

A transcript may be hundreds of megabytes and is being appended to while we read it: it is read line by line
(never whole), and a last line without its newline yet is a record still being written, left for the next read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any


def records(path: Path, agent: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``path``, one per line, in order; a complete line that is not one raises ``ValueError``
    naming ``agent`` and the file (a format this version cannot read), a partial last line is skipped."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                if not line.endswith(b"\n"):
                    return  # still being written
                raise ValueError(cannot(agent, path, f"line {number} is not JSON")) from None
            if not isinstance(record, dict):
                raise ValueError(cannot(agent, path, f"line {number} is not a JSON object"))
            yield record


def cannot(agent: str, path: Path, why: str) -> str:
    """The one line saying that ``agent``'s file ``path`` does not read as this version knows it."""
    return f"{agent}: cannot read {path}: {why} (a format this version of dsh-todo does not know)"


def epoch(stamp: Any) -> float | None:
    """An ISO 8601 timestamp (``2026-12-06T05:29:55.573Z``) as epoch seconds, ``None`` when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def mtime(path: Path) -> float:
    """When ``path`` last changed (epoch seconds), 0 when it is gone."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
