"""Following a growing log costs the bytes it added (issue 13 item 5), and still gives the reader's verdicts.

Repro (before): the web follower re-read the whole log on every change of its file (``persistence.read``): at 50k
events a writer trickling 10 events/s kept the server at 57% CPU. :class:`LogTail` reads from the byte (raw) or
the frame (zstd) where the last read stopped; everything it cannot take as it is goes back to the store's read.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence.errors import CorruptSessionLogError, SessionFormatUnsupportedError
from dsh_todo.harness.persistence.jsonl import follow as tail_module
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.follow import LogTail

START = 1_700_000_000_000


class Writer:
    """A session log written batch by batch by the real writer, as another process would."""

    def __init__(self, root: Path, compression: str) -> None:
        self.store = JsonlBackend(root, compression)  # type: ignore[arg-type]
        self.writer = self.store.create({"id": "s", "createdAt": START, "cwd": "/w"})
        self.count = 0

    def batch(self, size: int = 5) -> None:
        events = []
        for _ in range(size):
            seq = self.count
            kind = "turn/start" if seq % 10 == 0 else "turn/end" if seq % 10 == 9 else "todo/write"
            data: Any = {"turn": seq // 10 + 1} if kind != "todo/write" else {
                "todos": [{"content": f"task {seq}", "status": "in_progress"}]}
            events.append({"type": kind, "seq": seq, "time": START + seq, "data": data})
            self.count += 1
        self.writer.append(events)

    @property
    def path(self) -> Path:
        return self.store.path_for("s", "/w")


@pytest.fixture(params=["none", "zstd"])
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes each incremental read takes from the file."""
    reads: list[int] = []
    original = tail_module.read_from

    def counting(path: Path, offset: int) -> bytes:
        data = original(path, offset)
        reads.append(len(data))
        return data

    monkeypatch.setattr(tail_module, "read_from", counting)
    return reads


def test_a_growing_log_is_read_from_where_the_last_read_stopped(tmp_path: Path, compression: str,
                                                                counted: list[int]) -> None:
    writer = Writer(tmp_path / "root", compression)
    for _ in range(20):
        writer.batch()
    full_reads: list[str] = []
    store = writer.store
    original_read = store.read

    def counting_read(session_id: str) -> Any:
        full_reads.append(session_id)
        return original_read(session_id)

    store.read = counting_read  # type: ignore[method-assign]
    follower = LogTail(store, "s", writer.path)
    seen = follower.read()
    assert len(seen) == 100 and full_reads == ["s"]
    size = writer.path.stat().st_size
    counted.clear()  # the whole read looked up where its last record ends
    for _ in range(30):
        writer.batch()
        fresh = follower.read()
        assert [event["seq"] for event in fresh] == list(range(len(seen), len(seen) + 5))
        seen.extend(fresh)
    assert follower.read() == []  # nothing changed: not even a read
    assert full_reads == ["s"]
    assert sum(counted) == writer.path.stat().st_size - size  # exactly the appended bytes, once each
    assert seen == original_read("s").events  # what a full re-read gives


