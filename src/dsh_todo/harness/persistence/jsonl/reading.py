"""The one pass that reads a JSONL log file, raw or zstd: the backend's reads and every reader go through it.

Every line goes through :class:`~.scan.LogScanner`, frames are cut and checked as DSH does, and unknown event types
are refused once the whole pass succeeds (as DSH reads, then refuses). The events are kept (``keep=True``) or handed
to ``observe`` and dropped piece by piece, so a cold reader of a million-event log holds one piece and the open
turn, never the log; such a pass, told which event types its observer reads, may prove runs of lines clean in bulk
and hand over only those events and the open turn (:mod:`.bulk`). The same pass continues from
a record start (:func:`read_on`: a checkpoint's tail, a follower's next read) and reads back to an open turn.

The pass notes what readers and writers need: the header, the event count, the torn tail, where the record holding
the last event starts (a writer continues from there), and the open turn, from which the interrupted-turn closers
are computed exactly as from the whole log (a ``turn/start`` or ``turn/end`` resets everything they depend on).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Protocol, TypeVar

from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.harness.persistence.contract import Observer, Record, TornTail
from dsh_todo.harness.persistence.errors import (
    CorruptSessionLogError,
    SessionFormatUnsupportedError,
    SessionLogError,
    refuse_unknown_types,
)
from dsh_todo.harness.persistence.header import Meta
from dsh_todo.harness.persistence.interest import Interest
from dsh_todo.harness.persistence.jsonl.chunk_rows import ROW_TYPES
from dsh_todo.harness.persistence.jsonl.limits import max_line, too_long
from dsh_todo.harness.persistence.jsonl.paths import check_version, compression_of
from dsh_todo.harness.persistence.jsonl.regular import open_binary
from dsh_todo.harness.persistence.jsonl.scan import LogScanner
from dsh_todo.harness.persistence.jsonl.zstd import FrameError, decompressor, frame_pieces, prefix_pieces, scan_frames
from dsh_todo.harness.persistence.repair import interrupted_turn_closers
from dsh_todo.jsonutil import loads

if TYPE_CHECKING:
    from zstandard import ZstdDecompressor


CHUNK_SIZE: Final = 256 << 10
"""Plaintext bytes fed to the scanner at a time: pieces of a few MiB cost page faults and cache misses (decision
0015)."""

_KNOWN: Final = KNOWN_SESSION_EVENT_TYPES
_ROW_TAGS: Final = tuple(ROW_TYPES)
_T = TypeVar("_T")


class Scanned:
    """What one pass found; ``events`` only when they were kept. Not a dataclass: creating one costs every
    ``dsh-todo plan`` about 1 ms (decision 0014)."""

    __slots__ = ("count", "cut_frame_events", "events", "last_record", "meta", "open_turn", "path", "torn_at",
                 "unknown")

    def __init__(self, meta: Meta, path: Path, events: list[Record] | None = None) -> None:
        self.meta = meta
        self.path = path
        self.count = 0
        self.events = events
        self.torn_at: int | None = None
        self.cut_frame_events = 0
        self.last_record: int | None = None
        """Where the record holding the last event starts, when that record is whole on disk."""
        self.open_turn: list[Record] = []
        self.unknown: SessionLogError | None = None

    @property
    def torn(self) -> TornTail | None:
        """The torn tail as recovery needs it (requires the kept events for a cut zstd frame)."""
        if self.torn_at is None:
            return None
        recovered = (self.events or [])[self.count - self.cut_frame_events:] if self.cut_frame_events else []
        return TornTail(self.torn_at, recovered)

    def closers(self) -> list[Record]:
        """The interrupted-turn closers a load would append (computed from the open turn alone)."""
        return interrupted_turn_closers(self.open_turn, self.meta) if self.open_turn else []


class _Pass:
    """Feeds a :class:`LogScanner` and takes its events off it piece by piece."""

    def __init__(self, scanner: LogScanner, path: Path, keep: bool, observe: Observer | None,
                 wanted: Interest | None = None, expand: bool = False) -> None:
        self.scanner = scanner
        # Without keeping (or ``expand``), a packed row is checked and counted, and stands as its last member.
        scanner.expand = keep or expand
        # Without keeping, runs of lines proven clean in bulk hand over only the ``wanted`` events and the open turn
        # (bulk.prove): for an observer that reads those types alone, never for one that wants every event.
        scanner.wanted = None if keep else wanted
        self.found = Scanned(scanner.meta, path, events=[] if keep else None)
        self.observe = observe
        self._held: list[bytes] = []
        self._held_size = 0

    def feed(self, data: bytes) -> None:
        if self.scanner.wanted is not None:  # small pieces (a zstd frame per write batch) are proven together
            self._held.append(data)
            self._held_size += len(data)
            if self._held_size >= CHUNK_SIZE:
                self.flush()
            return
        self.scanner.feed(data)
        self.take()

    def flush(self) -> None:
        """Feed what :meth:`feed` holds: before the pass ends, and before reporting damage the file holds after it
        (the lines before the damage are read first, as piece by piece)."""
        if self._held:
            data = b"".join(self._held)
            self._held, self._held_size = [], 0
            self.scanner.feed(data)
            self.take()

    def take(self) -> None:
        scanner = self.scanner
        events = scanner.events
        if not events and not scanner.unexpanded:
            return
        found = self.found
        if events:
            types = list(map(dict.get, events, repeat("type")))
            if found.unknown is None and not _all_known(types):
                try:
                    refuse_unknown_types(str(found.meta["id"]), events, found.path)
                except SessionLogError as exc:
                    found.unknown = exc  # raised only if the whole pass succeeds, as the backend reads, then refuses
            if self.observe is not None:
                self.observe(events, types)
            _follow_turn(found.open_turn, events, types)
            scanner.turn_open = bool(found.open_turn)
        handed = len(events) + scanner.unexpanded
        found.count += handed
        if found.events is not None:
            found.events.extend(events)
        # The scanner counts seqs from ``base + len(events) + unexpanded``: move the base past what it hands over.
        scanner.base += handed
        scanner.unexpanded = 0
        scanner.events = []


def _all_known(types: list[Any]) -> bool:
    try:
        return _KNOWN.issuperset(types)
    except TypeError:  # a ``type`` that is a list or an object: not a type this harness knows
        return False


def _follow_turn(open_turn: list[Record], events: Sequence[Record], kinds: list[Any]) -> None:
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


def identity(path: Path) -> tuple[int, ...]:
    """What says a file changed: device, inode, size, modification and change times."""
    stat = os.stat(path)
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _stable(path: Path, read: Callable[[int | None], _T]) -> _T:
    """``read(limit)`` of one consistent state of the file: read again if it changed during the read, then only up to
    byte ``limit``, where it had reached (``None``: all of it); that holds as long as the same file only grew (a
    log only appends). The bound keeps a reader from chasing a busy writer forever: "read again until nothing
    changed" never ended (``dsh-todo events`` on a 35 MB log appended every 30 ms printed nothing in a minute)."""
    limit: int | None = None
    while True:
        before = identity(path)
        found = read(limit)
        after = identity(path)
        if after == before or (limit is not None and after[:2] == before[:2] and after[2] >= limit):
            return found
        limit = after[2]


