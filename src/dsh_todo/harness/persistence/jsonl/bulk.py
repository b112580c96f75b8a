"""Proving a run of complete log lines clean in bulk, so a pass that keeps no events parses only what it needs.

The exact pass (:class:`~.scan.LogScanner`) parses and checks every line; a pass that keeps no events needs the
values of few lines. :func:`prove` establishes everything the exact pass checks for a whole run at once (UTF-8,
nesting depth, each line alone decoding with msgspec into an envelope of the known event types and packed rows, the
seqs continuing): decision 0015 gives each check and why it matches ``loads``. What it refuses is not *proven*, never
judged: the exact pass reads it and gives the verdict.

Which lines it parses is the caller's choice and storage's own need, nothing else (decision 0043): the events of the
types the caller's fold reads (an :class:`~..interest.Interest`: all of them, or from the last one that restarts the
fold, as the caller says), and what recovery reads, the turn boundaries (:data:`TURN_BOUNDARIES`) and the open turn
after the last ``turn/start`` (:func:`~..repair.interrupted_turn_closers` computes the closers from it alone). What
an event type means to a fold it never knows.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from itertools import compress
from typing import Annotated, Any, Final, NamedTuple

from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.harness.persistence.interest import Interest
from dsh_todo.harness.persistence.jsonl.chunk_rows import ROW_TYPES, row_stub
from dsh_todo.harness.persistence.jsonl.limits import MAX_VALUE_DEPTH
from dsh_todo.jsonutil import loads

DEEP_CANDIDATE: Final = 2 * MAX_VALUE_DEPTH
"""A line nesting deeper than :data:`MAX_VALUE_DEPTH` has at least this many bytes (an opening and a closing bracket
per level)."""

TURN_BOUNDARIES: Final = frozenset({"turn/start", "turn/end"})
"""The only event types storage reads for itself: a ``turn/start`` opens the turn recovery would close, a ``turn/end``
closes it (:mod:`..repair`); the events of the turn left open are read whatever their types."""

_SAFE_HALF: Final = 1 << 51
_DT_BOUND: Final = 1 << 32
_MAX_MEMBERS: Final = 1 << 20
"""A row's ``time0`` within ±2^51, each ``dt`` within ±2^32 and at most 2^20 of them keep every member's time a
safe integer (2^51 + 2^52 < 2^53); ``seq0`` at most 2^52 keeps every member's seq one."""


class Proven(NamedTuple):
    """A run of lines the exact pass would read without finding anything: ``handed``, what that pass (keeping no
    events) hands over that anyone looks at (:func:`_picked`; a packed row as its one stub event), in seq order, and
    ``passed``, the number of events the run stands for beyond those."""

    lines: int
    handed: list[dict[str, Any]]
    passed: int


