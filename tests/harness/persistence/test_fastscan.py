"""The streaming fast path of the plan scan: it returns exactly what the full read finds, or ``None``.

``scan_last_of`` must agree with the exact read (event count, last wanted event, header) on every DSH fixture and
on our own logs at any chunk size, fall back on anything unclean, and keep its memory bounded by its chunk size.
Its documented blind spot (JSON validity after a well-formed envelope) is pinned here too, so the docstring stays
true.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence import JsonlBackend
from dsh_todo.harness.persistence.encode import compress_frame
from dsh_todo.harness.persistence.fastscan import scan_last_of
from dsh_todo.harness.persistence.zstd import frame_pieces, scan_frames
from dsh_todo.harness.session import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.jsonutil import dumps_bytes
from dsh_todo.tool_todo.projection import TODOS_UNIT
from tests.harness.persistence.checkpoint_plan import PLAN_EVENT_TYPES, read_plan, read_session
from tests.harness.persistence.fixture_logs import load_fixture

WANTED = sorted(PLAN_EVENT_TYPES)


def full_read(log: Path, compression: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    stored = JsonlBackend(log.parents[2], compression).read_path(log)  # type: ignore[arg-type]
    return stored.events, stored.meta


def assert_agrees(log: Path, compression: str, **options: Any) -> None:
    events, meta = full_read(log, compression)
    scan = scan_last_of(log, compression, WANTED, **options)  # type: ignore[arg-type]
    assert scan is not None
    assert (scan.first_seq, scan.end_seq) == (0, len(events))
    assert scan.meta == meta
    wanted = [event for event in events if event["type"] in PLAN_EVENT_TYPES]
    assert scan.last == (wanted[-1] if wanted else None)


def make_log(tmp_path: Path, compression: str, turns: int = 40, *, batch: int = 7) -> Path:
    """A log written by the real writer: turns with steps, packed delta rows, tool calls and todo/writes."""
    store = JsonlBackend(tmp_path / "root", compression)  # type: ignore[arg-type]
    writer = store.create({"id": "s", "createdAt": 1_700_000_000_000, "cwd": "/w"})
    events: list[dict[str, Any]] = []

    def add(kind: str, data: Any, **extra: Any) -> None:
        events.append({"type": kind, "seq": len(events), "time": 1_700_000_000_000 + len(events), "data": data,
                       **extra})

    for number in range(1, turns + 1):
        add("turn/start", {"turn": number})
        add("user/message", {"turn": number, "message": {"role": "user", "content": "go, ünïcode \n ok"}},
            surfaceOp="append")
        for step in (1, 2):
            add("step/start", {"turn": number, "step": step})
            for k in range(2 + number % 5):
                add("assistant/chunk", {"turn": number, "step": step,
                                        "chunk": {"type": "text-delta", "index": 0, "text": f"w{k}, \"q\" "}})
            add("tool/call", {"turn": number, "step": step, "callId": f"c{number}{step}", "name": "todo_write"})
            if (number + step) % 3:
                add("todo/write", {"todos": [{"content": f"task {number}.{step}", "status": "in_progress"}]})
            add("step/end", {"turn": number, "step": step})
        if number % 4:
            add("turn/end", {"turn": number, "reason": {"kind": "completed"}})
    for start in range(0, len(events), batch):
        writer.append(events[start:start + batch])
    writer.close()
    return store.path_for("s", "/w")


@pytest.fixture(params=["none", "zstd"])
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- agreement ------------------------------------------------------------------------------------------------


def test_agrees_with_the_full_read_on_every_fixture(fixture_name: str) -> None:
    fixture = load_fixture(fixture_name)
    try:
        events, meta = full_read(fixture.log_file.resolve(), fixture.compression)
    except Exception:
        assert scan_last_of(fixture.log_file, fixture.compression, WANTED) is None  # type: ignore[arg-type]
        return
    scan = scan_last_of(fixture.log_file, fixture.compression, WANTED)  # type: ignore[arg-type]
    if not fixture.name.startswith("damaged/"):
        assert scan is not None, "every intact DSH log takes the fast path"
    if scan is not None:
        assert scan.end_seq == len(events)
        assert scan.meta == meta
        wanted = [event for event in events if event["type"] in PLAN_EVENT_TYPES]
        assert scan.last == (wanted[-1] if wanted else None)


@pytest.mark.parametrize("chunk_size", [1, 7, 100, 4096, 1 << 22])
def test_agrees_at_any_chunk_size(tmp_path: Path, compression: str, chunk_size: int) -> None:
    log = make_log(tmp_path, compression)
    assert_agrees(log, compression, chunk_size=chunk_size)


def test_one_big_frame_and_many_small_ones(tmp_path: Path, compression: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert_agrees(make_log(tmp_path / "a", compression, batch=100_000), compression, chunk_size=333)
    assert_agrees(make_log(tmp_path / "b", compression, batch=1), compression, chunk_size=333)


def test_tail_scan_from_a_record_boundary(tmp_path: Path, compression: str) -> None:
    log = make_log(tmp_path, compression)
    events, _ = full_read(log, compression)
    data = log.read_bytes()
    if compression == "none":
        offset = data.index(b"\n", len(data) // 2) + 1
    else:
        offset = scan_frames(data).frames[len(scan_frames(data).frames) // 2][0]
    scan = scan_last_of(log, compression, WANTED, offset=offset)  # type: ignore[arg-type]
    assert scan is not None and scan.meta is None
    assert 0 < scan.first_seq < scan.end_seq == len(events)
    wanted = [event for event in events if event["type"] in PLAN_EVENT_TYPES]
    assert scan.last == wanted[-1]
    assert scan_last_of(log, compression, WANTED, offset=offset + 1) is None  # type: ignore[arg-type]
    assert scan_last_of(log, compression, WANTED, offset=len(data) + 1) is None  # type: ignore[arg-type]


def test_a_tail_scan_from_the_checkpoints_event_starts_at_its_line(tmp_path: Path) -> None:
    """Under zstd a checkpoint's record is a whole write batch; with the checkpoint's event the scan starts at that
    event's line, and reads the whole record when the event is a packed row's member (no line of its own)."""
    log = make_log(tmp_path, "zstd", batch=100_000)  # one frame after the header: the whole log
    events, _ = full_read(log, "zstd")
    offset = scan_frames(log.read_bytes()).frames[1][0]
    wanted = [event for event in events if event["type"] in PLAN_EVENT_TYPES]
    turn_end = [event["seq"] for event in events if event["type"] == "turn/end"][-3]
    scan = scan_last_of(log, "zstd", WANTED, offset=offset, from_seq=turn_end)
    assert scan is not None and (scan.first_seq, scan.end_seq, scan.last) == (turn_end, len(events), wanted[-1])
    plaintext = b"".join(frame_pieces(log.read_bytes()[offset:], 1 << 20))
    at = plaintext.rindex(b'"seq0":') + len(b'"seq0":')
    member = int(plaintext[at:plaintext.index(b",", at)]) + 1  # the second event of the last packed row
    scan = scan_last_of(log, "zstd", WANTED, offset=offset, from_seq=member)
    assert scan is not None and (scan.first_seq, scan.end_seq, scan.last) == (0, len(events), wanted[-1])
    scan = scan_last_of(log, "zstd", WANTED, offset=offset, from_seq=len(events) + 5)  # never there: in full
    assert scan is not None and scan.first_seq == 0


def test_plan_types_decide_the_fold_alone() -> None:
    """The fast path's premise: todos reacts to these types only, and each sets the state whatever it was."""
    states: list[Any] = [None, [], [{"content": "x", "status": "pending"}]]
    for kind in sorted(KNOWN_SESSION_EVENT_TYPES):
        event = {"type": kind, "seq": 0, "time": 0, "data": {"todos": [], "turn": 1}}
        results = [TODOS_UNIT.apply(state, event) for state in states]
        if kind in PLAN_EVENT_TYPES:
            assert all(result == results[0] for result in results)
        else:
            assert all(result is state for result, state in zip(results, states, strict=True))


