"""Projection checkpoints beside the log: written only for durable events, read back to exactly the full read's plan.

Every cold read here is compared with the exact full read (``read_session(...).plan`` and its event count), for
usable checkpoints and for every kind of unusable one: stale, version-mismatched, leading the log, a wrong offset,
another session's identity, a bad value, a damaged file.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Agent, Context
from dsh_todo.harness.loader import resolve
from dsh_todo.harness.persistence import SessionFormatUnsupportedError, checkpoints
from dsh_todo.harness.persistence.jsonl.checkpoint import (
    CHECKPOINT_NAME,
    Checkpoint,
    prefix_digest,
    read_checkpoint,
    write_checkpoint,
)
from dsh_todo.harness.persistence.jsonl.zstd import scan_frames
from dsh_todo.harness.projections import ProjectionRegistry
from dsh_todo.harness.session import Session
from dsh_todo.standard import composition, open_runtime
from dsh_todo.tool_todo.projection import TODOS_UNIT
from tests.conftest import DiskSyncs
from tests.harness.persistence.checkpoint_plan import read_plan, read_session
from tests.harness.persistence.fixture_logs import copy_store, load_fixture

COMPRESSIONS = ["none", "zstd"]


def todo_write(ctx: Context, session: Session, *items: tuple[str, str]) -> None:
    todos = [{"content": content, "status": status} for content, status in items]
    asyncio.run(ctx.tools.execute("todo_write", {"todos": todos}, agent=Agent("a", session)))


def turn(ctx: Context, session: Session, number: int, *items: tuple[str, str], end: bool = True) -> None:
    session.append("turn/start", {"turn": number})
    session.append("step/start", {"turn": number, "step": 1})
    for index in range(4):  # a packable run of deltas, so rows appear in the log
        session.append("assistant/chunk", {"turn": number, "step": 1,
                                           "chunk": {"type": "text-delta", "index": 0, "text": f"w{index} "}})
    if items:
        todo_write(ctx, session, *items)
    session.append("step/end", {"turn": number, "step": 1})
    if end:
        session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})


def the_log(root: Path, session_id: str = "s") -> Path:
    return next(root.glob(f"*/{session_id}/session*.jsonl*"))


def stored_checkpoint(log: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((log.parent / CHECKPOINT_NAME).read_text())
    return loaded


def assert_same_as_full(log: Path, source: str | None = None) -> None:
    """The cold plan read equals the exact full read, plan and position."""
    full = read_session(log)
    view = read_plan(log)
    assert view.plan == full.plan
    assert view.as_of_seq == len(full.events) - full.closers - 1
    assert view.meta == full.meta
    if source is not None:
        assert view.source == source


@pytest.fixture(params=COMPRESSIONS)
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def runtime(tmp_path: Path, compression: str) -> Iterator[Context]:
    ctx = open_runtime(tmp_path / "root", compression=compression, batch_delay_ms=60_000)
    yield ctx
    ctx.dispose()


# -- the plugin -----------------------------------------------------------------------------------------------


def test_plugin_shape_and_composition() -> None:
    assert checkpoints.name == "@deepseek-ai/dsh-session-projection-cache"
    assert checkpoints.inject == ["sessions", "session_projections", "session_persistence"]
    assert resolve("@deepseek-ai/dsh-session-projection-cache") is checkpoints
    names = [row["name"] for row in composition("/r")]
    assert names.index("@deepseek-ai/dsh-session-projection-cache") > names.index(
        "@deepseek-ai/dsh-session-persistence-jsonl")
    assert "@deepseek-ai/dsh-session-projection-cache" not in [row["name"] for row in composition(None)]


def test_turn_end_checkpoint_waits_for_durability(runtime: Context, tmp_path: Path) -> None:
    session = runtime.sessions.create("s", cwd="/w")
    turn(runtime, session, 1, ("a", "in_progress"))
    root = tmp_path / "root"
    assert not list(root.glob(f"*/s/{CHECKPOINT_NAME}")), "nothing is durable yet: no checkpoint may exist"
    runtime.session_persistence.flush()
    runtime.get("session_projection_cache").settle()  # written behind, off the flush's path
    log = the_log(root)
    record = stored_checkpoint(log)
    assert record["rows"] == {"todos": {"ver": 2, "seq": session.seq - 1,
                                        "val": [{"content": "a", "status": "in_progress"}]}}
    assert record["identity"] == {"createdAt": session.header["createdAt"], "cwd": "/w"}
    assert record["log"] == log.name
    assert_same_as_full(log, "checkpoint")


def test_a_flushed_turn_end_costs_its_caller_one_fsync_and_no_checkpoint_write(runtime: Context, tmp_path: Path,
                                                                             disk_syncs: DiskSyncs) -> None:
    """Repro (issue 14 goal 3): the flush that made a ``turn/end`` durable also wrote the projection checkpoint on the
    caller's thread (temporary file, fsync, rename), so acknowledging a turn cost two fsyncs and a rename. The
    checkpoint is now written by the plugin's own thread, after the caller's one fsync."""
    session = runtime.sessions.create("s", cwd="/w")
    turn(runtime, session, 1, ("a", "pending"))
    runtime.session_persistence.flush()  # creates the log: a new file has a fsynced directory entry too
    cache = runtime.get("session_projection_cache")
    cache.settle()
    disk_syncs.reset()
    turn(runtime, session, 2, ("b", "in_progress"))
    runtime.session_persistence.flush()
    assert (disk_syncs.here("fsync"), disk_syncs.here("replace")) == (1, 0)
    log = the_log(tmp_path / "root")
    assert len(read_session(log).events) == session.seq, "acknowledged: every event is on disk"
    cache.settle()
    assert (disk_syncs.elsewhere("fsync"), disk_syncs.elsewhere("replace")) == (1, 1)
    assert stored_checkpoint(log)["rows"]["todos"]["seq"] == session.seq - 1
    assert_same_as_full(log, "checkpoint")


def test_turn_end_written_by_the_background_writer(tmp_path: Path, compression: str) -> None:
    ctx = open_runtime(tmp_path / "root", compression=compression, batch_delay_ms=1)
    try:
        session = ctx.sessions.create("s", cwd="/w")
        turn(ctx, session, 1, ("a", "pending"))
        seq = session.seq - 1
        for _ in range(500):
            path = next((tmp_path / "root").glob(f"*/s/{CHECKPOINT_NAME}"), None)
            if path is not None:
                break
            threading.Event().wait(0.01)
        assert path is not None
        assert json.loads(path.read_text())["rows"]["todos"]["seq"] == seq
    finally:
        ctx.dispose()


def test_close_and_dispose_checkpoint_the_last_event(tmp_path: Path, compression: str) -> None:
    ctx = open_runtime(tmp_path / "root", compression=compression, batch_delay_ms=60_000)
    closing = ctx.sessions.create("c", cwd="/w")
    staying = ctx.sessions.create("d", cwd="/w")
    for session in (closing, staying):
        turn(ctx, session, 1, ("a", "completed"))
        turn(ctx, session, 2, ("b", "in_progress"), end=False)  # open turn: no turn/end checkpoint
    ctx.sessions.close("c")
    assert stored_checkpoint(the_log(tmp_path / "root", "c"))["rows"]["todos"]["seq"] == closing.seq - 1
    ctx.dispose()
    assert stored_checkpoint(the_log(tmp_path / "root", "d"))["rows"]["todos"]["seq"] == staying.seq - 1
    for name in ("c", "d"):
        log = the_log(tmp_path / "root", name)
        assert read_plan(log).plan == [{"content": "b", "status": "in_progress"}]
        assert_same_as_full(log, "checkpoint")


def test_the_cache_never_leads_the_log(tmp_path: Path, compression: str) -> None:
    """While a writer appends with a short window, every checkpoint seen is already in the log on disk."""
    ctx = open_runtime(tmp_path / "root", compression=compression, batch_delay_ms=2)
    session = ctx.sessions.create("s", cwd="/w")
    turn(ctx, session, 1)
    ctx.session_persistence.flush()
    log = the_log(tmp_path / "root")
    done = threading.Event()

    def write() -> None:
        for number in range(2, 60):
            turn(ctx, session, number, (f"t{number}", "in_progress"))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    seen = 0
    try:
        while not done.is_set() or seen == 0:
            found = read_checkpoint(log)
            if found is None:
                continue
            row_seq = found.rows["todos"]["seq"]
            durable = len(read_session(log).events) - read_session(log).closers  # read after the checkpoint
            assert row_seq < durable
            seen += 1
    finally:
        writer.join()
        ctx.dispose()
    assert seen
    assert_same_as_full(log, "checkpoint")


def test_unknown_event_type_stops_checkpointing(runtime: Context, tmp_path: Path) -> None:
    session = runtime.sessions.create("s", cwd="/w")
    turn(runtime, session, 1, ("a", "pending"))
    runtime.session_persistence.flush()
    runtime.get("session_projection_cache").settle()
    log = the_log(tmp_path / "root")
    before = stored_checkpoint(log)
    session.append("future/thing", {})
    turn(runtime, session, 2, ("b", "pending"))
    runtime.session_persistence.flush()
    runtime.get("session_projection_cache").settle()
    assert stored_checkpoint(log) == before, "a checkpoint past the unknown event would hide it from cold reads"
    with pytest.raises(SessionFormatUnsupportedError) as full:
        read_session(log)
    with pytest.raises(SessionFormatUnsupportedError) as cold:
        read_plan(log)
    assert str(cold.value) == str(full.value)


def test_service_restores_cold_sessions_from_checkpoint_and_tail(runtime: Context, tmp_path: Path) -> None:
    session = runtime.sessions.create("s", cwd="/w")
    turn(runtime, session, 1, ("a", "pending"))
    runtime.session_persistence.flush()
    turn(runtime, session, 2, ("b", "completed"), end=False)  # after the checkpoint: the tail
    runtime.session_persistence.flush()
    events = list(session.events)
    service = runtime.get("session_projection_cache")
    assert isinstance(service, checkpoints.ProjectionCache)
    restored = service.restore("s")
    registry = ProjectionRegistry()
    registry.register(TODOS_UNIT)
    full = registry.restore({}, events, 0)
    assert restored.states == full.states
    assert restored.as_of_seq == full.as_of_seq == len(events) - 1


def test_a_cold_restore_reads_a_big_record_from_the_checkpoints_event(tmp_path: Path, compression: str) -> None:
    """Turns appended faster than the batch window share one write batch (one zstd frame): the checkpoint written at
    dispose points at that record, and the service reads the tail from that record's start (the events the rows
    already cover are skipped by the restore), with the full restore's result."""
    ctx = open_runtime(tmp_path / "root", compression=compression, batch_delay_ms=60_000)
    session = ctx.sessions.create("s", cwd="/w")
    for number in range(1, 30):
        turn(ctx, session, number, (f"t{number}", "in_progress"), end=number < 29)
    events = list(session.events)
    ctx.dispose()
    ctx = open_runtime(tmp_path / "root", compression=compression)
    try:
        found = ctx.session_persistence.backend.read_checkpointed("s")
        assert found is not None and found.base <= len(events) - 1 < found.base + len(found.tail)
        service = ctx.get("session_projection_cache")
        assert isinstance(service, checkpoints.ProjectionCache)
        restored = service.restore("s")
    finally:
        ctx.dispose()
    registry = ProjectionRegistry()
    registry.register(TODOS_UNIT)
    full = registry.restore({}, events, 0)
    assert restored.states == full.states and restored.as_of_seq == full.as_of_seq == len(events) - 1