@functools.cache
def _decoder(rows: bool, marked: frozenset[str], whole: frozenset[str]) -> tuple[Any, tuple[type[Exception], ...]]:
    """The envelope decoder and the errors it raises, built on first use (once per interest): ``dsh-todo plan`` of a
    log smaller than :data:`~.scan.BULK_MIN` never loads msgspec. ``rows``: packed chunk rows are records (format v0
    alone); ``marked``: the event types whose lines may be parsed (each envelope says whether it is one); ``whole``:
    the types whose lines must hold ``data`` (one a pass leaves out is then a whole envelope: :class:`Interest`)."""
    import msgspec

    number = int | float
    dt = Annotated[list[Annotated[int, msgspec.Meta(ge=-_DT_BOUND, le=_DT_BOUND)]],
                   msgspec.Meta(max_length=_MAX_MEMBERS)]
    members = Annotated[list[str], msgspec.Meta(min_length=1)]

    # defstruct, not class statements: this module's annotations are strings, and these types are local.
    shared = [("turn", number), ("step", number), ("index", number), ("dt", dt)]
    text_data = msgspec.defstruct("TextData", [*shared, ("members", members, msgspec.field(name="texts"))],
                                  forbid_unknown_fields=True, gc=False)
    call_data = msgspec.defstruct("CallData", [*shared, ("id", str), ("members", members, msgspec.field(name="args")),
                                               ("name", str | msgspec.UnsetType, msgspec.UNSET)],
                                  forbid_unknown_fields=True, gc=False)

    seq0 = Annotated[int, msgspec.Meta(ge=0, le=2 * _SAFE_HALF)]
    time0 = Annotated[int, msgspec.Meta(ge=-_SAFE_HALF, le=_SAFE_HALF)]
    row_types = [msgspec.defstruct(f"Row{index}", [("seq", seq0, msgspec.field(name="seq0")), ("time0", time0),
                                             ("data", call_data if tag == "tool-call-chunks" else text_data)],
                              tag_field="type", tag=tag, forbid_unknown_fields=True, gc=False,
                              namespace={"marked": False, "row": True})
            for index, tag in enumerate(sorted(ROW_TYPES) if rows else [])]
    # Format v4 expands and checks ``sourceEventSeqs`` holding a range (a nested list), and refuses one that is no
    # list: proven are only lines whose key (escaped or not, each time it occurs) holds a list without lists, which
    # the exact pass keeps as it is (:func:`~..seq_ranges.expand`).
    plain = list[int | float | str | bool | dict[str, msgspec.Raw] | None]
    seqs = [] if rows else [("sourceEventSeqs", plain | msgspec.UnsetType, msgspec.UNSET)]
    events = [msgspec.defstruct(f"Event{index}", [("seq", int), *([("data", msgspec.Raw)] if tag in whole else []),
                                                  *seqs],
                                tag_field="type", tag=tag, gc=False,
                                namespace={"marked": tag in marked, "row": False, "event_type": tag})
              for index, tag in enumerate(sorted(KNOWN_SESSION_EVENT_TYPES))]
    decoder = msgspec.json.Decoder(functools.reduce(operator.or_, [*row_types, *events]))
    return decoder, (msgspec.DecodeError, msgspec.ValidationError)


_SEQ: Final = operator.attrgetter("seq")
_ROW: Final = operator.attrgetter("row")
_MARK: Final = operator.attrgetter("marked")
_DATA: Final = operator.attrgetter("data")
_MEMBERS: Final = operator.attrgetter("members")
_DT: Final = operator.attrgetter("dt")
_PLUS_ONE: Final = (1).__add__

UTF8_SLICE: Final = 32 << 10
"""The most bytes decoded at once when checking UTF-8: the ``str`` stays well under glibc's mmap threshold (128 KiB
to begin with), so it reuses heap pages. More than three: a slice's end moves back over up to three bytes."""


def prove(lines: list[bytes], texts: Sequence[bytes | memoryview], expected: int, turn_open: bool,
          wanted: Interest, *, rows: bool = True) -> Proven | None:
    """``lines`` (complete, without their newlines) proven clean with seqs from ``expected`` on, or ``None`` (the
    exact pass then reads them). ``texts`` hold every byte of the lines, checked for UTF-8 (a memoryview spares a
    copy). ``turn_open``: a turn is open before them, so lines without a boundary are left to the exact pass.
    ``wanted``: what the caller's fold reads, handed over as :class:`Interest` says. ``rows``: the log's format
    packs chunk rows (v0); in v4 a line tagged like one is left to the exact pass, as is one whose
    ``sourceEventSeqs`` is no list or holds a range."""
    if not lines or not all(map(_utf8, texts)):
        return None
    if max(map(len, lines), default=0) > DEEP_CANDIDATE and any(
            line.count(b"[") + line.count(b"{") > MAX_VALUE_DEPTH for line in lines if len(line) > DEEP_CANDIDATE):
        return None
    decoder, errors = _decoder(rows, wanted.types | TURN_BOUNDARIES,
                               wanted.types if wanted.restarts is not None else frozenset())
    try:
        values = list(map(decoder.decode, lines))
    except errors:
        return None
    total = _events(values, expected)
    if total is None:
        return None
    marked = list(compress(range(len(values)), map(_MARK, values)))
    picked = _picked(values, lines, marked, turn_open, wanted)
    if picked is None:
        return None
    handed: list[dict[str, Any]] = []
    for index in sorted(picked):
        event = picked[index]
        if event is None:
            value = values[index]
            if value.row:
                data = value.data
                event = row_stub(value.seq + len(data.members) - 1, value.time0 + sum(data.dt))
            else:
                event = _value(lines[index], value)
                if event is None:
                    return None
        handed.append(event)
    return Proven(len(lines), handed, total - len(handed))