def read_stable(path: Path) -> bytes:
    """The file's bytes as one consistent state (:func:`_stable`)."""

    def read(limit: int | None) -> bytes:
        with open_binary(path) as file:
            return file.read() if limit is None else file.read(limit)

    return _stable(path, read)


def scan_log(path: Path, *, keep: bool = True, observe: Observer | None = None,
             refuse_unknown: bool = True, wanted: Interest | None = None, expand: bool = False) -> Scanned:
    """Read the log at ``path`` once, in the encoding its name says; raises the backend's errors for a log it refuses
    (with ``refuse_unknown=False``, not for an unknown event type: the backend's raw read level).
    ``observe(events, types)`` sees every run of events in order; given the event types it reads (``wanted``, without
    ``keep``), of a run of lines proven clean in bulk only those events and the open turn (:mod:`.bulk`): an
    observer that looks at nothing else ends with the same answer. With ``expand`` (without ``keep``) it sees a
    packed row's every member instead of the row standing as its last. A log that changes while it is read (a writer
    appending) is read again (:func:`_stable`)."""
    read = _scan_zstd if compression_of(path) == "zstd" else _scan_raw
    try:
        found = _stable(path, lambda limit: read(path, keep, observe, limit, wanted, expand))
    except SessionFormatUnsupportedError as exc:
        if exc.location is None:
            raise SessionFormatUnsupportedError(f"{exc} (raw log: {path})", path) from None
        raise
    if found.unknown is not None and refuse_unknown:
        raise found.unknown
    return found