# -- falling back ---------------------------------------------------------------------------------------------


HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}\n'


def event_line(seq: int, kind: str = "step/start", **extra: Any) -> bytes:
    return dumps_bytes({"type": kind, "seq": seq, "time": 5, "data": {"turn": 1, "step": 1}, **extra}) + b"\n"


def raw_log(tmp_path: Path, *lines: bytes) -> Path:
    path = tmp_path / "root" / "--w--" / "s" / "session.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(HEADER + b"".join(lines))
    return path


GOOD = [event_line(0, "turn/start"), event_line(1), event_line(2)]
ROW = (b'{"type":"text-chunks","seq0":3,"time0":9,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],'
       b'"texts":["a","b","c"]}}\n')


@pytest.mark.parametrize("lines", [
    pytest.param([*GOOD, event_line(4)], id="seq-gap"),
    pytest.param([*GOOD[:2], b"garbage\n", GOOD[2]], id="garbage-line"),
    pytest.param([*GOOD, event_line(3, "future/type")], id="unknown-type"),
    pytest.param([*GOOD, event_line(3, "future/type", ignorable=True)], id="unknown-ignorable-type"),
    pytest.param([*GOOD, b'{"seq":3,"type":"step/end","time":5,"data":{}}\n'], id="key-order"),
    pytest.param([*GOOD, b'{"type":"step/end","seq":03,"time":5,"data":{}}\n'], id="leading-zero"),
    pytest.param([*GOOD, b'{"type":"step/end","seq":3.0,"time":5,"data":{}}\n'], id="float-seq"),
    pytest.param([*GOOD, b'{"type":"step/end","seq0":3,"time0":5,"data":{}}\n'], id="seq0-on-an-event"),
    pytest.param([*GOOD, b'{"type":"text-chunks","seq":3,"time":5,"data":{}}\n'], id="seq-on-a-row"),
    pytest.param([*GOOD, ROW.replace(b'"dt":[1,2]', b'"dt":[]')], id="one-member-row"),
    pytest.param([*GOOD, ROW.replace(b'"index":0,', b"")], id="row-envelope"),
    pytest.param([*GOOD, ROW.replace(b'"seq0":3', b'"seq0":4')], id="row-gap"),
    pytest.param([*GOOD, b'{"type":"todo/write","seq":3,"time":5,"data":{"todos":[}}\n'], id="wanted-line-broken"),
])
def test_unclean_logs_fall_back(tmp_path: Path, lines: list[bytes]) -> None:
    log = raw_log(tmp_path, *lines)
    assert scan_last_of(log, "none", WANTED) is None
    try:
        full = read_session(log)
    except Exception as exc:
        with pytest.raises(type(exc)) as cold:
            read_plan(log)
        assert str(cold.value) == str(exc)
    else:
        view = read_plan(log)
        assert (view.plan, view.source) == (full.plan, "full")