def _utf8(text: bytes | memoryview) -> bool:
    """Whether ``text`` is UTF-8, decoded in slices of at most :data:`UTF8_SLICE` bytes (one ``str`` per piece cost
    page faults: decision 0015, *Amended*). A slice ends before a byte that starts a character, so no character is
    cut and a malformed one stays malformed within its slice."""
    view = memoryview(text)
    size = len(view)
    start = 0
    try:
        while size - start > UTF8_SLICE:
            end = start + UTF8_SLICE
            # At most three continuation bytes follow a start byte; past them the text is malformed anyway.
            for _ in range(3):
                if view[end] & 0xC0 != 0x80:
                    break
                end -= 1
            str(view[start:end], "utf-8")
            start = end
        str(view[start:], "utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _events(values: list[Any], expected: int) -> int | None:
    """How many events the lines stand for when their seqs continue the log from ``expected`` (a row by its
    members, which its ``dt`` must match), else ``None``; every step runs in C over a few thousand lines."""
    seqs = list(map(_SEQ, values))
    if not seqs or seqs[0] != expected:
        return None
    rows = list(map(_ROW, values))
    data = list(map(_DATA, compress(values, rows)))
    counts = list(map(len, map(_MEMBERS, data)))
    if counts != list(map(_PLUS_ONE, map(len, map(_DT, data)))):
        return None
    steps = list(map(operator.sub, seqs[1:], seqs))
    steps.append(counts[-1] if rows[-1] else 1)
    if list(compress(steps, rows)) != counts:
        return None
    if steps.count(1) != len(steps) - len(counts) + counts.count(1):  # every other line is one event
        return None
    total: int = seqs[-1] + steps[-1] - expected
    return total


def _value(line: bytes, envelope: Any) -> dict[str, Any] | None:
    """The line's value as the exact pass has it (``None`` should ``loads`` see it otherwise than msgspec did)."""
    try:
        event = loads(line)
    except ValueError:
        return None
    if type(event) is not dict or event.get("type") != envelope.event_type or type(event.get("seq")) is not int \
            or event["seq"] != envelope.seq:
        return None
    return event


def _picked(values: list[Any], lines: list[bytes], marked: list[int], turn_open: bool,
            wanted: Interest) -> dict[int, dict[str, Any] | None] | None:
    """The events to hand over, by index, with the values already read (``None``: read them): the ``wanted`` ones
    (from the last that restarts the caller's fold, when it says which do), and the last turn boundary with, when it
    is a ``turn/start``, every event after it (the open turn). ``None`` when no boundary is among them and a turn is
    open before them: the exact pass hands it all over."""
    picked: dict[int, dict[str, Any] | None] = {}
    boundary = next((index for index in reversed(marked) if values[index].event_type in TURN_BOUNDARIES), -1)
    if boundary < 0 and turn_open:
        return None
    types, restarts = wanted
    for index in reversed(marked):
        value = values[index]
        if value.event_type not in types:
            continue
        event = picked[index] = _value(lines[index], value)
        if event is None:
            return None
        if restarts is not None and restarts(event):
            break
    if boundary >= 0:
        picked.setdefault(boundary, None)
        if values[boundary].event_type == "turn/start":
            for index in range(boundary + 1, len(values)):
                picked.setdefault(index, None)
    return picked