def header_record(file: BinaryIO, zstd: bool) -> bytes:
    """The header record of the log open in ``file`` at its start: the first line, or for zstd the first frame,
    which must be exactly the header line; neither longer than a line may be."""
    limit = max_line()
    if not zstd:
        header = file.readline(limit + 1)
        if not header.endswith(b"\n"):
            if len(header) > limit:
                raise too_long("the header", limit)
            raise CorruptSessionLogError("empty or header-less session log")
        return header
    content = b""
    while not (frames := scan_frames(content, max_frames=1).frames):
        chunk = file.read(max(8192, len(content)))  # doubling: a long frame is not copied once per piece
        if not chunk:
            raise CorruptSessionLogError("empty or header-less Zstandard session log")
        content += chunk
    start, end = frames[0]
    return _header_frame(_frame(memoryview(content)[start:end], 0))


def _header_frame(pieces: Iterator[bytes]) -> bytes:
    """A zstd log's first frame, which must be exactly the header line (no longer than a line may be)."""
    limit = max_line()
    plaintext = b""
    for piece in pieces:
        plaintext += piece
        if len(plaintext) > limit:
            raise too_long("the header", limit)
    if not plaintext or plaintext.find(b"\n") != len(plaintext) - 1:
        raise CorruptSessionLogError("corrupt Zstandard session log: first frame is not exactly one header line")
    return plaintext


def _scan_raw(path: Path, keep: bool, observe: Observer | None, end: int | None = None,
              wanted: Interest | None = None, expand: bool = False) -> Scanned:
    """One pass over a raw log, up to byte ``end`` (the whole file when ``None``)."""
    with open_binary(path) as file:
        one = _Pass(_scanner(path, header_record(file, False)), path, keep, observe, wanted, expand)
        source = _Bounded(file, end)
        while chunk := source.read(CHUNK_SIZE):
            one.feed(chunk)
        one.flush()
        scanner = one.scanner
        committed = scanner.committed_bytes
        if committed < scanner.input_bytes:
            one.found.torn_at = committed
        if one.found.count:
            one.found.last_record = _line_start(file, committed)
    return one.found


def _scanner(path: Path, header: bytes) -> LogScanner:
    """A scanner for the log at ``path`` whose header record is ``header``, refused when its file name and its header
    name different format versions."""
    scanner = LogScanner(header)
    check_version(path, scanner.meta)
    return scanner