# -- reading: usable and unusable checkpoints ------------------------------------------------------------------


def five_turns(root: Path, compression: str) -> Path:
    """Five turns under ``root``, each made durable, closed by dispose: the checkpoint sits at the last ``turn/end``."""
    ctx = open_runtime(root, compression=compression, batch_delay_ms=60_000)
    session = ctx.sessions.create("s", cwd="/w")
    for number in range(1, 6):
        turn(ctx, session, number, (f"t{number}", "in_progress"), ("later", "pending"))
        ctx.session_persistence.flush()
    ctx.dispose()
    return the_log(root)


@pytest.fixture
def written(tmp_path: Path, compression: str) -> Iterator[Path]:
    """A log of several turns with a checkpoint at its last turn/end, then a durable tail of one more turn."""
    yield five_turns(tmp_path / "root", compression)


def rewrite(target: Path, *, reseal: bool = True, **changes: Any) -> None:
    """Edit the checkpoint beside ``target``; with ``reseal``, seal the edit with a proof that holds, so what is
    tested is the layer the edit is about (the row checks, the offset), not the proof, which refuses any edit by
    itself. Without it, the edit stands as a hand edit would (the proof no longer holds)."""
    record = stored_checkpoint(target)
    record.update(changes)
    (target.parent / CHECKPOINT_NAME).write_text(json.dumps(record))
    edited = read_checkpoint(target)
    if reseal and edited is not None and edited.proof is not None:
        proof = prefix_digest(target, edited.offset, edited.sealed())
        (target.parent / CHECKPOINT_NAME).write_text(json.dumps({**record, "proof": {"sha256": proof}}))


