"""Reading the event lines of a log into its committed prefix, with DSH's crash-tail rules.

A crash can leave at the end of an append-only log a final line without its newline (always a crash tail), a
complete line that does not parse, or one whose seq does not continue the log (a lost write). Those two are a crash
tail only if **no later line holds a ``turn/end``**: a finished turn after the damage proves it is in the committed
middle, and the log is refused as corrupt rather than silently shortened. :class:`LogScanner` applies these rules and
remembers how many bytes form the good prefix, so recovery knows where to cut. Fed plaintext in pieces, it keeps
only an unfinished final line between them; it is a cold load's hot path, so its loop builds nothing per line beyond
the parsed JSON and expands packed rows in place.
"""

from __future__ import annotations

from typing import Any

from dsh_todo.harness.persistence.errors import CorruptSessionLogError
from dsh_todo.harness.persistence.header import Meta, parse_header_record
from dsh_todo.harness.persistence.interest import Interest
from dsh_todo.harness.persistence.jsonl.bulk import DEEP_CANDIDATE, prove
from dsh_todo.harness.persistence.jsonl.chunk_rows import ROW_TYPES, MalformedRowError, expand_row, row_span, row_stub
from dsh_todo.harness.persistence.jsonl.limits import max_line, too_deep, too_long
from dsh_todo.harness.persistence.seq_ranges import expand as expand_ranges
from dsh_todo.jscompat import MISSING, js_text
from dsh_todo.jsonutil import TooDeepError, loads, nests_deeper

_ROW_TAGS = tuple(ROW_TYPES)
"""The packed row tags, compared rather than hashed: a line's ``type`` may be a list. Only format v0 packs rows;
in a v4 log such a line is an event of an unknown type."""

_SLICE = 256 << 10
"""Plaintext split into lines at a time when its lines are very short."""


def _unparsable(line: int) -> CorruptSessionLogError:
    return CorruptSessionLogError(f"corrupt session log: unparsable committed event at line {line}")


def _gap(line: int, expected: int, got: object) -> CorruptSessionLogError:
    return CorruptSessionLogError(
        f"corrupt session log: seq gap in committed region at line {line} (expected {expected}, got {js_text(got)})")


def _seq_matches(seq: object, expected: int) -> bool:
    """``seq === expected`` in JavaScript terms: a JSON number equal to it (``true`` is not ``1``)."""
    kind = type(seq)
    return (kind is int or kind is float) and seq == expected


BULK_MIN = 64 << 10
"""Fewer bytes of complete lines than this are read by the exact rules: they cost a millisecond or two, less than
importing msgspec (a small log never does)."""


def _may_bound(text: bytes) -> bool:
    """Whether ``text`` may hold a turn boundary: its type's bytes, or an escape, must be there."""
    return b"turn/" in text or b"\\" in text


