"""Crash-tail rules beyond the fixtures: what is a tail, what is corruption, and which closers a tail needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence import CorruptSessionLogError, interrupted_turn_closers
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.scan import LogScanner
from dsh_todo.harness.persistence.jsonl.writer import batch_plaintext, header_plaintext
from dsh_todo.harness.persistence.jsonl.zstd import compress_frame, scan_frames
from dsh_todo.harness.persistence.repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT
from dsh_todo.jsonutil import dumps_bytes

META = {"id": "s", "createdAt": 1, "cwd": "/w"}


def turn(start_seq: int, number: int, *, end: bool = True) -> list[dict[str, Any]]:
    """A minimal turn: turn/start, step/start, step/end, turn/end (or without the two ends)."""
    events: list[dict[str, Any]] = [
        {"type": "turn/start", "seq": start_seq, "time": 10 * number, "data": {"turn": number}},
        {"type": "step/start", "seq": start_seq + 1, "time": 10 * number, "data": {"turn": number, "step": 1}},
    ]
    if end:
        events += [
            {"type": "step/end", "seq": start_seq + 2, "time": 10 * number + 1, "data": {"turn": number, "step": 1}},
            {"type": "turn/end", "seq": start_seq + 3, "time": 10 * number + 2,
             "data": {"turn": number, "reason": {"kind": "completed"}}},
        ]
    return events


def scan(body: bytes) -> LogScanner:
    scanner = LogScanner(header_plaintext(META))
    scanner.feed(body)
    return scanner


def test_torn_final_line_is_a_tail() -> None:
    body = batch_plaintext(turn(0, 1))
    scanner = scan(body + b'{"type":"turn/st')
    assert len(scanner.events) == 4
    assert scanner.committed_bytes == len(header_plaintext(META)) + len(body)


def test_bad_line_without_later_turn_end_is_a_tail() -> None:
    body = batch_plaintext(turn(0, 1))
    scanner = scan(body + b"garbage\n" + batch_plaintext(turn(4, 2, end=False)))
    assert len(scanner.events) == 4 and not scanner.clean


def test_bad_line_before_a_turn_end_is_corruption() -> None:
    with pytest.raises(CorruptSessionLogError, match=r"^corrupt session log: unparsable committed event at line 5$"):
        scan(batch_plaintext(turn(0, 1)) + b"garbage\n" + batch_plaintext(turn(4, 2)))


def test_seq_gap_before_a_turn_end_is_corruption() -> None:
    events = turn(0, 1) + turn(4, 2)
    del events[5]
    with pytest.raises(CorruptSessionLogError,
                       match=r"^corrupt session log: seq gap in committed region at line 6 \(expected 5, got 6\)$"):
        scan(batch_plaintext(events))


def test_seq_gap_on_the_turn_end_line_itself_is_corruption() -> None:
    events = turn(0, 1)
    events[3] = {**events[3], "seq": 9}
    with pytest.raises(CorruptSessionLogError, match=r"\(expected 3, got 9\)"):
        scan(batch_plaintext(events))


def test_boolean_or_missing_seq_is_a_gap() -> None:
    first = {"type": "turn/start", "seq": True, "time": 1, "data": {"turn": 1}}
    scanner = scan(dumps_bytes(first) + b"\n")
    assert scanner.events == [] and not scanner.clean
    with pytest.raises(CorruptSessionLogError, match=r"got undefined\)$"):
        scan(b'{"type":"turn/end","time":1}\n')


def test_non_object_line_reads_as_missing_seq() -> None:
    with pytest.raises(CorruptSessionLogError, match=r"line 1 \(expected 0, got undefined\)"):
        scan(b"[1,2]\n" + batch_plaintext(turn(0, 1)))


def test_fed_in_pieces_equals_fed_at_once() -> None:
    body = batch_plaintext(turn(0, 1) + turn(4, 2, end=False)) + b'{"type":"x'
    whole = scan(body)
    pieces = LogScanner(header_plaintext(META))
    for start in range(0, len(body), 7):
        pieces.feed(body[start:start + 7])
    assert pieces.events == whole.events
    assert pieces.committed_bytes == whole.committed_bytes


# -- closers ----------------------------------------------------------------------------------------------------


V0: dict[str, Any] = {**META, "version": 0}
V4: dict[str, Any] = {**META, "version": 4}


@pytest.mark.parametrize("meta", [V0, V4], ids=["v0", "v4"])
def test_balanced_or_empty_logs_need_no_closers(meta: dict[str, Any]) -> None:
    assert interrupted_turn_closers([], meta) == []
    assert interrupted_turn_closers(turn(0, 1), meta) == []


@pytest.mark.parametrize("meta", [V0, V4], ids=["v0", "v4"])
def test_open_step_and_turn_are_closed_with_the_last_time(meta: dict[str, Any]) -> None:
    events = turn(0, 1, end=False)
    assert interrupted_turn_closers(events, meta) == [
        {"type": "step/end", "seq": 2, "time": 10, "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "seq": 3, "time": 10, "data": {"turn": 1, "reason": {"kind": "interrupted"}}},
    ]


def _open_calls() -> list[dict[str, Any]]:
    return [
        *turn(0, 1, end=False),
        {"type": "assistant/message", "seq": 2, "time": 11, "data": {"turn": 1, "step": 1, "message": {
            "role": "assistant", "content": [
                {"type": "tool-call", "id": "b", "name": "x", "arguments": "{}"},
                {"type": "text", "text": "hi"},
                {"type": "tool-call", "id": "a", "name": "x", "arguments": "{}"}]}}},
        {"type": "tool/call", "seq": 3, "time": 12, "data": {"turn": 1, "step": 1, "callId": "a"}},
    ]


def test_unstarted_calls_get_not_started_results_in_transcript_order() -> None:
    """Format v0 (DSH 0.1's recovery): a user message wrapping one ``tool-result`` block."""
    closers = interrupted_turn_closers(_open_calls(), V0)
    assert [c["type"] for c in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
    first, second = closers[0], closers[1]
    assert first["data"]["message"]["id"] == "interrupted-tool-result-b-4"
    assert first["data"]["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert first["data"]["message"]["content"][0]["content"][0]["text"] == NOT_STARTED_TEXT
    assert "sourceEventSeqs" not in first
    assert second["sourceEventSeqs"] == [3] and second["seq"] == 5
    assert list(second) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
    assert list(second["data"]["message"]) == ["id", "role", "source", "content"]


def test_a_v4_logs_interrupted_calls_are_answered_with_tool_role_messages() -> None:
    """Format v4 (DSH 0.2's recovery): a tool-role message, keys ``id, role, toolCallId, isError, source, content``."""
    closers = interrupted_turn_closers(_open_calls(), V4)
    assert [dumps_bytes(closer) for closer in closers[:2]] == [dumps_bytes(closer) for closer in [
        {"type": "tool/result", "seq": 4, "time": 12, "data": {"turn": 1, "step": 1, "message": {
            "id": "interrupted-tool-result-b-4", "role": "tool", "toolCallId": "b", "isError": True,
            "source": {"kind": "tool", "callId": "b"}, "content": [{"type": "text", "text": NOT_STARTED_TEXT}]},
            "error": {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}}, "surfaceOp": "append"},
        {"type": "tool/result", "seq": 5, "time": 12, "data": {"turn": 1, "step": 1, "message": {
            "id": "interrupted-tool-result-a-5", "role": "tool", "toolCallId": "a", "isError": True,
            "source": {"kind": "tool", "callId": "a"}, "content": [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT}]},
            "error": {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}}, "surfaceOp": "append",
         "sourceEventSeqs": [3]},
    ]]
    assert [closer["type"] for closer in closers[2:]] == ["step/end", "turn/end"]


@pytest.mark.parametrize("meta", [V0, V4], ids=["v0", "v4"])
def test_answered_calls_and_earlier_turns_need_no_result(meta: dict[str, Any]) -> None:
    events = turn(0, 1) + turn(4, 2, end=False) + [
        {"type": "assistant/message", "seq": 6, "time": 21, "data": {"turn": 2, "step": 1, "message": {
            "content": [{"type": "tool-call", "id": "a"}]}}},
        {"type": "tool/result", "seq": 7, "time": 22, "data": {"turn": 2, "step": 1, "message": {
            "source": {"kind": "tool", "callId": "a"}}}},
    ]
    assert [c["type"] for c in interrupted_turn_closers(events, meta)] == ["step/end", "turn/end"]


# -- zstd -------------------------------------------------------------------------------------------------------


def write_zstd(path: Path, batches: list[list[dict[str, Any]]]) -> bytes:
    path.parent.mkdir(parents=True)
    data = compress_frame(header_plaintext(META)) + b"".join(compress_frame(batch_plaintext(b)) for b in batches)
    path.write_bytes(data)
    return data


def test_frames_have_checksum_and_no_content_size() -> None:
    frame = compress_frame(b'{"a":1}\n')
    assert frame[:4] == b"\x28\xb5\x2f\xfd" and frame[4] == 0x04
    assert scan_frames(frame).frames == [(0, len(frame))]


def test_cut_anywhere_in_the_last_frame_is_a_torn_tail(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "zstd")
    path = store.path_for("s", "/w")
    data = write_zstd(path, [turn(0, 1), turn(4, 2)])
    last_start = scan_frames(data).frames[-1][0]
    checksum_start = len(data) - 4
    for cut in range(last_start + 1, len(data)):
        path.write_bytes(data[:cut])
        stored = store.read_stored("s")
        assert stored.torn is not None and stored.torn.truncate_to == last_start
        # Once the frame's only block is complete (only the checksum is cut), its lines are recovered.
        recovered = 4 if cut >= checksum_start else 0
        assert len(stored.events) == 4 + recovered
        assert stored.torn.recovered == stored.events[4:]


def test_a_bad_line_inside_a_complete_frame_is_corruption(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "zstd")
    path = store.path_for("s", "/w")
    write_zstd(path, [turn(0, 1)])
    with path.open("ab") as file:
        file.write(compress_frame(b"garbage\n"))
    with pytest.raises(CorruptSessionLogError,
                       match=r"^corrupt Zstandard session log: complete frame contains a torn JSONL record$"):
        store.read_stored("s")


def test_bad_magic_and_header_frame_shape_are_corruption(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "zstd")
    path = store.path_for("s", "/w")
    data = write_zstd(path, [turn(0, 1)])
    path.write_bytes(data + b"\x00\x00\x00\x00\x00")
    with pytest.raises(CorruptSessionLogError, match=f"invalid frame magic at byte {len(data)}$"):
        store.read_stored("s")
    path.write_bytes(compress_frame(header_plaintext(META) + b"{}\n"))
    with pytest.raises(CorruptSessionLogError, match="first frame is not exactly one header line"):
        store.read_stored("s")


def test_checksum_failure_names_the_frame_and_libzstd_cause(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "zstd")
    path = store.path_for("s", "/w")
    data = bytearray(write_zstd(path, [turn(0, 1), turn(4, 2)]))
    start, end = scan_frames(bytes(data)).frames[1]
    data[end - 1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSessionLogError) as caught:
        store.load("s")
    assert str(caught.value) == f"corrupt Zstandard session log: frame at byte {start} failed validation"
    assert str(caught.value.__cause__) == "Restored data doesn't match checksum"


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_v4_log_with_a_torn_tail_and_an_open_call_recovers_to_v4_lines(tmp_path: Path, compression: Any) -> None:
    """A v4 log cut mid-line in a turn whose call never finished: the load cuts the torn bytes and appends v4
    closers, byte for byte as DSH 0.2 words them, and a second load finds nothing to do."""
    store = JsonlBackend(tmp_path / "root", compression)
    writer = store.create(dict(META))
    events = _open_calls()
    writer.append(events)
    writer.close()
    path = store.find("s")
    assert path is not None and path.name == ("session.v4.jsonl" if compression == "none" else
                                              "session.v4.jsonl.zstd")
    whole = path.read_bytes()
    torn = b'{"type":"step/end","seq":4,"ti'
    path.write_bytes(whole + (torn if compression == "none" else compress_frame(torn + b'me":1')[:-9]))
    loaded = store.load("s")
    assert loaded.kept == 4 and loaded.truncated_to == len(whole)
    expected = interrupted_turn_closers(events, V4)
    assert [dumps_bytes(closer) for closer in loaded.closers] == [dumps_bytes(closer) for closer in expected]
    assert expected[0]["data"]["message"]["role"] == "tool"
    after = path.read_bytes()
    assert after[:len(whole)] == whole
    appended = after[len(whole):]
    plain = b"".join(dumps_bytes(closer) + b"\n" for closer in expected)
    assert appended == (plain if compression == "none" else compress_frame(plain))
    again = store.load("s")
    assert again.closers == [] and not again.rewrote and path.read_bytes() == after


@pytest.mark.parametrize("size", [1, 3, 7, 9, 64])
def test_a_turn_end_fed_in_pieces_after_a_bad_line_still_proves_it_committed(size: int) -> None:
    """Repro before: after a bad line the scanner skims for a ``turn/end``; when its bytes came in one piece and the
    line's newline in a later one, the line was counted unparsed, and the bad line stayed a tail (a zstd log then
    said "complete frame contains a torn JSONL record" instead)."""
    body = batch_plaintext(turn(0, 1)) + b"garbage\n" + batch_plaintext(turn(4, 2))
    scanner = LogScanner(header_plaintext(META))
    with pytest.raises(CorruptSessionLogError, match=r"^corrupt session log: unparsable committed event at line 5$"):
        for start in range(0, len(body), size):
            scanner.feed(body[start:start + size])
