"""One pass over a log file, raw or zstd, with exactly the store's rules, keeping the events or only what a verdict
and the plan need.

The rules are not copied: every line goes through the store's own :class:`~dsh_todo.harness.persistence.scan.
LogScanner` (JSON parse, packed-row expansion, seq contiguity, DSH's crash-tail rule), frames are cut and checked
as the store's zstd read does, and unknown event types are refused by the store's own function. What differs is
memory: when the events are not wanted (``keep=False``) they are handed on and dropped after each piece, so a cold
plan read of a million-event log holds one piece (4 MiB of text, or one zstd frame) and the open turn, never the
log. This replaced a faster scan that matched only each line's envelope and so could not see broken JSON after a
good envelope: that scan could call a log clean that the exact read refuses.

The pass notes the facts the reader needs: the header, the event count, the torn tail (where it starts, and how
many events a cut zstd frame still gave), the plan facts (:class:`~dsh_todo.logview.plan.PlanFacts`), and the
events of the open turn, from which the interrupted-turn closers are computed exactly as from the whole log (a
``turn/start`` or ``turn/end`` resets everything the closers depend on).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, Final

from dsh_todo.harness.persistence import (
    CorruptSessionLogError,
    SessionFormatUnsupportedError,
    SessionLogError,
    interrupted_turn_closers,
)
from dsh_todo.harness.persistence.header import Meta
from dsh_todo.harness.persistence.paths import Compression
from dsh_todo.harness.persistence.scan import LogScanner, paused_gc
from dsh_todo.harness.persistence.store import read_stable, unknown_type_refusal
from dsh_todo.harness.persistence.zstd import FrameError, decode_frame, decode_prefix, scan_frames
from dsh_todo.harness.session import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.logview.plan import PlanFacts

Event = dict[str, Any]

CHUNK_SIZE: Final = 4 << 20
"""Bytes of a raw log fed to the scanner at a time."""

_KNOWN: Final = KNOWN_SESSION_EVENT_TYPES


@dataclass
class Scanned:
    """What one pass found. ``events`` holds every stored event only when they were kept."""

    meta: Meta
    path: Path
    count: int = 0
    events: list[Event] | None = None
    torn_at: int | None = None
    cut_frame_events: int = 0
    plan: PlanFacts = field(default_factory=PlanFacts)
    open_turn: list[Event] = field(default_factory=list)
    unknown: SessionLogError | None = None

    def closers(self) -> list[Event]:
        """The interrupted-turn closers a load would append (computed from the open turn alone)."""
        return interrupted_turn_closers(self.open_turn) if self.open_turn else []


class _Pass:
    """Feeds a :class:`LogScanner` and takes its events off it piece by piece."""

    def __init__(self, scanner: LogScanner, path: Path, keep: bool) -> None:
        self.scanner = scanner
        self.found = Scanned(scanner.meta, path, events=[] if keep else None)
        self.keep = keep

    def feed(self, data: bytes) -> None:
        self.scanner.feed(data)
        self.take()

    def take(self) -> None:
        scanner = self.scanner
        events = scanner.events
        if not events:
            return
        found = self.found
        types = list(map(dict.get, events, repeat("type")))
        if found.unknown is None and not _KNOWN.issuperset(types):
            try:
                unknown_type_refusal(str(found.meta["id"]), events, found.path)
            except SessionLogError as exc:
                found.unknown = exc  # raised only if the whole pass succeeds, as the store reads, then refuses
        found.plan.see(events, types)
        _follow_turn(found.open_turn, events, types)
        found.count += len(events)
        if found.events is not None:
            found.events.extend(events)
        # The scanner counts seqs from ``base + len(events)``: move the base past what it hands over.
        scanner.base += len(events)
        scanner.events = []


def _follow_turn(open_turn: list[Event], events: Sequence[Event], kinds: list[Any]) -> None:
    """Keep ``open_turn`` = the events from the last ``turn/start`` on, or empty after a ``turn/end``."""
    start = _last_index(kinds, "turn/start")
    end = _last_index(kinds, "turn/end")
    if start > end:
        open_turn[:] = events[start:]
    elif end >= 0:
        open_turn.clear()
    elif open_turn:
        open_turn.extend(events)


def _last_index(items: list[Any], value: str) -> int:
    try:
        return len(items) - 1 - items[::-1].index(value)
    except ValueError:
        return -1


def _identity(path: Path) -> tuple[int, ...]:
    stat = os.stat(path)
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def scan_log(path: Path, compression: Compression, *, keep: bool) -> Scanned:
    """Read the log at ``path`` once; raises the store's errors for a log it refuses. A log that changes while it
    is read (a writer appending) is read again, as the store's reads do."""
    read: Callable[[Path, bool], Scanned] = _scan_zstd if compression == "zstd" else _scan_raw
    while True:
        before = _identity(path)
        try:
            with paused_gc():
                found = read(path, keep)
        except SessionFormatUnsupportedError as exc:
            if exc.location is None:
                raise SessionFormatUnsupportedError(f"{exc} (raw log: {path})", path) from None
            raise
        if _identity(path) == before:
            if found.unknown is not None:
                raise found.unknown
            return found


def _scan_raw(path: Path, keep: bool) -> Scanned:
    with path.open("rb") as file:
        header = file.readline()
        if not header.endswith(b"\n"):
            raise CorruptSessionLogError("empty or header-less session log")
        one = _Pass(LogScanner(header), path, keep)
        while chunk := file.read(CHUNK_SIZE):
            one.feed(chunk)
    scanner = one.scanner
    if scanner.committed_bytes < scanner.input_bytes:
        one.found.torn_at = scanner.committed_bytes
    return one.found


def _plaintext(buffer: bytes, start: int, end: int) -> bytes:
    try:
        return decode_frame(buffer[start:end])
    except FrameError as exc:
        raise CorruptSessionLogError(
            f"corrupt Zstandard session log: frame at byte {start} failed validation") from exc


def _scan_zstd(path: Path, keep: bool) -> Scanned:
    buffer = read_stable(path)
    frames = scan_frames(buffer)
    if not frames.frames:
        raise CorruptSessionLogError("empty or header-less Zstandard session log")
    (first_start, first_end), *rest = frames.frames
    header = _plaintext(buffer, first_start, first_end)
    if not header or header.find(b"\n") != len(header) - 1:
        raise CorruptSessionLogError("corrupt Zstandard session log: first frame is not exactly one header line")
    one = _Pass(LogScanner(header), path, keep)
    for start, end in rest:
        one.feed(_plaintext(buffer, start, end))
    if not one.scanner.clean:
        raise CorruptSessionLogError("corrupt Zstandard session log: complete frame contains a torn JSONL record")
    if frames.torn_start is not None:
        complete = one.found.count
        one.feed(decode_prefix(buffer[frames.torn_start:]))
        one.found.torn_at = frames.torn_start
        one.found.cut_frame_events = one.found.count - complete
    return one.found
