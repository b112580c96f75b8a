"""The fast path of a cold plan read: one streaming pass that checks a log's structure with bytes operations and
parses only the one line a "last-of" fold needs.

The exact read (:meth:`.JsonlBackend.read`) parses every line into a dict, which costs about 5 µs a line in CPython
and makes a million-event log a multi-second read. Folds such as the ``todos`` projection do not need that: each
event type they care about *replaces* the state whatever it was (``todo/write`` sets the list, ``turn/start``
clears it), so the fold's result is decided by the last event of those types alone. :func:`scan_last_of` finds that
event and the log's event count without building per-event objects in Python:

- the file is read (raw) or decompressed (zstd: complete frames only, across frames, checksums verified by libzstd)
  a few MiB at a time, so memory stays bounded by the chunk size, never by the log or a frame's plaintext;
- one regular expression splits each chunk into lines and matches every line's envelope, ``{"type":"<t>","seq":<n>,``
  with ``<t>`` one of :data:`~dsh_todo.harness.session.KNOWN_SESSION_EVENT_TYPES`, or a packed chunk row's
  ``{"type":"<row>","seq0":<n>,"time0":<n>,"data":{"turn":…,"step":…,"index":…,"dt":[<ints>],``; anything between
  or after matched lines (a line with another shape, another type, another key order) makes the chunk unclean;
- seq contiguity is checked for every line at C speed: the line starts must equal the running sum of member counts
  (1 per event, ``len(dt) + 1`` per row), starting at 0 for a whole log;
- the last line of a wanted type is found with ``bytes.rfind`` on its envelope prefix and only that line is parsed.

It returns ``None`` — and the caller must fall back to the exact read — whenever anything is not clean: an
unparsable header, a line that does not match, a seq gap, an unknown type (even one marked ``ignorable``: only the
exact read can tell), a packed row of one member (an empty ``dt``; no writer makes one), a torn zstd frame,
complete frames ending inside a line, a libzstd error, or a wanted line that does not parse. The exact read then
produces the exact outcome, refusals and corruption errors included.

What the fast path does **not** verify (the exact read does):

- JSON validity inside a line whose envelope matches: the rest of the line after ``"seq":<n>,`` is not parsed
  (the wanted line itself is), so a line with a broken payload, duplicate keys (JSON's last one wins, so
  ``{"type":"a","seq":1,"type":"todo/write",…}`` is a ``todo/write`` to the exact read) or a bad ``time`` passes;
- a packed row beyond its envelope and ``dt``: that ``texts``/``args`` has exactly ``len(dt) + 1`` strings, that
  ``turn``/``step``/``index`` are numbers, that no other keys are present, that member seqs and times stay safe
  integers;
- the ``ignorable`` flag (known types are accepted whatever it says, as the exact read does; unknown types fall
  back).

A raw log ending in an unfinished line is handled exactly as the exact read handles it: the fragment is not part of
the log (``torn`` says so). Lines are only ever split at ``\\n`` bytes, which JSON text cannot contain unescaped.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress, islice, repeat
from operator import sub
from typing import Any, Final

import zstandard

from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.harness.persistence.chunk_rows import ROW_TYPES
from dsh_todo.harness.persistence.errors import CorruptSessionLogError, SessionFormatUnsupportedError
from dsh_todo.harness.persistence.header import Meta, parse_header_record
from dsh_todo.harness.persistence.paths import Compression
from dsh_todo.harness.persistence.reading import LineSeek
from dsh_todo.harness.persistence.regular import open_binary
from dsh_todo.harness.persistence.scan import paused_gc
from dsh_todo.harness.persistence.zstd import FrameError, decode_frame, scan_frames
from dsh_todo.jsonutil import loads

CHUNK_SIZE: Final = 256 << 10
"""Bytes read (raw) or plaintext bytes decompressed (zstd) per step (pieces of a few MiB cost page faults and cache
misses on every step: a 2 MB tail read 1.5× slower)."""

_N: Final = rb"(?:0|[1-9][0-9]*)"
_LINE: Final = re.compile(
    # group 1: the type and the seq key ('todo/write","seq', or 'text-chunks","seq0' with group 2 set to "0")
    rb'\{"type":"([^"\\]*","seq(?:(0)|))":'
    # group 3: the line's first seq (a JSON integer: no sign, no leading zero, no fraction)
    + rb"(" + _N + rb"),"
    # group 4, for a "seq0" key only, which must be followed by the rest of a packed row's envelope in DSH's key
    # order: its dt list (at least one entry, so at least two members; a one-member row falls back)
    + rb'(?(2)"time0":-?[0-9]+,"data":\{"turn":[^,]*,"step":[^,]*,"index":[^,]*,"dt":\[([-0-9,]+)\],)'
    + rb".*\n")
"""One whole line of a known shape; :meth:`re.Pattern.split` turns a run of lines into ``[between, key, zero, seq,
dt, between, …]`` and every ``between`` must be empty."""

_KEYS: Final = (frozenset(f'{kind}","seq'.encode() for kind in KNOWN_SESSION_EVENT_TYPES)
                | frozenset(f'{row}","seq0'.encode() for row in ROW_TYPES))


@dataclass(frozen=True, slots=True)
class LastOf:
    """What :func:`scan_last_of` found.

    ``first_seq`` is the seq of the first event scanned (0 for a whole log) and ``end_seq`` one past the last, so a
    whole log holds ``end_seq`` events; ``last`` is the last event of a wanted type, parsed (``None`` if there is
    none); ``meta`` is the header (``None`` for a tail scan, which starts after it); ``torn`` says a raw log ended in
    an unfinished line, which is not part of the log.
    """

    meta: Meta | None
    first_seq: int
    end_seq: int
    last: dict[str, Any] | None
    torn: bool = False


class _Unclean(Exception):
    """Something the fast path does not vouch for; the caller falls back to the exact read."""


class _Lines:
    """The line checker, fed plaintext in pieces; keeps only the unfinished last line between pieces."""

    __slots__ = ("_needles", "_starts", "first_seq", "last_line", "next_seq", "partial")

    def __init__(self, types: Iterable[str], first_seq: int | None) -> None:
        self._needles = [b'\n{"type":"' + kind.encode() + b'","seq":' for kind in types]
        self._starts = [needle[1:] for needle in self._needles]
        self.first_seq = first_seq
        self.next_seq = first_seq
        self.partial = b""
        self.last_line: bytes | None = None

    def feed(self, data: bytes) -> None:
        """Consume the next plaintext; only complete lines are checked, the rest waits for the next piece."""
        last_nl = data.rfind(b"\n")
        if last_nl < 0:
            self.partial += data
            return
        start = 0
        if self.partial:
            start = data.index(b"\n") + 1
            line = self.partial + data[:start]
            self._check(line, 0, len(line))
        self.partial = data[last_nl + 1:]
        if start <= last_nl:
            self._check(data, start, last_nl + 1)

    def _check(self, data: bytes, start: int, end: int) -> None:
        """Check the complete lines ``data[start:end]``; everything per line runs in C (map, compress, orjson)."""
        with memoryview(data) as view:
            pieces = _LINE.split(view[start:end])
        if pieces.pop() or any(pieces[0::5]):
            raise _Unclean("a line does not match the envelope of an event or a packed row")
        if not _KEYS.issuperset(pieces[1::5]):
            raise _Unclean("an event type this harness does not know, or a seq key that does not fit the type")
        try:
            starts: list[int] = loads(b"[" + b",".join(pieces[3::5]) + b"]")
        except ValueError:
            raise _Unclean("a seq beyond what the fast path parses") from None
        count = len(starts)
        base = self.next_seq
        if base is None:
            base = self.first_seq = starts[0]
        elif starts[0] != base:
            raise _Unclean("seq gap")
        # Every line starts where the previous one ended: one seq after an event, len(dt) + 1 after a packed row.
        # So the steps between consecutive starts are 1 except right after rows, which must step by their size.
        dts = pieces[4::5]
        rows = list(compress(range(count), dts))
        sizes = list(map((2).__add__, map(bytes.count, compress(dts, dts), repeat(b","))))
        last_size = 1
        if rows and rows[-1] == count - 1:
            rows.pop()
            last_size = sizes.pop()
        steps = list(map(sub, islice(starts, 1, None), starts))
        jumps = list(compress(range(count - 1), map((1).__ne__, steps)))
        if jumps != rows or list(map(steps.__getitem__, jumps)) != sizes:
            raise _Unclean("seq gap")
        self.next_seq = starts[-1] + last_size
        self._find_last(data, start, end)

    def _find_last(self, data: bytes, start: int, end: int) -> None:
        best = -1
        for needle in self._needles:
            best = max(best, data.rfind(needle, start, end))
        if best >= 0:
            at = best + 1
        elif any(data.startswith(prefix, start) for prefix in self._starts):
            at = start
        else:
            return
        self.last_line = data[at:data.index(b"\n", at)]


def _parse_last(lines: _Lines, types: frozenset[str]) -> dict[str, Any] | None:
    if lines.last_line is None:
        return None
    try:
        event = loads(lines.last_line)
    except ValueError:
        raise _Unclean("the wanted line does not parse") from None
    if type(event) is not dict or event.get("type") not in types:
        raise _Unclean("the wanted line is not the event its envelope says")
    return event


def _scan_raw(file: Any, lines: _Lines, chunk_size: int, *, whole: bool) -> Meta | None:
    meta: Meta | None = None
    if whole:
        first = file.readline()
        if not first.endswith(b"\n"):
            raise _Unclean("no complete header line")
        meta = parse_header_record(first)
    while chunk := file.read(chunk_size):
        lines.feed(chunk)
    return meta


def _scan_zstd(file: Any, lines: _Lines, chunk_size: int, *, whole: bool, seek: LineSeek | None = None) -> Meta | None:
    meta: Meta | None = None
    pending = b""
    eof = False

    def more() -> None:
        nonlocal pending, eof
        chunk = file.read(chunk_size)
        if chunk:
            pending += chunk
        else:
            eof = True

    if whole:
        while True:
            more()
            frames = scan_frames(pending, max_frames=1).frames
            if frames or eof:
                break
        if not frames:
            raise _Unclean("no complete header frame")
        start, end = frames[0]
        plaintext = decode_frame(pending[start:end])
        if not plaintext or plaintext.find(b"\n") != len(plaintext) - 1:
            raise _Unclean("the first frame is not exactly one header line")
        meta = parse_header_record(plaintext)
        pending = pending[end:]
    decompressor = zstandard.ZstdDecompressor()
    while True:
        scan = scan_frames(pending)
        complete = scan.frames[-1][1] if scan.frames else 0
        if complete:
            # Complete frames only, decompressed across frames (checksums verified) at most chunk_size plaintext
            # bytes at a time, so memory stays bounded whatever the compression ratio or frame size.
            with memoryview(pending) as view:
                reader = decompressor.stream_reader(view[:complete], read_across_frames=True)
                while piece := reader.read(chunk_size):
                    for text in seek.pass_on(piece) if seek is not None else (piece,):
                        lines.feed(text)
            pending = pending[complete:]
        if eof:
            break
        more()
    if pending:
        raise _Unclean("the last frame is incomplete (a torn tail)")
    if lines.partial:
        raise _Unclean("complete frames end inside a line")
    return meta


def scan_last_of(path: str | os.PathLike[str], compression: Compression, types: Iterable[str], *,
                 offset: int | None = None, chunk_size: int = CHUNK_SIZE, from_seq: int | None = None) -> LastOf | None:
    """Stream the log at ``path`` and return its event range and its last event of one of ``types``.

    ``types`` must be known event types (not packed-row tags). With ``offset`` the scan starts there instead of
    after the header: a line start (raw; the byte before it must be ``\\n``) or a frame start (zstd), as a
    projection checkpoint records; ``first_seq`` is then the seq found there. With ``from_seq`` too (the
    checkpoint's event), a zstd record is scanned only from that event's line on (:class:`~.reading.LineSeek`; the
    whole record when that line cannot be told), so ``first_seq`` is at most ``from_seq``. Returns ``None`` whenever
    the log is not clean enough for the fast path to vouch for the result (see the module docstring): read it
    exactly then.
    """
    if from_seq is not None and offset is not None and compression == "zstd":
        with contextlib.suppress(_Lost):
            return _scan_last_of(path, compression, types, offset, chunk_size, LineSeek(from_seq))
    return _scan_last_of(path, compression, types, offset, chunk_size, None)


class _Lost(Exception):
    """A seek for an event's line that never found it: scan the record in full."""


def _scan_last_of(path: str | os.PathLike[str], compression: Compression, types: Iterable[str], offset: int | None,
                  chunk_size: int, seek: LineSeek | None) -> LastOf | None:
    wanted = frozenset(types)
    if not wanted <= KNOWN_SESSION_EVENT_TYPES:
        raise ValueError(f"scan_last_of takes known event types, not {sorted(wanted - KNOWN_SESSION_EVENT_TYPES)}")
    whole = offset is None
    lines = _Lines(sorted(wanted), 0 if whole else None)
    try:
        with open_binary(path, buffering=0) as file, paused_gc():
            if offset is not None:
                if offset < 1 or offset > os.fstat(file.fileno()).st_size:
                    return None
                if compression == "none" and os.pread(file.fileno(), 1, offset - 1) != b"\n":
                    return None
                file.seek(offset)
            if compression == "zstd":
                meta = _scan_zstd(file, lines, chunk_size, whole=whole, seek=seek)
                if seek is not None and not (seek.found and lines.first_seq is not None
                                             and lines.first_seq <= seek.seq):
                    raise _Lost
            else:
                meta = _scan_raw(file, lines, chunk_size, whole=whole)
            last = _parse_last(lines, wanted)
    except (_Unclean, CorruptSessionLogError, SessionFormatUnsupportedError, FrameError, zstandard.ZstdError):
        return None
    if lines.first_seq is None or lines.next_seq is None:  # a tail scan that found no event at all
        return None
    return LastOf(meta, lines.first_seq, lines.next_seq, last, torn=bool(lines.partial))
