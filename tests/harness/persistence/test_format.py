"""Line format: header and event bytes, packed chunk rows, and byte-for-byte re-encoding of DSH's own logs."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness.persistence import CorruptSessionLogError, SessionFormatUnsupportedError
from dsh_todo.harness.persistence.header import check_meta, decode_header, parse_header_record
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.chunk_rows import MalformedRowError, expand_row, pack_chunk_runs
from dsh_todo.harness.persistence.jsonl.encode import batch_plaintext, header_plaintext
from dsh_todo.harness.persistence.jsonl.scan import LogScanner
from dsh_todo.harness.persistence.jsonl.zstd import compress_frame, scan_frames
from dsh_todo.jsonutil import dumps, dumps_bytes, loads
from tests.harness.persistence.fixture_logs import load_fixture, zstd_batch_sizes

# -- header ---------------------------------------------------------------------------------------------------


def test_header_line_bytes_match_every_fixture(intact_name: str) -> None:
    fixture = load_fixture(intact_name)
    header = fixture.expected["header"]
    meta = {key: value for key, value in header.items() if key not in ("type", "version")}
    assert header_plaintext(meta) == (fixture.expected["headerLine"] + "\n").encode("utf-8")


def test_header_key_order_with_every_optional_field() -> None:
    meta = {"agentPreset": "coder", "delegationDepth": 2, "origin": "subagent", "seedLength": 5,
            "parentSession": "p", "cwd": "/w", "createdAt": 7, "id": "s"}
    assert header_plaintext(meta) == (
        b'{"type":"session","version":0,"id":"s","createdAt":7,"cwd":"/w","parentSession":"p","seedLength":5,'
        b'"origin":"subagent","delegationDepth":2,"agentPreset":"coder"}\n')
    assert header_plaintext({"id": "s", "createdAt": 7}) == (
        b'{"type":"session","version":0,"id":"s","createdAt":7,"delegationDepth":0}\n')


def test_header_writes_non_ascii_raw() -> None:
    assert "é".encode() in header_plaintext({"id": "é", "createdAt": 1})


def test_decode_header_round_trips_metadata() -> None:
    line = {"type": "session", "version": 0, "id": "s", "createdAt": 7, "cwd": "/w", "delegationDepth": 0}
    assert decode_header(line) == {"version": 0, "id": "s", "createdAt": 7, "cwd": "/w", "delegationDepth": 0}


@pytest.mark.parametrize(("version", "message"), [
    (1, 'session "s" uses log format v1, but this harness reads only v0: the log was written by a newer harness — '
        "upgrade the harness to open it"),
    (-1, 'session "s" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it'),
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
    scanner = LogScanner(header_plaintext({"id": "s", "createdAt": 1}))
    with pytest.raises(CorruptSessionLogError, match=r"unparsable committed event at line 1$"):
        scanner.feed(b'{"type":"text-chunks","seq0":0,"time0":1,"data":{}}\n'
                     b'{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}\n')


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