def test_a_line_or_frame_caught_half_written_is_delivered_once_it_is_whole(tmp_path: Path, compression: str) -> None:
    writer = Writer(tmp_path / "root", compression)
    writer.batch()
    follower = LogTail(writer.store, "s", writer.path)
    assert len(follower.read()) == 5
    whole = writer.path.read_bytes()
    writer.batch()
    grown = writer.path.read_bytes()
    extra = grown[len(whole):]
    with writer.path.open("r+b") as file:  # the writer's batch, caught in the middle of its write
        file.truncate(len(whole) + len(extra) // 2)
    early = follower.read()  # the whole lines (raw) or nothing (zstd: the frame is not complete)
    assert len(early) < 5
    with writer.path.open("ab") as file:
        file.write(extra[len(extra) // 2:])
    assert [event["seq"] for event in [*early, *follower.read()]] == [5, 6, 7, 8, 9]


def test_a_half_written_record_is_not_read_again_while_the_file_stands_still(
        tmp_path: Path, compression: str, counted: list[int]) -> None:
    writer = Writer(tmp_path / "root", compression)
    writer.batch()
    follower = LogTail(writer.store, "s", writer.path)
    follower.read()
    whole = writer.path.stat().st_size
    writer.batch()
    with writer.path.open("r+b") as file:  # a writer killed in the middle of its batch
        file.truncate(whole + (writer.path.stat().st_size - whole) // 2)
    follower.read()
    counted.clear()
    assert follower.read() == [] and follower.read() == []
    assert counted == []  # the torn bytes wait for the file to change, not for the next poll


def test_a_log_that_turns_corrupt_gets_the_readers_verdict(tmp_path: Path, compression: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad record followed by a ``turn/end`` is corruption for the reader; the follower says the same words."""
    writer = Writer(tmp_path / "root", "none")
    writer.batch(10)
    follower = LogTail(writer.store, "s", writer.path)
    assert len(follower.read()) == 10
    with writer.path.open("ab") as file:
        file.write(b'{"not json\n{"type":"turn/end","seq":11,"time":1,"data":{"turn":2}}\n')
    with pytest.raises(CorruptSessionLogError) as verdict:
        writer.store.read("s")
    with pytest.raises(CorruptSessionLogError) as followed:
        follower.read()
    assert str(followed.value) == str(verdict.value)
    store_reads: list[str] = []
    read = writer.store.read
    monkeypatch.setattr(writer.store, "read", lambda session_id: store_reads.append(session_id) or read(session_id))
    with pytest.raises(CorruptSessionLogError) as again:
        follower.read()
    assert str(again.value) == str(verdict.value)
    assert store_reads == []  # the verdict stands while the file does: the same bytes are not judged twice


def test_an_unknown_event_type_gets_the_readers_verdict(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "root", "none")
    writer.batch(3)
    follower = LogTail(writer.store, "s", writer.path)
    follower.read()
    writer.writer.append([{"type": "future/thing", "seq": 3, "time": START, "data": {}}])
    with pytest.raises(SessionFormatUnsupportedError) as verdict:
        writer.store.read("s")
    with pytest.raises(SessionFormatUnsupportedError) as followed:
        follower.read()
    assert str(followed.value) == str(verdict.value)


def test_a_replaced_log_is_read_whole_again(tmp_path: Path, compression: str) -> None:
    writer = Writer(tmp_path / "root", compression)
    writer.batch(10)
    follower = LogTail(writer.store, "s", writer.path)
    follower.read()
    replacement = tmp_path / "replacement"
    replacement.write_bytes(writer.path.read_bytes())
    writer.batch(10)
    replacement.replace(writer.path)  # another inode, fewer events
    again = follower.read()
    assert [event["seq"] for event in again] == list(range(10))


def test_a_log_appended_to_during_the_whole_read_is_continued_after_what_it_gave(
        tmp_path: Path, compression: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro (before): the first read was repeated until the file stood still around it, so a log of 50k events
    whose writer appends every 200 ms was never read at all (each read took longer than a batch)."""
    writer = Writer(tmp_path / "root", compression)
    writer.batch()
    store = writer.store
    original_read = store.read

    def read_while_writing(session_id: str) -> Any:
        stored = original_read(session_id)
        writer.batch()  # a batch lands after the read, before the tail looks at the file again
        return stored

    store.read = read_while_writing  # type: ignore[method-assign]
    follower = LogTail(store, "s", writer.path)
    assert [event["seq"] for event in follower.read()] == [0, 1, 2, 3, 4]
    store.read = original_read  # type: ignore[method-assign]
    assert [event["seq"] for event in follower.read()] == [5, 6, 7, 8, 9]


def test_store_follow_pushes_each_run_once_in_order(tmp_path: Path, compression: str) -> None:
    writer = Writer(tmp_path / "root", compression)
    writer.batch()
    store = JsonlBackend(tmp_path / "root", compression)  # type: ignore[arg-type]
    store.follow_interval = 0.01
    runs: list[list[int]] = []
    done = threading.Event()

    def on_events(events: Any) -> None:
        runs.append([event["seq"] for event in events])
        if events[-1]["seq"] == 24:
            done.set()

    subscription = store.follow("s", 2, on_events)
    try:
        assert runs == [[3, 4]]  # what is stored now, read before follow returns
        for _ in range(4):
            writer.batch()
        assert done.wait(10)
    finally:
        subscription.close()
    assert [seq for run in runs for seq in run] == list(range(3, 25))