def append_turn(log: Path, compression: str, number: int, *items: tuple[str, str], end: bool = True) -> None:
    """Append one more turn through the real writer (another process's runtime, with the cache mounted)."""
    ctx = open_runtime(log.parents[2], compression=compression, batch_delay_ms=60_000)
    try:
        session = ctx.session_persistence.load("s")
        turn(ctx, session, number, *items, end=end)
        ctx.session_persistence.flush()
        ctx.session_persistence.release("s")
    finally:
        ctx.dispose()


def test_usable_checkpoint_reads_only_the_tail(written: Path) -> None:
    assert_same_as_full(written, "checkpoint")


@pytest.mark.parametrize("items", [(), (("x", "completed"),)])
def test_stale_checkpoint_folds_the_tail(written: Path, compression: str, items: tuple[tuple[str, str], ...]) -> None:
    before = stored_checkpoint(written)
    (written.parent / "keep.json").write_text(json.dumps(before))
    append_turn(written, compression, 6, *items, end=False)  # an open turn: no new checkpoint at turn/end…
    shutil.copy(written.parent / "keep.json", written.parent / CHECKPOINT_NAME)  # …and the old one restored
    assert_same_as_full(written, "checkpoint")
    assert read_plan(written).plan == ([{"content": "x", "status": "completed"}] if items else None)


