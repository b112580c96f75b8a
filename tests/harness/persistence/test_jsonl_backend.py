"""The store: logs we write read back identically, files appear lazily, and misplaced artifacts are refused."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence import (
    CorruptSessionLogError,
    SessionExistsError,
    SessionIdError,
    SessionLockedError,
    SessionNotFoundError,
)
from dsh_todo.harness.persistence.errors import RootEncodingError
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.zstd import scan_frames
from dsh_todo.jsonutil import dumps
from tests.harness.persistence.fixture_logs import copy_store, load_fixture

COMPRESSIONS = ["none", "zstd"]


def chunk_events(start: int, count: int, *, index: int = 0) -> list[dict[str, Any]]:
    return [{"type": "assistant/chunk", "seq": start + i, "time": 100 + i // 2,
             "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": index, "text": f"t{i} é🚀"}}}
            for i in range(count)]


def some_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "turn/start", "seq": 0, "time": 99, "data": {"turn": 1}}]
    events += chunk_events(1, 7)
    events += [
        {"type": "todo/write", "seq": 8, "time": 101,
         "data": {"todos": [{"content": "ünï \u2028 \"q\"", "status": "in_progress"}]}},
        {"type": "future/thing", "seq": 9, "time": 101, "data": None, "ignorable": True},
        {"type": "turn/end", "seq": 10, "time": 102, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    return events


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_round_trip(tmp_path: Path, compression: Any) -> None:
    """A new log is format v4 (DSH 0.2's): ``session.v4.jsonl[.zstd]``, an ``isSeeded`` header, no packed rows."""
    store = JsonlBackend(tmp_path / "root", compression)
    events = some_events()
    writer = store.create({"id": "s1", "createdAt": 5, "cwd": "/home/x"})
    writer.append(events[:3])
    writer.append(events[3:])
    writer.close()
    stored = store.read("s1")
    assert stored.path.name == ("session.v4.jsonl.zstd" if compression == "zstd" else "session.v4.jsonl")
    assert dumps(stored.events) == dumps(events)
    assert stored.meta == {"version": 4, "id": "s1", "createdAt": 5, "cwd": "/home/x", "isSeeded": False,
                           "delegationDepth": 0}
    assert stored.torn is None
    loaded = store.load("s1")
    assert loaded.rewrote is False and dumps(loaded.events) == dumps(events)
    if compression == "zstd":
        assert len(scan_frames(stored.path.read_bytes()).frames) == 3  # header + one frame per batch
    else:
        # header, then one line per event: v4 never packs chunk rows
        assert stored.path.read_bytes().count(b"\n") == 1 + len(events)
        assert stored.path.read_bytes().split(b"\n")[0] == (
            b'{"type":"session","version":4,"id":"s1","createdAt":5,"cwd":"/home/x","isSeeded":false,'
            b'"delegationDepth":0}')


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_round_trip_of_a_v0_session(tmp_path: Path, compression: Any) -> None:
    """A session whose header asks for format v0 is written in v0 (DSH 0.1's): ``session.jsonl[.zstd]``, and delta
    runs packed into chunk rows. Repro before: the log was named ``session.v4.jsonl`` whatever its header said (so
    its next read refused it: "session generation filename identifies v4, but its header identifies v0"), and no
    run was packed."""
    store = JsonlBackend(tmp_path / "root", compression)
    events = some_events()
    writer = store.create({"id": "s1", "createdAt": 5, "cwd": "/home/x", "version": 0})
    writer.append(events[:3])
    writer.append(events[3:])
    writer.close()
    stored = store.read("s1")
    assert stored.path.name == ("session.jsonl.zstd" if compression == "zstd" else "session.jsonl")
    assert dumps(stored.events) == dumps(events)
    assert stored.meta == {"version": 0, "id": "s1", "createdAt": 5, "cwd": "/home/x", "delegationDepth": 0}
    assert stored.torn is None
    loaded = store.load("s1")
    assert loaded.rewrote is False and dumps(loaded.events) == dumps(events)
    if compression == "zstd":
        assert len(scan_frames(stored.path.read_bytes()).frames) == 3  # header + one frame per batch
    else:
        # header; batch 1: turn/start and a 2-delta run (too short to pack); batch 2: the rest of the run packs
        # into one row, then todo/write, the ignorable event and turn/end. Runs pack per batch, as in DSH.
        assert stored.path.read_bytes().count(b"\n") == 1 + 3 + 4
        assert stored.path.read_bytes().split(b"\n")[0] == (
            b'{"type":"session","version":0,"id":"s1","createdAt":5,"cwd":"/home/x","delegationDepth":0}')


def test_a_format_version_no_harness_reads_is_refused_at_create(tmp_path: Path) -> None:
    """Repro before: ``create`` wrote whatever ``version`` the metadata held, a header no reader accepts back."""
    with pytest.raises(ValueError, match=r"^session metadata version must be 0 or 4$"):
        JsonlBackend(tmp_path / "root").create({"id": "s", "createdAt": 1, "version": 3})


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_log_appears_only_with_the_first_batch(tmp_path: Path, compression: Any) -> None:
    root = tmp_path / "root"
    store = JsonlBackend(root, compression)
    writer = store.create({"id": "s", "createdAt": 1})
    assert not writer.path.exists()
    assert store.stored_sessions() == []
    with pytest.raises(SessionNotFoundError):
        store.read("s")
    writer.close()
    assert not writer.path.parent.exists(), "an unused session leaves no directory"
    writer = store.create({"id": "s", "createdAt": 1})
    writer.append(some_events()[:1])
    assert writer.path.exists()
    assert sorted(os.listdir(writer.path.parent)) == sorted(["session.lock", writer.path.name])
    writer.close()
    assert sorted(os.listdir(writer.path.parent)) == [writer.path.name]


def open_descriptors_of(path: Path) -> list[int]:
    """This process's descriptors open on ``path``."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                found.append(int(name))
    return found


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_writer_opens_its_log_once_and_closes_it_before_the_lock_goes(tmp_path: Path, compression: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro: every batch opened the log, read its size and closed it again (three system calls and a path walk
    per durable call, more than the write). A writer now opens it once, on the first append after the one that
    created it, and closes it when it releases the lock, so a closed writer leaves no descriptor behind."""
    store = JsonlBackend(tmp_path / "root", compression)
    events = some_events()
    writer = store.create({"id": "s", "createdAt": 1})
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    for event in events:
        writer.append([event])
    assert opened.count(str(writer.path)) == 1
    assert len(open_descriptors_of(writer.path)) == 1
    writer.close()
    assert open_descriptors_of(writer.path) == []
    assert dumps(store.read("s").events) == dumps(events)


def test_a_failed_append_is_cut_back_and_retried_on_a_fresh_descriptor(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An fsync that fails (a full disk, an I/O error) leaves the log as it was before the batch, closes the
    descriptor it failed on, and the same batch appended again lands once."""
    store = JsonlBackend(tmp_path / "root", "none")
    events = some_events()
    writer = store.create({"id": "s", "createdAt": 1})
    writer.append(events[:1])
    writer.append(events[1:2])
    size = writer.path.stat().st_size
    real_fsync = os.fsync
    failures = []

    def failing_fsync(fd: int) -> None:
        if not failures:
            failures.append(fd)
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        writer.append(events[2:4])
    assert writer.path.stat().st_size == size
    assert open_descriptors_of(writer.path) == []
    writer.append(events[2:4])
    writer.append(events[4:])
    writer.close()
    assert dumps(store.read("s").events) == dumps(events)


def test_create_refuses_an_existing_log_anywhere(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "none")
    writer = store.create({"id": "s", "createdAt": 1, "cwd": "/a"})
    writer.append(some_events()[:1])
    writer.close()
    with pytest.raises(SessionExistsError, match='session "s" already has a log on disk'):
        store.create({"id": "s", "createdAt": 1, "cwd": "/elsewhere"})


def test_appends_must_continue_the_seq(tmp_path: Path) -> None:
    writer = JsonlBackend(tmp_path / "root", "none").create({"id": "s", "createdAt": 1})
    writer.append(some_events()[:2])
    with pytest.raises(ValueError, match=r'append seq mismatch for "s": expected 2 at index 0, got 3'):
        writer.append(some_events()[3:4])
    writer.close()


def test_a_writers_refusals_word_for_word(tmp_path: Path) -> None:
    """Every refusal of the JSONL writer, its lock and its reader, whole: the texts come from the builders in
    ``persistence.errors`` the other backends use, and must stay DSH's byte for byte."""
    store = JsonlBackend(tmp_path / "root", "none")
    writer = store.create({"id": "w", "createdAt": 1})
    with pytest.raises(ValueError) as mismatch:
        writer.append([*some_events()[:1], some_events()[5]])
    assert str(mismatch.value) == 'append seq mismatch for "w": expected 1 at index 1, got 5'
    writer.append(some_events()[:1])
    log = store.find("w")
    assert log is not None
    lock = log.parent / "session.lock"
    with pytest.raises(SessionLockedError) as held:
        store.resume("w")
    assert str(held.value) == (f'session "w" is already open for writing by process {os.getpid()} (lock: {lock}); '
                               "a session log takes one writer at a time")
    assert held.value.holder_pid == os.getpid()
    writer.close()
    with pytest.raises(RuntimeError) as closed:
        writer.append(some_events()[1:2])
    assert str(closed.value) == 'the writer of session "w" is closed'
    with pytest.raises(SessionExistsError) as exists:
        store.create({"id": "w", "createdAt": 1})
    assert str(exists.value) == 'session "w" already has a log on disk; load it to go on with it, or pick another id'
    with pytest.raises(SessionExistsError) as differs:
        store.continue_live("w", [])
    assert str(differs.value) == str(exists.value)
    with pytest.raises(SessionNotFoundError) as missing:
        store.resume("x")
    assert str(missing.value) == f'session "x" has no stored log under {tmp_path / "root"}'


def test_list_reads_headers_of_both_layout_kinds(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "zstd")
    for session_id, cwd in [("a", "/p"), ("b", None), ("c", "/p")]:
        writer = store.create({"id": session_id, "createdAt": 1, **({"cwd": cwd} if cwd else {})})
        writer.append(some_events()[:1])
        writer.close()
    listed = {(entry.id, entry.cwd) for entry in store.stored_sessions()}
    assert listed == {("a", "/p"), ("b", None), ("c", "/p")}


def test_raw_and_zstd_logs_mix_under_one_root(tmp_path: Path) -> None:
    """Each log is read in its own encoding, whatever the backend's compression. Repro before: a zstd root holding
    one raw log refused every read with "select the matching compression mode", although neither ``run`` nor
    ``web`` had such an option."""
    raw = JsonlBackend(tmp_path / "root", "none")
    writer = raw.create({"id": "raw", "createdAt": 1})
    writer.append(some_events()[:1])
    writer.close()
    writer = JsonlBackend(tmp_path / "other", "zstd").create({"id": "packed", "createdAt": 1, "cwd": "/p"})
    writer.append(some_events()[:2])
    writer.close()
    (tmp_path / "other" / "--p--").rename(tmp_path / "root" / "--p--")  # a log of the other encoding, copied in
    store = JsonlBackend(tmp_path / "root", "zstd")
    assert sorted(entry.id for entry in store.stored_sessions()) == ["packed", "raw"]
    assert len(store.read("raw").events) == 1 and len(raw.read("packed").events) == 2
    loaded, resumed = store.resume("raw")  # an existing log keeps its encoding when written again
    resumed.close()
    assert sorted(path.name for path in (tmp_path / "root").glob("*/*/session*.jsonl*")) == [
        "session.v4.jsonl", "session.v4.jsonl.zstd"]
    assert len(raw.read("raw").events) == len(loaded.events)


def test_a_new_log_takes_the_encoding_of_the_roots_logs(tmp_path: Path) -> None:
    """DSH keeps one encoding per root: a new log is written in the encoding the root's logs have, unless another
    was asked for, which is refused in one line naming a log of the root; an empty root's new logs are zstd."""
    JsonlBackend(tmp_path / "root", "none").create({"id": "first", "createdAt": 1}).append(some_events()[:1])
    JsonlBackend(tmp_path / "root").create({"id": "second", "createdAt": 1}).append(some_events()[:1])
    JsonlBackend(tmp_path / "root", "none").create({"id": "third", "createdAt": 1}).append(some_events()[:1])
    assert sorted(str(path.relative_to(tmp_path / "root")) for path in (tmp_path / "root").glob("*/*/*.jsonl*")) == [
        "_no-cwd/first/session.v4.jsonl", "_no-cwd/second/session.v4.jsonl", "_no-cwd/third/session.v4.jsonl"]
    with pytest.raises(RootEncodingError) as refused:
        JsonlBackend(tmp_path / "root", "zstd").create({"id": "fourth", "createdAt": 1})
    root = tmp_path / "root"
    example = next(root.glob("_no-cwd/*/session.v4.jsonl"))
    assert str(refused.value) == (
        f'the session root {root} keeps its logs in compression "none" (session.v4.jsonl in {example.parent}), not '
        '"zstd": DeepSeek Harness keeps one encoding per root, so use compression "none" there or another root')
    assert not (root / "_no-cwd" / "fourth").exists()
    JsonlBackend(tmp_path / "empty").create({"id": "s", "createdAt": 1}).append(some_events()[:1])
    assert [path.name for path in (tmp_path / "empty").glob("*/*/*.jsonl*")] == ["session.v4.jsonl.zstd"]


@pytest.mark.parametrize(("raw", "zstd"), [("session.v4.jsonl", "session.v4.jsonl.zstd"),
                                           ("session.jsonl", "session.jsonl.zstd"),
                                           ("session.v4.jsonl", "session.jsonl.zstd"),
                                           ("session.jsonl", "session.v4.jsonl.zstd")])
def test_a_session_directory_holding_both_encodings_is_refused(raw: str, zstd: str, tmp_path: Path) -> None:
    """Whatever the generations of the two files: the message names both."""
    writer = JsonlBackend(tmp_path / "root", "none").create({"id": "s", "createdAt": 1})
    writer.append(some_events()[:1])
    writer.close()
    log = next((tmp_path / "root").glob("*/*/session.v4.jsonl"))
    log.rename(log.with_name(raw))
    (log.parent / zstd).write_bytes(b"")
    store = JsonlBackend(tmp_path / "root", "zstd")
    with pytest.raises(CorruptSessionLogError) as refused:
        store.read("s")
    assert str(refused.value) == (f"session directory {log.parent} holds both {raw} and {zstd}; a session is stored "
                                  "in one encoding: keep the one you want and move the other away")
    [entry] = store.stored_sessions()  # listed with its problem: one such session never hides the others
    assert entry.id == "s" and isinstance(entry.problem, CorruptSessionLogError)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_directory_holding_both_generations_reads_the_v4_log(compression: Any, tmp_path: Path) -> None:
    """A directory DSH migrated keeps the v0 log beside the v4 one (one encoding): the v4 log is the session's, and
    it is the one written on."""
    events = some_events()
    v0 = JsonlBackend(tmp_path / "root", compression).create({"id": "s", "createdAt": 1, "version": 0})
    v0.append(events[:2])
    v0.close()
    old = next((tmp_path / "root").glob("*/s/session.jsonl*"))
    before = old.read_bytes()
    old.rename(tmp_path / "kept")
    v4 = JsonlBackend(tmp_path / "root", compression).create({"id": "s", "createdAt": 1})
    v4.append(events)
    v4.close()
    (tmp_path / "kept").rename(old)
    store = JsonlBackend(tmp_path / "root", compression)
    stored = store.read("s")
    assert stored.path == old.with_name("session.v4.jsonl" + (".zstd" if compression == "zstd" else ""))
    assert stored.meta["version"] == 4 and dumps(stored.events) == dumps(events)
    loaded, writer = store.resume("s")
    assert loaded.closers == []
    writer.append([{"type": "turn/start", "seq": len(events), "time": 200, "data": {"turn": 2}}])
    writer.close()
    assert len(store.read("s").events) == len(events) + 1 and old.read_bytes() == before


@pytest.mark.parametrize(("name", "version"), [("session.v4.jsonl", 0), ("session.jsonl", 4)])
def test_a_log_whose_name_and_header_name_different_versions_is_refused(name: str, version: int,
                                                                        tmp_path: Path) -> None:
    """DSH's rule: the file name is the log's generation, and its header must say the same."""
    writer = JsonlBackend(tmp_path / "root", "none").create({"id": "s", "createdAt": 1, "version": version})
    writer.append(some_events()[:1])
    writer.close()
    [log] = (tmp_path / "root").glob("*/s/session*.jsonl")
    log.rename(log.with_name(name))
    named = 4 if version == 0 else 0
    for read in (JsonlBackend(tmp_path / "root").read, JsonlBackend(tmp_path / "root").load):
        with pytest.raises(CorruptSessionLogError) as refused:
            read("s")
        assert str(refused.value) == (f"corrupt session log: session generation filename identifies v{named}, but "
                                      f"its header identifies v{version}")


def test_flat_layout_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "root" / "--p--"
    project.mkdir(parents=True)
    (project / "s.jsonl").write_text("{}\n")
    with pytest.raises(CorruptSessionLogError, match="is a session log in the retired flat layout"):
        JsonlBackend(tmp_path / "root", "none").find("s")


def test_a_log_in_the_wrong_directory_is_refused(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "none")
    writer = store.create({"id": "s", "createdAt": 1, "cwd": "/a"})
    writer.append(some_events()[:1])
    writer.close()
    moved = tmp_path / "root" / "--b--"
    (tmp_path / "root" / "--a--").rename(moved)
    with pytest.raises(CorruptSessionLogError, match='is not where its header puts it: the header names session "s" '
                                                     r'\(cwd "/a"\), whose log belongs at '
                                                     r'.*/--a--/s/session\.v4\.jsonl;'):
        store.read("s")


def test_resume_continues_after_zstd_recovery(tmp_path: Path) -> None:
    """After rewriting what a cut frame yielded plus closers, new appends continue at the right seq (in the v0 file
    itself, as DSH 0.1 did and as a v0 log DSH 0.2 will not migrate is still resumed)."""
    fixture = load_fixture("damaged/zstd-truncated-last-frame-recoverable")
    root = copy_store(fixture, tmp_path / "store")
    store = JsonlBackend(root, "zstd")
    store.carry_forward = False
    loaded, writer = store.resume(fixture.session_id)
    assert writer.cursor == len(loaded.events) == 301
    last = loaded.events[-1]["time"]
    writer.append([{"type": "turn/start", "seq": 301, "time": last, "data": {"turn": 3}}])
    writer.close()
    again = store.load(fixture.session_id)
    assert len(again.events) == 303 and again.closers[-1]["type"] == "turn/end"
    assert dumps(again.events[:301]) == dumps(loaded.events)


def test_continue_live_accepts_only_a_matching_prefix(tmp_path: Path) -> None:
    store = JsonlBackend(tmp_path / "root", "none")
    events = some_events()
    writer = store.create({"id": "s", "createdAt": 1})
    writer.append(events[:4])
    writer.close()
    writer = store.continue_live("s", events)
    assert writer.cursor == 4
    writer.append(events[4:])
    writer.close()
    assert dumps(store.read("s").events) == dumps(events)
    with pytest.raises(SessionExistsError):
        store.continue_live("s", [{**events[0], "time": 1}, *events[1:]])


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        JsonlBackend(tmp_path / "file")


def test_an_id_too_long_for_a_file_name_is_refused_in_one_line(tmp_path: Path) -> None:
    """Repro: an id whose encoded directory name exceeds 255 bytes failed with ``OSError: File name too long`` (and
    the web history answered 500). SPEC §5's ``encodeSegment`` has no rule for it, so it is refused up front; ids
    DSH can write (encoded ≤ 255 bytes) stay accepted, and reading such an id simply finds nothing."""
    store = JsonlBackend(tmp_path / "root")
    longest = "a" * 255
    writer = store.create({"id": longest, "createdAt": 1})
    writer.append(some_events()[:1])
    writer.close()
    assert store.find(longest) is not None
    too_long = "é" * 52  # 52 × "~00E9" = 260 bytes
    with pytest.raises(SessionIdError) as refused:
        store.create({"id": too_long, "createdAt": 1})
    assert str(refused.value) == ("session id is too long: its directory name would be 260 bytes, and a file name "
                                  "holds at most 255")
    assert store.find(too_long) is None
    with pytest.raises(SessionNotFoundError):
        store.read(too_long)


def test_one_writer_per_id_whatever_the_working_directory(tmp_path: Path) -> None:
    """Repro: the same id created from two working directories took two locks (one per project directory), so two
    writers wrote two logs of one session and ``dsh-todo sessions`` then failed on the duplicate id."""
    store = JsonlBackend(tmp_path / "root")
    first = store.create({"id": "s", "createdAt": 1, "cwd": "/a"})
    with pytest.raises(SessionLockedError, match='session "s" is already open for writing'):
        JsonlBackend(tmp_path / "root").create({"id": "s", "createdAt": 1, "cwd": "/b"})
    first.append(some_events()[:1])
    first.close()
    assert [entry.cwd for entry in store.stored_sessions()] == ["/a"]


def test_leftover_temporary_files_are_removed_when_the_session_is_next_opened(tmp_path: Path) -> None:
    """Repro: a writer killed while replacing ``projections.json`` (or publishing a new log) left
    ``projections.json.<hex>.tmp`` files that nothing ever removed."""
    store = JsonlBackend(tmp_path / "root")
    writer = store.create({"id": "s", "createdAt": 1, "cwd": "/a"})
    writer.append(some_events()[:1])
    writer.close()
    directory = next((tmp_path / "root").glob("*/s"))
    (directory / "projections.json.0123456789ab.tmp").write_text("{")
    (directory / "session.v4.jsonl.zstd.ba9876543210.tmp").write_bytes(b"x")
    (directory / "session.jsonl.zstd.ba9876543211.tmp").write_bytes(b"x")  # of a v0 writer
    (directory / "notes.txt").write_text("keep")
    _loaded, resumed = store.resume("s")
    resumed.close()
    assert sorted(p.name for p in directory.iterdir()) == ["notes.txt", "session.v4.jsonl.zstd"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_log_appended_during_every_read_is_read_as_it_stood(tmp_path: Path, compression: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro: ``dsh-todo events LOG`` on a 35 MB log whose writer appended every 30 ms printed nothing in a minute:
    a pass took longer than the writer's next append, and the reader re-read the whole file until one pass saw it
    unchanged, which never happened. Now a second pass reads only as far as the file reached when it began (a log
    only grows past that), so a reader finishes in two passes however busy the writer is."""
    from dsh_todo.harness.persistence.jsonl import reading

    backend = JsonlBackend(tmp_path / "root", compression)
    writer = backend.create({"id": "busy", "createdAt": 5, "cwd": "/busy"})
    events = some_events()
    writer.append(events)
    seq = len(events)
    passes: list[int | None] = []
    scan = reading._scan_zstd if compression == "zstd" else reading._scan_raw

    def busy_writer_meanwhile(path: Path, keep: bool, observe: Any, end: int | None = None,
                              bulk: bool = False, expand: bool = False) -> Any:
        nonlocal seq
        found = scan(path, keep, observe, end, bulk, expand)
        passes.append(end)
        writer.append(chunk_events(seq, 3))  # the writer appends while every pass is running
        seq += 3
        return found

    monkeypatch.setattr(reading, "_scan_zstd" if compression == "zstd" else "_scan_raw", busy_writer_meanwhile)
    stored = backend.read("busy")
    writer.close()
    assert len(passes) == 2 and passes[0] is None and passes[1] is not None
    assert stored.torn is None
    assert [event["seq"] for event in stored.events] == list(range(len(events) + 3))  # as it stood at pass two