class LogScanner:
    """Incremental reader of one log's event lines after its header.

    ``events``: the good prefix not yet taken (packed rows expanded); ``committed_bytes``: the plaintext up to the
    end of its last line; ``input_bytes``: everything fed; ``base``: the seq of the first event not yet taken.
    ``wanted`` (a pass keeping no events, for an observer that reads only what it names) lets runs of lines be proven
    clean at once (:func:`~.bulk.prove`); ``turn_open`` (kept by that pass) says a turn is open."""

    __slots__ = ("_fragment", "_fragment_size", "_issue", "_line", "base", "committed_bytes", "events", "expand",
                 "input_bytes", "max_line", "meta", "ranges", "row_tags", "turn_open", "unexpanded", "wanted")

    def __init__(self, header_record: bytes) -> None:
        self._start(parse_header_record(header_record), 0, len(header_record))

    @classmethod
    def continuing(cls, meta: Meta, base: int) -> LogScanner:
        """A scanner for the tail of a log whose header is known, expecting ``base`` as the first seq; byte counts
        and line numbers are relative to the first byte fed."""
        scanner = cls.__new__(cls)
        scanner._start(meta, base, 0)
        return scanner

    def _start(self, meta: Meta, base: int, fed: int) -> None:
        self.meta = meta
        v0 = meta.get("version") == 0
        self.row_tags = _ROW_TAGS if v0 else ()
        """Packed chunk rows exist in format v0 alone."""
        self.ranges = not v0
        """Format v4 stores runs in ``sourceEventSeqs`` as ``[start, end]`` pairs (:func:`.seq_ranges.expand`)."""
        self.events: list[dict[str, Any]] = []
        self.base = base
        self.input_bytes = self.committed_bytes = fed
        self._fragment: list[bytes] = []
        self._fragment_size = 0
        self._line = 0
        self._issue: CorruptSessionLogError | None = None
        self.max_line = max_line()
        self.expand = True
        self.unexpanded = 0
        self.wanted: Interest | None = None
        self.turn_open = False

    @property
    def damaged(self) -> bool:
        """A complete line fed so far does not belong to the good prefix."""
        return self._issue is not None

    @property
    def clean(self) -> bool:
        """Every complete line fed so far belongs to the good prefix (no bad line, no pending fragment)."""
        return self.committed_bytes == self.input_bytes

    def feed(self, data: bytes) -> None:
        """Consume the next plaintext bytes; raises :class:`CorruptSessionLogError` once damage is proven, or at a
        line longer than :attr:`max_line` (the unfinished last line included: memory stays bounded by it)."""
        if not data:
            return
        if self.wanted is not None and self._issue is None and self._proven(data, self.wanted):
            return
        if len(data) > _SLICE and data.count(b"\n") > len(data) >> 5:
            # Very short lines: split in slices, so the list of lines stays small (a line costs ~40 bytes).
            for start in range(0, len(data), _SLICE):
                self.feed(data[start:start + _SLICE])
            return
        if self._issue is not None:
            self._skim(data)
            return
        self.input_bytes += len(data)
        lines = data.split(b"\n")
        tail = lines.pop()
        fragment = self._fragment
        if fragment:
            if not lines:
                self._grow(tail)
                return
            fragment.append(lines[0])
            lines[0] = b"".join(fragment)
        position = self.input_bytes - len(tail) - sum(map(len, lines)) - len(lines)
        self._fragment = [tail] if tail else []
        self._fragment_size = len(tail)
        limit = self.max_line
        if lines and len(data) + len(lines[0]) > limit and max(map(len, lines)) > limit:
            at = next(index for index, line in enumerate(lines) if len(line) > limit)
            self._consume(lines[:at], position)
            raise too_long(self._line + 1, limit)
        if len(tail) > limit:
            self._consume(lines, position)
            raise too_long(self._line + 1, limit)
        if lines:
            self._consume(lines, position)

    def _proven(self, data: bytes, wanted: Interest) -> bool:
        """Take the complete lines ``data`` finishes at once when :func:`~.bulk.prove` proves them clean (the events
        anyone looks at handed over, the others counted); ``False``: nothing was consumed, the exact pass reads them."""
        end = data.rfind(b"\n") + 1
        if not end or end + self._fragment_size < BULK_MIN or end + self._fragment_size > self.max_line:
            return False
        lines = data.split(b"\n")
        lines.pop()
        view = memoryview(data)
        texts: list[bytes | memoryview] = [view[:end]]
        if self._fragment:  # the first line began in an earlier piece
            first = b"".join([*self._fragment, lines[0]])
            texts = [first, view[len(lines[0]) + 1:end]]
            lines[0] = first
        if self.turn_open and not (_may_bound(data) or (self._fragment and _may_bound(lines[0]))):
            return False  # a turn is open and goes on through these lines: the exact pass hands them all over
        proven = prove(lines, texts, self.base + len(self.events) + self.unexpanded, self.turn_open, wanted,
                       rows=bool(self.row_tags))
        if proven is None:
            return False
        self.input_bytes += len(data)
        tail = data[end:]
        self.committed_bytes = self.input_bytes - len(tail)
        self._line += proven.lines
        self.events.extend(proven.handed)
        self.unexpanded += proven.passed
        self._fragment = [tail] if tail else []
        self._fragment_size = len(tail)
        if len(tail) > self.max_line:
            raise too_long(self._line + 1, self.max_line)
        return True

    def _skim(self, data: bytes) -> None:
        """After damage: only a later ``turn/end`` line matters (it proves the damage committed), so a piece that
        cannot hold one is counted, not parsed. Its bytes, or an escape (a backslash), must appear in the line."""
        self.input_bytes += len(data)
        newline = data.find(b"\n")
        if newline < 0:  # the unfinished line goes on: judged once it ends
            self._grow(data)
            return
        # The line this piece finishes began in earlier pieces: judged whole (its ``turn/end`` may lie there).
        first = b"".join(self._fragment) + data[:newline] if self._fragment else b""
        if b"turn/end" in data or b"\\" in data or b"turn/end" in first or b"\\" in first:
            lines = data.split(b"\n")
            tail = lines.pop()
            if lines and self._fragment:
                self._fragment.append(lines[0])
                lines[0] = b"".join(self._fragment)
            if lines:
                self._fragment, self._fragment_size = [], 0
                self._after_issue(lines)
            self._grow(tail)
            return
        newline = data.rfind(b"\n")
        self._line += data.count(b"\n")
        self._fragment, self._fragment_size = [], 0
        self._grow(data[newline + 1:])

    def _grow(self, piece: bytes) -> None:
        """Add to the unfinished last line, refusing it once it is longer than a line may be."""
        self._fragment_size += len(piece)
        if self._fragment_size > self.max_line:
            raise too_long(self._line + 1, self.max_line)
        if piece:
            self._fragment.append(piece)

    def _consume(self, lines: list[bytes], position: int) -> None:
        """Read complete ``lines``, the first of which starts at plaintext byte ``position``."""
        if self._issue is not None:
            self._after_issue(lines)
            return
        events = self.events
        append = events.append
        count = self.base + len(events) + self.unexpanded
        unexpanded = self.unexpanded
        expand = self.expand
        row_tags = self.row_tags
        ranges = self.ranges
        committed = self.committed_bytes
        line_no = start_line = self._line
        issue = None
        try:
            for line in lines:
                position += len(line) + 1
                line_no += 1
                try:
                    value = loads(line)
                except TooDeepError:
                    raise too_deep(line_no) from None
                except ValueError:
                    issue = _unparsable(line_no)
                    break
                if len(line) > DEEP_CANDIDATE and nests_deeper(value):
                    raise too_deep(line_no)
                if type(value) is not dict:
                    # DSH reads a non-object line as an event whose seq is undefined.
                    issue = _gap(line_no, count, MISSING)
                    break
                kind = value.get("type")
                if kind in row_tags:
                    try:
                        size, last_time = row_span(value)
                    except MalformedRowError:
                        issue = _unparsable(line_no)
                        break
                    if value["seq0"] != count:
                        issue = _gap(line_no, count, value["seq0"])
                        break
                    if expand:
                        events.extend(expand_row(value))
                    else:
                        append(row_stub(count + size - 1, last_time))
                        unexpanded += size - 1
                    count += size
                    committed = position
                    continue
                seq = value.get("seq", MISSING)
                if not _seq_matches(seq, count):
                    issue = _gap(line_no, count, seq)
                    if kind == "turn/end":
                        raise issue
                    break
                if ranges and "sourceEventSeqs" in value:
                    try:
                        value["sourceEventSeqs"] = expand_ranges(value["sourceEventSeqs"], count)
                    except ValueError as exc:
                        issue = CorruptSessionLogError(
                            f"corrupt session log: invalid committed event at line {line_no}: {exc}")
                        if kind == "turn/end":
                            raise issue from None
                        break
                append(value)
                count += 1
                committed = position
        finally:
            self.committed_bytes = committed
            self._line = line_no
            self._issue = issue
            self.unexpanded = unexpanded
        if issue is not None:
            self._after_issue(lines[line_no - start_line:])

    def _after_issue(self, lines: list[bytes]) -> None:
        """After damage, only a line holding a ``turn/end`` counts (it proves the damage committed); a run of lines
        holding neither those bytes nor an escape is passed over unparsed (a million blank lines cost nothing)."""
        issue = self._issue
        assert issue is not None
        text = b"\n".join(lines)
        if b"turn/end" not in text and b"\\" not in text:
            self._line += len(lines)
            return
        for line in lines:
            self._line += 1
            try:
                value = loads(line)
            except ValueError:
                continue
            if type(value) is dict and value.get("type") == "turn/end":
                raise issue