def test_version_mismatched_row_is_discarded(written: Path) -> None:
    record = stored_checkpoint(written)
    record["rows"]["todos"]["ver"] = 1
    rewrite(written, rows=record["rows"])
    assert_same_as_full(written, "scan")


@pytest.mark.parametrize("value", [[{"content": 1, "status": "pending"}], "nope", [{"content": "a"}]])
def test_row_failing_the_state_schema_is_discarded(written: Path, value: Any) -> None:
    record = stored_checkpoint(written)
    record["rows"]["todos"]["val"] = value
    rewrite(written, rows=record["rows"])
    assert_same_as_full(written, "scan")


def test_leading_checkpoint_is_discarded(written: Path) -> None:
    record = stored_checkpoint(written)
    record["rows"]["todos"]["seq"] += 1  # one event beyond the log, with a value the log never had
    record["rows"]["todos"]["val"] = [{"content": "from the future", "status": "pending"}]
    rewrite(written, reseal=False, rows=record["rows"])
    assert_same_as_full(written, "scan")
    assert read_plan(written).plan != [{"content": "from the future", "status": "pending"}]


@pytest.mark.parametrize("where", ["mid-record", "beyond-end", "at-end", "zero", "later-record"])
def test_wrong_offset_is_discarded(written: Path, where: str) -> None:
    record = stored_checkpoint(written)
    size = written.stat().st_size
    offsets = {"mid-record": record["offset"] + 3, "beyond-end": size + 10, "at-end": size, "zero": 0,
               "later-record": record["offset"]}
    if where == "later-record":
        # The row goes back a turn while the offset stays: decoding from there skips events the row needs.
        record["rows"]["todos"]["seq"] -= 12
    rewrite(written, reseal=False, offset=offsets[where], rows=record["rows"])
    assert_same_as_full(written)
    assert read_plan(written).source != "checkpoint"


def test_earlier_record_offset_still_reads_right(written: Path, compression: str) -> None:
    """An offset earlier than needed costs time, never correctness: the reader skips what the row covers."""
    data = written.read_bytes()
    first = (data.index(b"\n") + 1 if compression == "none" else scan_frames(data).frames[1][0])
    rewrite(written, offset=first)
    assert_same_as_full(written, "checkpoint")


def test_identity_and_file_damage(written: Path) -> None:
    record = stored_checkpoint(written)
    rewrite(written, identity={"createdAt": record["identity"]["createdAt"] + 1, "cwd": "/w"})
    assert_same_as_full(written, "scan")
    rewrite(written, identity={"createdAt": record["identity"]["createdAt"]})  # cwd missing
    assert_same_as_full(written, "scan")
    rewrite(written, identity=record["identity"], log="session.other")
    assert_same_as_full(written, "scan")
    (written.parent / CHECKPOINT_NAME).write_text('{"version": 1, "log"')
    assert_same_as_full(written, "scan")
    (written.parent / CHECKPOINT_NAME).write_text(json.dumps({**record, "version": 2}))
    assert_same_as_full(written, "scan")


