"""The in-memory backend's own promises, beyond the contract suite it runs with the others: it is as strict as a
file (same encoder, same refusals, nothing shared with the caller), one writer per session within one backend, its
followers fed on the appending thread, and a plugin a composition names like the other two."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import boot
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.persistence import (
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
)
from dsh_todo.harness.persistence import memory as plugin
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.memory import MemoryBackend
from dsh_todo.standard import composition
from dsh_todo.testing import memory_log_composition


def event(seq: int, data: Any = None, kind: str = "turn/start") -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": 1000 + seq, "data": {"turn": 1} if data is None else data}


def test_stored_events_are_copies_the_caller_cannot_reach() -> None:
    backend = MemoryBackend()
    writer = backend.create({"id": "s", "createdAt": 1, "cwd": "/w"})
    data: dict[str, Any] = {"turn": 1, "list": [1]}
    writer.append([event(0, data)])
    data["list"].append(2)
    first = backend.read("s").events
    first[0]["data"]["turn"] = 99
    assert backend.read("s").events == [event(0, {"turn": 1, "list": [1]})]
    assert backend.read("s").meta == {"version": 4, "id": "s", "createdAt": 1, "cwd": "/w", "isSeeded": False,
                                      "delegationDepth": 0}


def test_a_new_log_has_the_format_a_file_gets(tmp_path: Path) -> None:
    """A new session's header is format v4 in every store, as in a file, unless v0 is asked for. Repro before: the
    whole-log stores (memory, PostgreSQL) headed a new log ``version: 0`` while its session wrote v4 tool results
    into it, and a dead writer's turn was closed there with v0 closers, in a file with v4 ones."""
    metas = []
    for version in (None, 0):
        asked = {} if version is None else {"version": version}
        for backend in (JsonlBackend(tmp_path / f"v{version}", "none"), MemoryBackend()):
            backend.create({"id": "s", "createdAt": 1, **asked}).append([event(0)])
            metas.append(backend.read("s").meta)
    assert metas == [{"version": 4, "id": "s", "createdAt": 1, "isSeeded": False, "delegationDepth": 0}] * 2 + [
        {"version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}] * 2


@pytest.mark.parametrize("bad", [{1, 2}, object(), b"bytes"], ids=["set", "object", "bytes"])
def test_what_a_file_refuses_is_refused_at_append_with_its_words_and_nothing_is_stored(tmp_path: Path,
                                                                                        bad: Any) -> None:
    refusals = []
    for backend in (JsonlBackend(tmp_path, "none"), MemoryBackend()):
        writer = backend.create({"id": "s", "createdAt": 1})
        with pytest.raises(Exception) as caught:
            writer.append([event(0), event(1, {"v": bad})])
        refusals.append((type(caught.value), str(caught.value)))
        assert writer.cursor == 0 and backend.locate("s") is None  # the whole batch, or nothing
        writer.append([event(0)])
        assert [e["seq"] for e in backend.read("s").events] == [0]
    assert refusals[0] == refusals[1]


def test_what_a_file_changes_in_encoding_comes_back_changed_the_same_way(tmp_path: Path) -> None:
    lossy = {1: (1, 2), "big": 2**70, "lone": "\ud800", "float": 1.0}
    read = []
    for backend in (JsonlBackend(tmp_path, "none"), MemoryBackend()):
        backend.create({"id": "s", "createdAt": 1}).append([event(0, lossy)])
        read.append(backend.read("s").events)
    assert read[0] == read[1] == [event(0, {"1": [1, 2], "big": 2**70, "lone": "\ud800", "float": 1.0})]


def test_one_writer_per_session_within_a_backend() -> None:
    backend = MemoryBackend()
    first = backend.create({"id": "s", "createdAt": 1})
    assert backend.writer_alive("s") and not backend.writer_alive("t")
    with pytest.raises(SessionLockedError, match=r'^session "s" is already open for writing by process \d+ '
                                                 r"\(lock: memory\); a session log takes one writer at a time$"):
        backend.create({"id": "s", "createdAt": 1})
    first.append([event(0)])
    with pytest.raises(SessionLockedError) as caught:
        backend.resume("s")
    assert caught.value.holder_pid is not None
    first.close()
    first.close()  # idempotent
    assert not backend.writer_alive("s")
    with pytest.raises(RuntimeError, match='the writer of session "s" is closed'):
        first.append([event(1)])
    with pytest.raises(SessionExistsError, match=r'^session "s" already has a log in memory; load it'):
        backend.create({"id": "s", "createdAt": 1})
    loaded, second = backend.resume("s")
    assert loaded.kept == 1 and [e["type"] for e in loaded.closers] == ["turn/end"]
    second.close()
    assert MemoryBackend().writer_alive("s") is False  # another backend is another store


def test_appends_must_continue_the_seq_with_the_file_writers_words() -> None:
    writer = MemoryBackend().create({"id": "s", "createdAt": 1})
    with pytest.raises(ValueError, match=r'^append seq mismatch for "s": expected 1 at index 1, got 5$'):
        writer.append([event(0), event(5)])


def test_reads_of_what_is_not_stored_and_listing_order() -> None:
    backend = MemoryBackend()
    with pytest.raises(SessionNotFoundError, match=r'^session "x" has no stored log in memory$'):
        backend.read("x")
    with pytest.raises(SessionNotFoundError):
        backend.resume("x")
    backend.create({"id": "b", "createdAt": 2}).append([event(0)])
    backend.create({"id": "a", "createdAt": 2, "cwd": "/w"}).append([event(0)])
    backend.create({"id": "c", "createdAt": 1}).append([event(0)])
    backend.create({"id": "never-written", "createdAt": 0}).close()
    assert [(s.id, s.cwd, s.location) for s in backend.stored_sessions()] == [
        ("c", None, "memory"), ("a", "/w", "memory"), ("b", None, "memory")]


def test_followers_are_fed_in_order_never_concurrently_even_when_they_append() -> None:
    backend = MemoryBackend()
    writer = backend.create({"id": "s", "createdAt": 1})
    writer.append([event(0)])
    runs: list[list[int]] = []
    inside = threading.Lock()

    def on_events(events: Sequence[Mapping[str, Any]]) -> None:
        assert inside.acquire(blocking=False), "called while a call was running"
        try:
            runs.append([e["seq"] for e in events])
            if events[-1]["seq"] == 1:
                writer.append([event(2, kind="step/start", data={"turn": 1, "step": 1})])  # re-entering the feed
        finally:
            inside.release()

    subscription = backend.follow("s", -1, on_events)
    assert runs == [[0]]
    writer.append([event(1, kind="todo/write", data={"todos": []})])
    assert runs == [[0], [1], [2]]  # the callback's own append comes after it returned
    subscription.close()
    writer.append([event(3, kind="step/end", data={"turn": 1, "step": 1})])
    assert runs == [[0], [1], [2]]


def test_a_follower_is_refused_an_unknown_event_type_with_the_readers_words() -> None:
    backend = MemoryBackend()
    writer = backend.create({"id": "s", "createdAt": 1})
    writer.append([event(0), event(1, kind="future/widget", data={})])
    with pytest.raises(SessionFormatUnsupportedError, match=r'"future/widget" \(seq 1\) unknown.*\(raw log: memory\)'):
        backend.follow("s", -1, lambda events: None)
    later: list[int] = []
    subscription = backend.follow("s", 1, lambda events: later.extend(e["seq"] for e in events))
    writer.append([event(2, kind="future/gadget", data={}), ])
    writer.append([event(3, kind="future/gadget", data={}) | {"ignorable": True}])
    assert later == []  # refused (said once in the log), never handed over
    subscription.close()


def test_checkpoints_never_lead_the_log_nor_go_back() -> None:
    backend = MemoryBackend()
    writer = backend.create({"id": "s", "createdAt": 1})
    writer.append([event(0), event(1, kind="turn/end", data={"turn": 1, "reason": {"kind": "completed"}})])
    batch = writer.last_batch
    assert batch is not None
    rows = {"todos": {"ver": 1, "seq": 1, "val": []}}
    backend.write_checkpoint("s", {}, {"todos": {"ver": 1, "seq": 5, "val": []}}, 5, batch)  # ahead of the log
    assert backend.read_checkpointed("s") is None
    backend.write_checkpoint("s", {}, rows, 1, batch)
    backend.write_checkpoint("s", {}, {"todos": {"ver": 1, "seq": 0, "val": ["old"]}}, 0, batch)  # behind it
    rows["todos"]["val"] = ["changed after"]
    found = backend.read_checkpointed("s")
    assert found is not None and found.rows == {"todos": {"ver": 1, "seq": 1, "val": []}}
    assert found.base == 2 and found.tail == []


def test_the_plugin_config_and_the_composition() -> None:
    assert plugin.name == "@deepseek-ai/dsh-session-persistence-memory" and plugin.inject == ["sessions"]
    assert not hasattr(plugin, "default")
    shared = MemoryBackend()
    assert plugin.Config.parse(None) == plugin.Config()
    assert plugin.Config.parse({"backend": shared, "writeBatchMaxDelayMs": 5}) == plugin.Config(shared, 5)
    for bad in ({"backend": "memory"}, {"root": "/r"}, {"writeBatchMaxDelayMs": 0}, []):
        with pytest.raises(ConfigError):
            plugin.Config.parse(bad)
    rows = memory_log_composition(shared, batch_delay_ms=5)
    standard = composition("/r")
    assert [row["name"] for row in rows] == [row["name"].replace("-jsonl", "-memory") for row in standard]
    for _ in range(2):  # two boots, one store: the second loads what the first wrote
        ctx = boot(rows)
        session = ctx.session_persistence.load("s") if shared.locate("s") else ctx.sessions.create("s")
        session.append("turn/start", {"turn": 1})
        ctx.dispose()
    assert [e["type"] for e in shared.read("s").events] == ["turn/start", "turn/end", "session/end-seed",
                                                             "turn/start"]
    ctx = boot(memory_log_composition())  # a backend of its own
    assert ctx.session_persistence.stored_sessions() == []
    ctx.dispose()