def test_rows_count_their_members(tmp_path: Path) -> None:
    log = raw_log(tmp_path, *GOOD, ROW, event_line(6, "todo/write"))
    scan = scan_last_of(log, "none", WANTED)
    assert scan is not None and scan.end_seq == 7 and scan.last is not None and scan.last["seq"] == 6


def test_torn_raw_tail_is_what_the_full_read_ignores(tmp_path: Path) -> None:
    log = raw_log(tmp_path, *GOOD, event_line(3, "todo/write")[:-9])
    scan = scan_last_of(log, "none", WANTED)
    assert scan is not None and scan.torn and scan.end_seq == 3
    assert scan.last is not None and scan.last["type"] == "turn/start"
    assert read_plan(log).plan == read_session(log).plan


def zstd_log(tmp_path: Path, *frames: bytes) -> Path:
    path = tmp_path / "root" / "--w--" / "s" / "session.jsonl.zstd"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(compress_frame(HEADER) + b"".join(compress_frame(frame) for frame in frames))
    return path


def test_zstd_damage_falls_back(tmp_path: Path) -> None:
    good = zstd_log(tmp_path, b"".join(GOOD))
    assert scan_last_of(good, "zstd", WANTED) is not None
    data = good.read_bytes()
    good.write_bytes(data[:-3])  # a torn last frame: the exact read recovers what its blocks decode
    assert scan_last_of(good, "zstd", WANTED) is None
    good.write_bytes(data[:-5] + bytes([data[-5] ^ 1]) + data[-4:])  # a bad checksum
    assert scan_last_of(good, "zstd", WANTED) is None
    split = zstd_log(tmp_path, GOOD[0] + GOOD[1][:10], GOOD[1][10:] + GOOD[2])  # a line across two frames
    assert scan_last_of(split, "zstd", WANTED) is not None
    inside = zstd_log(tmp_path, GOOD[0] + GOOD[1][:10])  # complete frames end inside a line
    assert scan_last_of(inside, "zstd", WANTED) is None


def test_known_blind_spot_json_after_the_envelope(tmp_path: Path) -> None:
    """Documented: a broken payload behind a well-formed envelope is not seen by the fast path (the exact read
    flags it). Logs written by a JSON encoder never contain one; a hand-edited log may."""
    log = raw_log(tmp_path, *GOOD, b'{"type":"step/end","seq":3,"time":5,"data":{]}\n')
    scan = scan_last_of(log, "none", WANTED)
    assert scan is not None and scan.end_seq == 4
    assert len(full_read(log, "none")[0]) == 3  # the exact read treats it as an unparsable tail


# -- memory ---------------------------------------------------------------------------------------------------


def test_memory_is_bounded_by_the_chunk(tmp_path: Path, compression: str) -> None:
    log = make_log(tmp_path, compression, turns=600, batch=50)
    plaintext = len(b"".join(dumps_bytes(event) for event in full_read(log, compression)[0]))
    chunk = 64 << 10
    tracemalloc.start()
    try:
        scan = scan_last_of(log, compression, WANTED, chunk_size=chunk)  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert scan is not None
    assert plaintext > 20 * chunk
    assert peak < 12 * chunk, f"peak {peak} bytes for a {plaintext}-byte log"