def test_checkpoint_with_a_torn_tail_after_it(written: Path, compression: str) -> None:
    append_turn(written, compression, 6, ("y", "pending"))
    data = written.read_bytes()
    written.write_bytes(data[:-5])  # the last batch torn mid-write
    assert_same_as_full(written)


# -- DSH's fixtures, with checkpoints at every record boundary -------------------------------------------------


def record_starts(log: Path, compression: str) -> list[int]:
    data = log.read_bytes()
    if compression == "none":
        starts, at = [], data.index(b"\n") + 1
        while at < len(data):
            starts.append(at)
            end = data.find(b"\n", at)
            if end < 0:
                break
            at = end + 1
        return starts
    return [start for start, _ in scan_frames(data).frames[1:]]


def first_seq_at(log: Path, compression: str, offset: int) -> int | None:
    from dsh_todo.harness.persistence.jsonl.reading import first_seq as _first_seq
    from dsh_todo.harness.persistence.jsonl.zstd import decode_frame

    data = log.read_bytes()[offset:]
    if compression == "zstd":
        end = scan_frames(data).frames[0][1]
        data = decode_frame(data[:end])
    return _first_seq(data)


def test_fixture_checkpoints_at_record_boundaries(fixture_name: str, tmp_path: Path) -> None:
    fixture = load_fixture(fixture_name)
    if not fixture.expected["load"]["ok"]:
        pytest.skip("a log that loads is needed")  # our writer never checkpoints past a refused event (tested above)
    root = copy_store(fixture, tmp_path / "store")
    log = next(root.glob("*/*/session*.jsonl*"))
    full = read_session(log)
    events = full.events[:len(full.events) - full.closers]
    meta = full.meta
    compression = fixture.compression
    checked = 0
    starts = record_starts(log, compression)
    if len(starts) > 40:  # long logs: a spread of boundaries, and always the last ones
        starts = sorted({*starts[::len(starts) // 30], *starts[-5:]})
    for offset in starts:
        first = first_seq_at(log, compression, offset)
        if first is None or first >= len(events):
            continue
        for seq in sorted({max(first - 1, 0), first, min(first + 2, len(events) - 1)}):
            row = {"ver": 2, "seq": seq, "val": TODOS_UNIT.fold(events[:seq + 1])}
            identity = {"createdAt": meta["createdAt"], **({"cwd": meta["cwd"]} if "cwd" in meta else {})}
            write_checkpoint(log, Checkpoint(log.name, identity, offset, {"todos": row}))
            view = read_plan(log)
            assert view.plan == full.plan == fixture.expected["todos"]
            assert view.as_of_seq == len(events) - 1
            checked += 1
    assert checked


def test_fixture_loaded_and_checkpointed_by_the_runtime(intact_name: str, tmp_path: Path) -> None:
    fixture = load_fixture(intact_name)
    root = copy_store(fixture, tmp_path / "store")
    ctx = open_runtime(root, compression=fixture.compression, batch_delay_ms=60_000)
    try:
        session = ctx.session_persistence.load(fixture.session_id)
        ctx.sessions.close(session.id)
    finally:
        ctx.dispose()
    log = next(root.glob("*/*/session*.jsonl*"))
    assert (log.parent / CHECKPOINT_NAME).exists() == bool(session.seq)
    assert read_plan(log).plan == fixture.expected["todos"]


def test_a_checkpoint_the_disk_refuses_is_said_once_per_episode(runtime: Context, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Repro (issue 22 item 4): every turn whose checkpoint the full disk refused logged ``could not write the
    projection checkpoint`` with a traceback. Now one line per session until a checkpoint is written again."""
    cache = runtime.get("session_projection_cache")
    written = cache.backend.write_checkpoint
    refusing = True

    def write(*args: Any) -> None:
        if refusing:
            raise OSError(errno.ENOSPC, "No space left on device")
        written(*args)

    monkeypatch.setattr(cache.backend, "write_checkpoint", write)
    session = runtime.sessions.create("s", cwd="/w")
    with caplog.at_level(logging.WARNING, logger="dsh_todo.persistence"):
        for number in range(1, 7):
            refusing = number not in (4,)  # written once, in turn 4: the second episode starts at turn 5
            turn(runtime, session, number, ("a", "in_progress"))
            runtime.session_persistence.flush("s")
            cache.settle()
    said = [(record.getMessage(), bool(record.exc_info)) for record in caplog.records]
    assert said == [('could not write the projection checkpoint of session "s": [Errno 28] No space left on device',
                     False)] * 2
