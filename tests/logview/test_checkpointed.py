"""The reader's checkpointed read: a projection checkpoint whose prefix digest matches the log is trusted for the
bytes before its offset, the tail after it is read exactly, and the answer is always the full pass's.

Any anomaly (no digest, a digest that does not match, a damaged or torn tail, a tail without a turn boundary, a plan
that cannot be shown) sends the reader through every line, so the verdict is the full read's by construction.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_todo.harness.persistence.jsonl import reading
from dsh_todo.harness.persistence.jsonl.checkpoint import CHECKPOINT_NAME
from dsh_todo.harness.persistence.jsonl.zstd import scan_frames
from dsh_todo.logview import PlanView, read_plan, read_session
from dsh_todo.standard import open_runtime
from tests.harness.persistence.test_checkpoints import append_turn, five_turns, todo_write


@pytest.fixture(params=["none", "zstd"])
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def written(tmp_path: Path, compression: str) -> Iterator[Path]:
    """Five turns, each made durable, closed by dispose: the checkpoint sits at the last ``turn/end``."""
    yield five_turns(tmp_path / "root", compression)


def same_as_full(log: Path) -> PlanView:
    """``read_plan``'s answer, checked against the full read keeping every event."""
    view = read_plan(log)
    full = read_session(log)
    assert (view.health, view.plan, view.meta, view.live) == (full.health, full.plan, full.meta, full.live)
    if not full.health.refused:
        assert view.as_of_seq == len(full.stored) - 1
    return view


def test_a_checkpoint_with_a_matching_prefix_is_read_from_its_offset(written: Path) -> None:
    assert "sha256" in json.loads((written.parent / CHECKPOINT_NAME).read_text())["proof"]
    view = same_as_full(written)
    assert view.source == "checkpoint" and view.health.state == "ok"
    assert view.plan == [{"content": "t5", "status": "in_progress"}, {"content": "later", "status": "pending"}]


def test_a_damaged_prefix_is_read_in_full_and_refused(written: Path, compression: str) -> None:
    """The bytes before the offset changed after the checkpoint was written: the digest no longer matches, so the
    reader reads every line and refuses what a full read refuses."""
    data = bytearray(written.read_bytes())
    if compression == "none":
        second_line = data.index(b"\n", data.index(b"\n") + 1) + 1
        data[second_line] = ord("x")  # a committed line that no longer parses, turns end after it
    else:
        _, end = scan_frames(bytes(data)).frames[1]
        data[end - 5] ^= 0xFF  # inside the second frame: its checksum fails
    written.write_bytes(bytes(data))
    view = same_as_full(written)
    assert view.source == "scan" and view.health.code == "corrupt-log"


def test_a_checkpoint_without_a_digest_is_not_trusted(written: Path) -> None:
    record = json.loads((written.parent / CHECKPOINT_NAME).read_text())
    del record["proof"]
    (written.parent / CHECKPOINT_NAME).write_text(json.dumps(record))
    assert same_as_full(written).source == "scan"


def test_an_edited_checkpoint_is_not_trusted(written: Path) -> None:
    """The proof covers the rows too: a plan written into ``projections.json`` by hand is not shown."""
    record = json.loads((written.parent / CHECKPOINT_NAME).read_text())
    record["rows"]["todos"]["val"] = [{"content": "forged", "status": "pending"}]
    (written.parent / CHECKPOINT_NAME).write_text(json.dumps(record))
    view = same_as_full(written)
    assert view.source == "scan" and view.plan == [{"content": "t5", "status": "in_progress"},
                                                   {"content": "later", "status": "pending"}]


def test_a_torn_tail_is_recovered_by_the_full_pass(written: Path, compression: str) -> None:
    with written.open("ab") as file:
        file.write(b'{"type":"turn/start","se' if compression == "none" else b"\x28\xb5\x2f\xfd\x04")
    view = same_as_full(written)
    assert view.source == "scan" and view.health.state == "recovered"


def open_turn_in_two_batches(log: Path, compression: str) -> None:
    """Turn 6 started in one durable batch and went on in another, unfinished: the checkpoint's record (the last
    line, or the last frame) holds no turn boundary."""
    ctx = open_runtime(log.parents[2], compression=compression, batch_delay_ms=60_000)
    try:
        session = ctx.session_persistence.load("s")
        session.append("turn/start", {"turn": 6})
        session.append("step/start", {"turn": 6, "step": 1})
        ctx.session_persistence.flush()
        todo_write(ctx, session, ("t6", "in_progress"))
        ctx.session_persistence.flush()
        ctx.session_persistence.release("s")
    finally:
        ctx.dispose()


def test_a_turn_open_at_the_offset_is_read_back_for_its_closers(written: Path, compression: str) -> None:
    """A checkpoint at the last event of an unfinished turn: the closers depend on the turn's events before the
    offset, which are read back from there (the prefix is proven unchanged)."""
    open_turn_in_two_batches(written, compression)
    view = same_as_full(written)
    assert view.source == "checkpoint" and view.health.state == "recovered"
    assert "closed the interrupted turn 6 with" in view.health.reason
    assert view.plan == [{"content": "t6", "status": "in_progress"}]


def test_a_turn_too_long_to_read_back_is_read_in_full(written: Path, compression: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    open_turn_in_two_batches(written, compression)
    monkeypatch.setattr(reading, "TURN_BUDGET", 1)
    monkeypatch.setattr(reading.open_turn_before, "__defaults__", (1,))
    view = same_as_full(written)
    assert view.source == "scan" and view.health.state == "recovered"


def test_a_tail_that_goes_on_after_the_checkpoint_is_folded(written: Path, compression: str) -> None:
    checkpoint = (written.parent / CHECKPOINT_NAME).read_bytes()
    append_turn(written, compression, 6, ("t6", "completed"))
    (written.parent / CHECKPOINT_NAME).write_bytes(checkpoint)  # the older checkpoint: a longer tail after it
    view = same_as_full(written)
    assert view.source == "checkpoint" and view.plan == [{"content": "t6", "status": "completed"}]


@pytest.mark.parametrize("seed", range(3))
def test_random_damage_gets_the_full_reads_verdict(written: Path, seed: int) -> None:
    """Bytes flipped or cut anywhere in a log whose checkpoint proves its prefix: ``read_plan`` (from the checkpoint
    or through every line) answers exactly what the full read answers."""
    rng = random.Random(seed)
    original = written.read_bytes()
    for _ in range(12):
        data = bytearray(original)
        if rng.random() < 0.2:
            del data[rng.randrange(1, len(data)):]
        else:
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        written.write_bytes(bytes(data))
        same_as_full(written)