def _line_start(file: BinaryIO, end: int) -> int:
    """Where the line ending at byte ``end`` (just after its newline) starts."""
    at = end - 1
    while at > 0:
        start = max(0, at - 65536)
        file.seek(start)
        found = file.read(at - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        at = start
    return 0


def _frame(data: memoryview, at: int, dctx: ZstdDecompressor | None = None) -> Iterator[bytes]:
    """The plaintext of the complete frame ``data`` (which starts at byte ``at`` of the file), piece by piece."""
    try:
        yield from frame_pieces(data, CHUNK_SIZE, dctx)
    except FrameError as exc:
        raise CorruptSessionLogError(
            f"corrupt Zstandard session log: frame at byte {at} failed validation") from exc


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


class _Bounded:
    """``file`` read from where it stands up to byte ``end`` of the file (all of it when ``end`` is ``None``)."""

    def __init__(self, file: BinaryIO, end: int | None) -> None:
        self.file = file
        self.end = end

    def read(self, size: int, /) -> bytes:
        if self.end is not None:
            size = max(0, min(size, self.end - self.file.tell()))
            if not size:
                return b""
        return self.file.read(size)


def _frames(file: _Readable) -> Iterator[tuple[int, memoryview | None, bytes]]:
    """``(offset, frame, torn)`` for each complete frame of the file read piece by piece (``torn`` empty), then,
    if the file ends inside a frame, ``(offset, None, the torn bytes)``. Memory: one read piece and one frame."""
    pending = b""
    offset = 0
    while True:
        chunk = file.read(CHUNK_SIZE)
        if chunk:
            pending = pending + chunk if pending else chunk
        scan = scan_frames(pending)
        with memoryview(pending) as view:
            for start, end in scan.frames:
                yield offset + start, view[start:end], b""
        done = scan.frames[-1][1] if scan.frames else 0
        offset += done
        pending = pending[done:]
        if not chunk:
            break
    if pending:
        yield offset, None, pending


def _scan_zstd(path: Path, keep: bool, observe: Observer | None, end: int | None = None,
               wanted: Interest | None = None, expand: bool = False) -> Scanned:
    """One pass over a zstd log, up to byte ``end`` (the whole file when ``None``)."""
    with open_binary(path) as file:
        frames = _frames(_Bounded(file, end))
        first = next(frames, None)
        if first is None or first[1] is None:
            raise CorruptSessionLogError("empty or header-less Zstandard session log")
        one = _Pass(_scanner(path, _header_frame(_frame(first[1], 0))), path, keep, observe, wanted, expand)
        dctx = decompressor()
        last_start: int | None = None
        torn_start: int | None = None
        torn = b""
        try:
            for at, frame, rest in frames:
                if frame is None:
                    torn_start, torn = at, rest
                    break
                for piece in _frame(frame, at, dctx):
                    one.feed(piece)
                last_start = at
        except SessionLogError:
            one.flush()
            raise
        one.flush()
    if not one.scanner.clean:
        raise CorruptSessionLogError("corrupt Zstandard session log: complete frame contains a torn JSONL record")
    if last_start is not None and one.found.count:
        one.found.last_record = last_start
    if torn_start is not None:
        one.found.last_record = None
        complete = one.found.count
        for piece in prefix_pieces(torn, CHUNK_SIZE):
            one.feed(piece)
        one.flush()
        one.found.torn_at = torn_start
        one.found.cut_frame_events = one.found.count - complete
    return one.found


def scan_tail(path: Path, meta: Meta, offset: int, observe: Observer | None = None, *,
              keep: bool = False) -> Scanned | None:
    """The events from ``offset`` (a record start a checkpoint recorded) to the end, read by :func:`read_on` (kept
    with ``keep``), or ``None`` at anything a full pass would have to judge (what ``read_on`` refuses, a torn tail, an
    offset that is not a record start, a file changing while it is read). ``count`` is the whole log's."""
    try:
        before = identity(path)
        with open_binary(path) as file:
            if offset < 1 or (compression_of(path) == "none" and os.pread(file.fileno(), 1, offset - 1) != b"\n"):
                return None
            file.seek(offset)
            read = read_on(file, meta, None, path, keep=keep, observe=observe)
    except (SessionLogError, OSError):
        return None
    if read is None or identity(path) != before or offset + read[1] != before[2] or not read[0].count:
        return None
    read[0].count = read[2]
    return read[0]


def read_on(file: _Readable, meta: Meta, base: int | None, path: Path, *, keep: bool = True,
            observe: Observer | None = None) -> tuple[Scanned, int, int] | None:
    """The exact pass over the whole records in ``file`` from where it stands (a record start of the log at ``path``
    holding seq ``base``; ``None``: the seq its first line gives): what they hold, the bytes they take, the seq after
    them. A record still being written (an unfinished line, an incomplete frame) is left for later. ``None`` at what
    a full pass must judge: a damaged record, an event type the reader refuses, a first line without a seq."""
    zstd = compression_of(path) == "zstd"
    one = None if base is None else _Pass(LogScanner.continuing(meta, base), path, keep, observe)
    used = 0
    for piece, end in _frame_records(file) if zstd else ((chunk, None) for chunk in iter(
            lambda: file.read(CHUNK_SIZE), b"")):
        if one is None:
            first = first_seq(piece)
            if first is None:
                return None
            one = _Pass(LogScanner.continuing(meta, first), path, keep, observe)
        one.feed(piece)
        if end is not None:
            if not one.scanner.clean:
                return None
            used = end
    if one is None or one.scanner.damaged or one.found.unknown is not None:
        return None
    return one.found, used if zstd else one.scanner.committed_bytes, one.scanner.base


def _frame_records(file: _Readable) -> Iterator[tuple[bytes, int | None]]:
    """The plaintext of each complete frame piece by piece, then ``(b"", where the frame ends)``."""
    dctx = decompressor()
    for at, frame, _ in _frames(file):
        if frame is None:
            return
        yield from ((piece, None) for piece in _frame(frame, at, dctx))
        yield b"", at + len(frame)


def first_seq(plaintext: bytes) -> int | None:
    """The seq of the first event in ``plaintext`` (a packed row's ``seq0``), if its first line is complete."""
    end = plaintext.find(b"\n")
    if end < 0:
        return None
    try:
        first = loads(plaintext[:end])
    except ValueError:
        return None
    if type(first) is not dict:
        return None
    seq = first.get("seq0") if first.get("type") in _ROW_TAGS else first.get("seq")
    return seq if type(seq) is int and seq >= 0 else None


TURN_BUDGET: Final = 16 << 20
"""Plaintext bytes :func:`open_turn_before` reads back at most before giving up (a full pass then decides)."""


def open_turn_before(path: Path, offset: int, budget: int = TURN_BUDGET) -> list[Record] | None:
    """The events of the turn open at ``offset`` (a record start in a log whose bytes before it are trusted), from
    its ``turn/start`` on, packed rows left out (the closers never look at chunks); empty when the last boundary
    before it is a ``turn/end``, or there is none. ``None`` when the turn starts more than ``budget`` plaintext bytes
    back, or anything cannot be read: the caller reads the whole log then."""
    try:
        records = _records_back_raw(path, offset) if compression_of(path) == "none" else _frames_back(path, offset)
        found: list[Record] = []
        spent = 0
        for plaintext in records:
            spent += len(plaintext)
            if spent > budget:
                return None
            for line in reversed(plaintext.split(b"\n")):
                if not line:
                    continue
                value = loads(line)
                kind = value.get("type") if type(value) is dict else None
                if kind in _ROW_TAGS:
                    continue
                if kind == "turn/end":
                    return []
                found.append(value)
                if kind == "turn/start":
                    found.reverse()
                    return found
        return []
    except (ValueError, OSError, SessionLogError, FrameError):
        return None


def _records_back_raw(path: Path, offset: int) -> Iterator[bytes]:
    """Whole lines before ``offset`` (a line start), last ones first, about a MiB at a time."""
    with open_binary(path) as file:
        end = offset
        carry = b""
        while end > 0:
            start = max(0, end - (1 << 20))
            piece = os.pread(file.fileno(), end - start, start) + carry
            end = start
            cut = piece.find(b"\n") + 1 if start > 0 else 0
            carry = piece[:cut]
            yield piece[cut:]


def _frames_back(path: Path, offset: int) -> Iterator[bytes]:
    """The plaintext of the complete frames before ``offset`` (a frame start), last first, the header frame left
    out. Frame starts can only be found from the front, so the compressed prefix is walked once (structure only)."""
    starts: list[int] = []
    with open_binary(path) as file:
        for at, frame, _ in _frames(_Bounded(file, offset)):
            if frame is None:
                raise CorruptSessionLogError("the prefix ends inside a frame")
            starts.append(at)
        ends = [*starts[1:], offset]
        for start, end in zip(reversed(starts[1:]), reversed(ends[1:]), strict=True):
            yield b"".join(frame_pieces(os.pread(file.fileno(), end - start, start), CHUNK_SIZE))
