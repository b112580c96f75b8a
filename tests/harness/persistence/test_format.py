"""Line format: header and event bytes, packed chunk rows, and byte-for-byte re-encoding of DSH's own logs."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness.persistence import CorruptSessionLogError, SessionFormatUnsupportedError
from dsh_todo.harness.persistence.header import check_meta, decode_header, parse_header_record
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.chunk_rows import MalformedRowError, expand_row, pack_chunk_runs
from dsh_todo.harness.persistence.jsonl.scan import LogScanner
from dsh_todo.harness.persistence.jsonl.writer import batch_plaintext, header_plaintext
from dsh_todo.harness.persistence.jsonl.zstd import compress_frame, scan_frames
from dsh_todo.jscompat import js_text
from dsh_todo.jsonutil import dumps, dumps_bytes, loads
from tests.harness.persistence.fixture_logs import load_fixture, zstd_batch_sizes

# -- header ---------------------------------------------------------------------------------------------------


def test_header_line_bytes_match_every_fixture(intact_name: str) -> None:
    fixture = load_fixture(intact_name)
    header = fixture.expected["header"]
    assert header["version"] == 0  # DSH 0.1.1's logs: the header of a v0 session is written byte for byte
    meta = {key: value for key, value in header.items() if key != "type"}
    assert header_plaintext(meta) == (fixture.expected["headerLine"] + "\n").encode("utf-8")


def test_header_key_order_with_every_optional_field() -> None:
    """v0 (DSH 0.1): ``seedLength`` before ``origin``; v4 (DSH 0.2, the default): ``isSeeded`` there, always
    written, and no ``seedLength``."""
    meta = {"agentPreset": "coder", "delegationDepth": 2, "origin": "subagent", "seedLength": 5,
            "parentSession": "p", "cwd": "/w", "createdAt": 7, "id": "s"}
    assert header_plaintext({**meta, "version": 0}) == (
        b'{"type":"session","version":0,"id":"s","createdAt":7,"cwd":"/w","parentSession":"p","seedLength":5,'
        b'"origin":"subagent","delegationDepth":2,"agentPreset":"coder"}\n')
    assert header_plaintext({"id": "s", "createdAt": 7, "version": 0}) == (
        b'{"type":"session","version":0,"id":"s","createdAt":7,"delegationDepth":0}\n')
    assert header_plaintext({**meta, "isSeeded": True}) == (
        b'{"type":"session","version":4,"id":"s","createdAt":7,"cwd":"/w","parentSession":"p","isSeeded":true,'
        b'"origin":"subagent","delegationDepth":2,"agentPreset":"coder"}\n')
    assert header_plaintext({"id": "s", "createdAt": 7}) == (
        b'{"type":"session","version":4,"id":"s","createdAt":7,"isSeeded":false,"delegationDepth":0}\n')


def test_header_writes_non_ascii_raw() -> None:
    assert "é".encode() in header_plaintext({"id": "é", "createdAt": 1})


def test_decode_header_round_trips_metadata() -> None:
    line = {"type": "session", "version": 0, "id": "s", "createdAt": 7, "cwd": "/w", "delegationDepth": 0}
    assert decode_header(line) == {"version": 0, "id": "s", "createdAt": 7, "cwd": "/w", "delegationDepth": 0}
    line = {"type": "session", "version": 4, "id": "s", "createdAt": 7, "cwd": "/w", "isSeeded": True,
            "delegationDepth": 0}
    assert decode_header(line) == {"version": 4, "id": "s", "createdAt": 7, "cwd": "/w", "isSeeded": True,
                                   "delegationDepth": 0}
    assert header_plaintext(decode_header(line)) == dumps_bytes(line) + b"\n"


@pytest.mark.parametrize(("version", "message"), [
    (5, 'session "s" uses log format v5, but this harness reads only v4: the log was written by a newer harness — '
        "upgrade the harness to open it"),
    (1, 'session "s" uses log format v1, older than the supported v4, and this build ships no upgrade path for it'),
    (3, 'session "s" uses log format v3, older than the supported v4, and this build ships no upgrade path for it'),
    (-1, 'session "s" uses log format v-1, older than the supported v4, and this build ships no upgrade path for it'),
])
def test_other_versions_are_refused_before_structure(version: int, message: str) -> None:
    # No createdAt or delegationDepth: the version refusal must win over "not a session header".
    with pytest.raises(SessionFormatUnsupportedError) as caught:
        decode_header({"type": "session", "version": version, "id": "s"})
    assert str(caught.value) == message


@pytest.mark.parametrize("line", [
    {"type": "session", "version": 0, "id": "s", "createdAt": 1},  # delegationDepth is required on disk
    {"type": "session", "version": 0, "id": "s", "createdAt": -1, "delegationDepth": 0},
    {"type": "session", "version": 0, "id": "s", "createdAt": 1.5, "delegationDepth": 0},
    {"type": "session", "version": 0, "id": 5, "createdAt": 1, "delegationDepth": 0},
    {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0, "origin": "other"},
    {"type": "event", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0},
    {"type": "session", "version": 4, "id": "s", "createdAt": 1, "delegationDepth": 0},  # v4 requires isSeeded
    {"type": "session", "version": 4, "id": "s", "createdAt": 1, "isSeeded": 0, "delegationDepth": 0},
    ["session"],
])
def test_malformed_headers_are_corrupt(line: Any) -> None:
    with pytest.raises(CorruptSessionLogError, match="first line is not a session header"):
        decode_header(line)


@pytest.mark.parametrize("key", ["sandboxMode", "approvalPolicy"])
def test_retired_policy_fields_are_refused(key: str) -> None:
    line = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0, key: "x"}
    with pytest.raises(CorruptSessionLogError, match="retired policy baseline fields"):
        decode_header(line)
    with pytest.raises(ValueError, match="retired policy baseline fields"):
        check_meta({"id": "s", "createdAt": 1, key: "x"})


def test_header_record_must_be_one_json_line() -> None:
    with pytest.raises(CorruptSessionLogError, match="empty or header-less session log"):
        parse_header_record(b"")
    with pytest.raises(CorruptSessionLogError, match="header line is not valid JSON"):
        parse_header_record(b"{nope\n")


# -- packed chunk rows ----------------------------------------------------------------------------------------


def _text(seq: int, time: int, text: str, *, index: int = 0, kind: str = "text-delta") -> dict[str, Any]:
    return {"type": "assistant/chunk", "seq": seq, "time": time,
            "data": {"turn": 1, "step": 1, "chunk": {"type": kind, "index": index, "text": text}}}


def _call(seq: int, time: int, part: str, *, name: str | None = None, call_id: str = "c1") -> dict[str, Any]:
    chunk: dict[str, Any] = {"type": "tool-call-delta", "index": 2, "id": call_id}
    if name is not None:
        chunk["name"] = name
    chunk["argumentsDelta"] = part
    return {"type": "assistant/chunk", "seq": seq, "time": time, "data": {"turn": 1, "step": 1, "chunk": chunk}}


def test_three_deltas_pack_into_one_row_and_expand_back() -> None:
    events = [_text(5, 100, "a"), _text(6, 100, "b"), _text(7, 103, "c")]
    [row] = pack_chunk_runs(events)
    assert dumps(row) == ('{"type":"text-chunks","seq0":5,"time0":100,"data":{"turn":1,"step":1,"index":0,'
                          '"dt":[0,3],"texts":["a","b","c"]}}')
    assert dumps(expand_row(row)) == dumps(events)


def test_two_deltas_stay_verbatim() -> None:
    events = [_text(0, 1, "a"), _text(1, 1, "b")]
    assert pack_chunk_runs(events) == events


def test_runs_break_on_block_kind_and_gaps() -> None:
    events = [_text(0, 1, "a"), _text(1, 1, "b"), _text(2, 1, "c", index=1), _text(3, 1, "d", index=1),
              _text(4, 1, "e", index=1), _text(5, 1, "r", kind="reasoning-delta")]
    records = pack_chunk_runs(events)
    assert [r["type"] for r in records] == ["assistant/chunk", "assistant/chunk", "text-chunks", "assistant/chunk"]


def test_tool_call_rows_pack_only_uniform_name_runs() -> None:
    events = [_call(0, 1, '{"a"', name="bash"), _call(1, 1, ":1"), _call(2, 2, ",2"), _call(3, 2, "}")]
    records = pack_chunk_runs(events)
    assert records[0] is events[0]  # the named first delta stays its own line
    assert dumps(records[1]) == ('{"type":"tool-call-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,'
                                 '"index":2,"dt":[1,0],"id":"c1","args":[":1",",2","}"]}}')
    assert dumps([e for r in records[1:] for e in expand_row(r)]) == dumps(events[1:])
    named = [_call(0, 1, "x", name="n"), _call(1, 1, "y", name="n"), _call(2, 1, "z", name="n")]
    [row] = pack_chunk_runs(named)
    assert list(row["data"]) == ["turn", "step", "index", "dt", "id", "name", "args"]
    assert dumps(expand_row(row)) == dumps(named)
    mixed_ids = [_call(0, 1, "x"), _call(1, 1, "y", call_id="c2"), _call(2, 1, "z")]
    assert pack_chunk_runs(mixed_ids) == mixed_ids


def test_unrecognised_shapes_are_never_packed() -> None:
    extra = [{**_text(i, 1, "x"), "ignorable": True} for i in range(3)]
    assert pack_chunk_runs(extra) == extra
    fractional = [_text(0, 1, "a"), {**_text(1, 1, "b"), "time": 1.5}, _text(2, 2, "c")]
    assert pack_chunk_runs(fractional) == fractional


@pytest.mark.parametrize("damage", [
    lambda row: row.pop("time0"),
    lambda row: row["data"].pop("dt"),
    lambda row: row["data"].__setitem__("dt", [0]),
    lambda row: row["data"].__setitem__("dt", [0, True]),
    lambda row: row["data"].__setitem__("texts", []),
    lambda row: row["data"].__setitem__("texts", ["a", 1, "c"]),
    lambda row: row.__setitem__("seq0", -1),
    lambda row: row["data"].__setitem__("extra", 1),
])
def test_malformed_rows_are_refused(damage: Any) -> None:
    row = loads(dumps(pack_chunk_runs([_text(0, 1, "a"), _text(1, 1, "b"), _text(2, 1, "c")])[0]))
    damage(row)
    with pytest.raises(MalformedRowError):
        expand_row(row)


def test_a_malformed_row_line_counts_as_unparsable() -> None:
    scanner = LogScanner(header_plaintext({"id": "s", "createdAt": 1, "version": 0}))
    with pytest.raises(CorruptSessionLogError, match=r"unparsable committed event at line 1$"):
        scanner.feed(b'{"type":"text-chunks","seq0":0,"time0":1,"data":{}}\n'
                     b'{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}\n')


def test_a_v4_log_packs_no_rows_so_a_row_line_is_an_event_like_any_other() -> None:
    """Format v4 never packs chunk rows: a line tagged ``text-chunks`` is no row there, and without a ``seq`` it is
    a gap; with one it is an event (of a type no harness knows, which a load refuses)."""
    scanner = LogScanner(header_plaintext({"id": "s", "createdAt": 1}))
    with pytest.raises(CorruptSessionLogError) as caught:
        scanner.feed(b'{"type":"text-chunks","seq0":0,"time0":1,"data":{}}\n'
                     b'{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}\n')
    assert str(caught.value) == ("corrupt session log: seq gap in committed region at line 1 (expected 0, got "
                                 "undefined)")
    scanner = LogScanner(header_plaintext({"id": "s", "createdAt": 1}))
    scanner.feed(b'{"type":"text-chunks","seq":0,"time":1,"data":{"dt":[0,0],"texts":["a","b","c"]}}\n')
    assert scanner.events == [{"type": "text-chunks", "seq": 0, "time": 1, "data": {"dt": [0, 0],
                                                                                   "texts": ["a", "b", "c"]}}]


def test_a_v4_batch_stores_seq_runs_as_ranges_and_the_reader_expands_them() -> None:
    """v4's ``sourceEventSeqs``: a run of three or more is one ``[start,end]`` pair on disk (two stay two), and the
    reader gives back the list; a v0 batch stores the list as it is."""
    events = [{"type": "step/start", "seq": seq, "time": 1, "data": {"turn": 1, "step": 1}} for seq in range(9)]
    events.append({"type": "tool/result", "seq": 9, "time": 2, "data": {"turn": 1},
                   "sourceEventSeqs": [0, 1, 2, 3, 5, 6, 8], "surfaceOp": "append"})
    events.append({"type": "tool/result", "seq": 10, "time": 2, "data": {"turn": 1}, "sourceEventSeqs": [9]})
    stored = batch_plaintext(events, pack_chunks=False, ranges=True).split(b"\n")
    assert stored[9] == (b'{"type":"tool/result","seq":9,"time":2,"data":{"turn":1},"sourceEventSeqs":[[0,3],5,6,8],'
                         b'"surfaceOp":"append"}')
    assert stored[10] == b'{"type":"tool/result","seq":10,"time":2,"data":{"turn":1},"sourceEventSeqs":[9]}'
    assert batch_plaintext(events).split(b"\n")[9] == dumps_bytes(events[9])
    scanner = LogScanner(header_plaintext({"id": "s", "createdAt": 1}))
    scanner.feed(b"\n".join(stored))
    assert dumps(scanner.events) == dumps(events)


@pytest.mark.parametrize(("stored", "reason"), [
    (b'"x"', "sourceEventSeqs must be an array"),
    (b"[[2,0]]", "sourceEventSeqs range exceeds its event seq"),
    (b"[[0,5]]", "sourceEventSeqs range exceeds its event seq"),
    (b"[[0,1,2]]", "sourceEventSeqs range must be a [start, end] pair"),
    (b"[[-1,2]]", "sourceEventSeqs range bounds must be non-negative safe integers"),
    (b'[[0,2],"x"]', "sourceEventSeqs member must be a non-negative safe integer"),
    (b"[1,[0,2]]", "sourceEventSeqs ranges must contain unique earlier seqs"),
    (b"[3,[0,2]]", "sourceEventSeqs ranges must be strictly increasing"),
])
def test_a_bad_v4_range_is_a_corrupt_committed_event(stored: bytes, reason: str) -> None:
    """The reasons DSH 0.2 gives for a stored ``sourceEventSeqs`` it cannot expand, at the line that holds it."""
    lines = [b'{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1}}' % seq for seq in range(5)]
    lines.append(b'{"type":"tool/result","seq":5,"time":1,"data":{},"sourceEventSeqs":' + stored + b"}")
    lines.append(b'{"type":"turn/end","seq":6,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}')
    scanner = LogScanner(header_plaintext({"id": "s", "createdAt": 1}))
    with pytest.raises(CorruptSessionLogError) as caught:
        scanner.feed(b"\n".join(lines) + b"\n")
    assert str(caught.value) == f"corrupt session log: invalid committed event at line 6: {reason}"


def test_a_value_printed_in_a_refusal_may_nest_as_deep_as_a_line() -> None:
    """``String(value)`` of an array walks it without recursion. Repro before: a v4 log line whose ``type`` was an
    array 511 deep (within the reader's bound) ended the read in ``RecursionError`` while the refusal printed it."""
    deep: list[Any] = []
    for _ in range(2000):
        deep = [deep, None, 1]
    assert js_text(deep) == ",,1" * 2000
    assert [js_text(value) for value in ([], [[], []], [1, [2, 3]], [[1], []], [None, "a", True, 1.5, {"x": 1}],
                                         [[[None]], [None, None]])] == [
        "", ",", "1,2,3", "1,", ",a,true,1.5,[object Object]", ",,"]


# -- re-encoding DSH's own logs -------------------------------------------------------------------------------


def test_reencoding_raw_fixture_reproduces_its_lines(raw_intact_name: str) -> None:
    """Packing all events as one batch reproduces every line: no fixture run was split by a batch boundary."""
    fixture = load_fixture(raw_intact_name)
    store = JsonlBackend(fixture.folder / "store", "none")
    stored = store.read(fixture.session_id)
    raw = fixture.log_file.read_bytes()
    assert header_plaintext(stored.meta) + batch_plaintext(stored.events) == raw


def test_reencoding_zstd_fixture_reproduces_every_frame(zstd_intact_name: str) -> None:
    """One frame per DSH write batch: re-packing each batch and compressing it gives DSH's exact bytes."""
    fixture = load_fixture(zstd_intact_name)
    stored = JsonlBackend(fixture.folder / "store", "zstd").read(fixture.session_id)
    raw = fixture.log_file.read_bytes()
    frames = scan_frames(raw).frames
    assert [[start, end] for start, end in frames] == [
        [frame["start"], frame["end"]] for frame in fixture.expected["physical"]["frames"]]
    rebuilt = [compress_frame(header_plaintext(stored.meta))]
    position = 0
    for count in zstd_batch_sizes(raw):
        rebuilt.append(compress_frame(batch_plaintext(stored.events[position:position + count])))
        position += count
    assert position == len(stored.events)
    assert b"".join(rebuilt) == raw


def test_event_lines_keep_envelope_key_order() -> None:
    event = {"type": "tool/result", "seq": 3, "time": 9, "data": {"x": 1}, "sourceEventSeqs": [1],
             "surfaceOp": "append"}
    assert batch_plaintext([event]) == dumps_bytes(event) + b"\n"
    assert batch_plaintext([event]).startswith(b'{"type":"tool/result","seq":3,"time":9,"data":')
