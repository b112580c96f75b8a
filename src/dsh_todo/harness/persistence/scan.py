"""Reading the event lines of a log into its committed prefix, with DSH's crash-tail rules.

A crash can leave three kinds of damage at the end of an append-only log: a final line without its newline (a torn
write), a complete line that does not parse, or a line whose seq does not continue the log (a lost write). The
first is always a crash tail. The other two are a crash tail only if **no later line holds a ``turn/end``**: a
finished turn after the damage proves the damage is in the committed middle of the log, and then the log is refused
as corrupt rather than silently shortened. :class:`LogScanner` applies exactly these rules and remembers how many
bytes form the good prefix, so recovery knows where to cut.

The scanner is fed plaintext in pieces (a raw file at once, a zstd file frame by frame) and keeps only an
unfinished final line between pieces. It is the hot path of a cold load, so its loop avoids per-line objects beyond
the parsed JSON itself and expands packed chunk rows in place.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dsh_todo.harness.persistence.chunk_rows import ROW_TYPES, MalformedRowError, expand_row
from dsh_todo.harness.persistence.errors import CorruptSessionLogError
from dsh_todo.harness.persistence.header import Meta, parse_header_record
from dsh_todo.jscompat import MISSING, js_text
from dsh_todo.jsonutil import loads


def _unparsable(line: int) -> CorruptSessionLogError:
    return CorruptSessionLogError(f"corrupt session log: unparsable committed event at line {line}")


def _gap(line: int, expected: int, got: object) -> CorruptSessionLogError:
    return CorruptSessionLogError(
        f"corrupt session log: seq gap in committed region at line {line} (expected {expected}, got {js_text(got)})")


def _seq_matches(seq: object, expected: int) -> bool:
    """``seq === expected`` in JavaScript terms: a JSON number equal to it (``true`` is not ``1``)."""
    kind = type(seq)
    return (kind is int or kind is float) and seq == expected


@contextmanager
def paused_gc() -> Iterator[None]:
    """Hold off the cyclic garbage collector while a scan allocates millions of acyclic dicts.

    Every few hundred allocations CPython runs a collection, and the older generations are rescanned as the heap
    grows, so without this a cold scan slows down as it goes (it halves the time of a 1M-event scan on 3.11). The
    scanner creates no reference cycles, so nothing is lost by waiting; the previous state is restored after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class LogScanner:
    """Incremental reader of one log's event lines after its header.

    ``events`` is the contiguous good prefix (plain dicts, packed rows expanded); ``committed_bytes`` is the
    plaintext length up to the end of the last line that belongs to it; ``input_bytes`` counts everything fed.
    ``base`` is the seq of the first event fed: 0 for a whole log, or where a tail read starts
    (:meth:`continuing`).
    """

    __slots__ = ("_fragment", "_issue", "_line", "base", "committed_bytes", "events", "input_bytes", "meta")

    def __init__(self, header_record: bytes) -> None:
        self.meta: Meta = parse_header_record(header_record)
        self.events: list[dict[str, Any]] = []
        self.base = 0
        self.input_bytes = len(header_record)
        self.committed_bytes = len(header_record)
        self._fragment = b""
        self._line = 0
        self._issue: CorruptSessionLogError | None = None

    @classmethod
    def continuing(cls, meta: Meta, base: int) -> LogScanner:
        """A scanner for the tail of a log whose header is already known, expecting ``base`` as the first seq.

        Byte counts and line numbers are relative to the first byte fed; the crash-tail rules are the same.
        """
        scanner = cls.__new__(cls)
        scanner.meta = meta
        scanner.events = []
        scanner.base = base
        scanner.input_bytes = scanner.committed_bytes = 0
        scanner._fragment = b""
        scanner._line = 0
        scanner._issue = None
        return scanner

    @property
    def clean(self) -> bool:
        """Every complete line fed so far belongs to the good prefix (no bad line, no pending fragment)."""
        return self.committed_bytes == self.input_bytes

    def feed(self, data: bytes) -> None:
        """Consume the next plaintext bytes; raises :class:`CorruptSessionLogError` once damage is proven."""
        if not data:
            return
        self.input_bytes += len(data)
        lines = data.split(b"\n")
        tail = lines.pop()
        if self._fragment:
            if not lines:
                self._fragment += tail
                return
            lines[0] = self._fragment + lines[0]
        self._fragment = tail
        if lines:
            with paused_gc():
                self._consume(lines)

    def _consume(self, lines: list[bytes]) -> None:
        events = self.events
        append = events.append
        count = self.base + len(events)
        position = self.input_bytes - len(self._fragment) - sum(map(len, lines)) - len(lines)
        committed = self.committed_bytes
        line_no = self._line
        issue = self._issue
        try:
            for line in lines:
                position += len(line) + 1
                line_no += 1
                try:
                    value = loads(line)
                except ValueError:
                    if issue is None:
                        issue = _unparsable(line_no)
                    continue
                if type(value) is not dict:
                    # DSH reads a non-object line as an event whose seq is undefined.
                    if issue is None:
                        issue = _gap(line_no, count, MISSING)
                    continue
                kind = value.get("type")
                if kind in ROW_TYPES:
                    try:
                        members = expand_row(value)
                    except MalformedRowError:
                        if issue is None:
                            issue = _unparsable(line_no)
                        continue
                    if issue is not None:
                        continue
                    if members[0]["seq"] != count:
                        issue = _gap(line_no, count, members[0]["seq"])
                        continue
                    events.extend(members)
                    count += len(members)
                    committed = position
                    continue
                if issue is not None:
                    if kind == "turn/end":
                        raise issue
                    continue
                seq = value.get("seq", MISSING)
                if not _seq_matches(seq, count):
                    issue = _gap(line_no, count, seq)
                    if kind == "turn/end":
                        raise issue
                    continue
                append(value)
                count += 1
                committed = position
        finally:
            self.committed_bytes = committed
            self._line = line_no
            self._issue = issue
