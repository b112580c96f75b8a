"""The plugin: live sessions are persisted in batches, stored ones load back into ``sessions`` and keep going."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.context import Context, PluginHandle
from dsh_todo.harness.errors import ConfigError
from dsh_todo.harness.persistence import SessionExistsError
from dsh_todo.harness.persistence.jsonl import plugin as jsonl
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.zstd import scan_frames
from dsh_todo.harness.persistence.service import PersistenceService
from dsh_todo.harness.session import Session, SessionStore
from dsh_todo.jsonutil import dumps
from tests.harness.persistence.fixture_logs import copy_store, load_fixture, standing_plan, zstd_batch_sizes


class ScriptedClock:
    """A clock that returns given times, then keeps returning the last one."""

    def __init__(self, times: list[int]) -> None:
        self._times = iter(times)
        self._last = times[0] if times else 0

    def __call__(self) -> int:
        self._last = next(self._times, self._last)
        return self._last


def mount(root: Path, sessions: SessionStore | None = None, **config: Any) -> tuple[Context, PluginHandle]:
    ctx = Context()
    ctx.provide("sessions", sessions if sessions is not None else SessionStore())
    handle = ctx.plugin(jsonl, {"root": str(root), **config})
    return ctx, handle


def service(ctx: Context) -> PersistenceService:
    found = ctx.get("session_persistence")
    assert isinstance(found, PersistenceService)
    return found


def replay(session: Session, event: Mapping[str, Any]) -> None:
    session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                   source_event_seqs=event.get("sourceEventSeqs"), ignorable=bool(event.get("ignorable")))


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "sessions"


# -- config ---------------------------------------------------------------------------------------------------


def test_config_defaults_and_refusals() -> None:
    # No compression named: a new log takes the encoding of the root's logs (zstd in a root without any).
    assert jsonl.Config.parse({"root": "/r"}) == jsonl.Config("/r", None, 200, True)
    parsed = jsonl.Config.parse({"root": "/r", "compression": "none", "writeBatchMaxDelayMs": 5,
                                 "packChunks": False, "preparedSessionCacheSize": 3})
    assert parsed == jsonl.Config("/r", "none", 5, False)
    for bad in (None, {}, {"root": ""}, {"root": "/r", "compression": "gzip"},
                {"root": "/r", "writeBatchMaxDelayMs": 0}, {"root": "/r", "writeBatchMaxDelayMs": 1.5},
                {"root": "/r", "packChunks": "yes"}, {"root": "/r", "rot": 1}):
        with pytest.raises(ConfigError):
            jsonl.Config.parse(bad)


def test_plugin_shape() -> None:
    assert jsonl.name == "@deepseek-ai/dsh-session-persistence-jsonl"
    assert jsonl.inject == ["sessions"]
    assert not hasattr(jsonl, "default")


# -- live writing ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_live_session_reproduces_dsh_bytes(root: Path, compression: str) -> None:
    """Replaying a DSH fixture through ``Session.append`` and flushing where DSH did writes DSH's exact file (a
    session created in DSH 0.1's format v0, as the fixture is)."""
    fixture = load_fixture(f"b-three-turns/{compression}")
    original = fixture.log_file.read_bytes()
    events = fixture.expected["events"]
    header = fixture.expected["header"]
    sessions = SessionStore(clock=ScriptedClock([header["createdAt"], *(e["time"] for e in events)]))
    ctx, handle = mount(root, sessions, compression=compression, writeBatchMaxDelayMs=600_000)
    flush_after = {len(events) - 1}
    if compression == "zstd":  # DSH's write batches are the file's frames
        flush_after.update(n - 1 for n in accumulate(zstd_batch_sizes(original)))
    session = ctx.sessions.create(fixture.session_id, cwd=header["cwd"], version=0)
    for event in events:
        replay(session, event)
        if event["seq"] in flush_after:
            service(ctx).flush(session.id)
    handle.dispose()
    written = JsonlBackend(root, compression).find(fixture.session_id)  # type: ignore[arg-type]
    assert written is not None
    assert written.relative_to(root) == fixture.log_file.relative_to(fixture.folder / "store")
    assert written.read_bytes() == original


def test_batches_wait_for_the_window_and_flush_skips_it(root: Path) -> None:
    ctx, handle = mount(root, writeBatchMaxDelayMs=150)
    session = ctx.sessions.create("s", cwd="/w")
    started = time.monotonic()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    path = JsonlBackend(root).path_for("s", "/w")
    assert not path.exists()
    deadline = started + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert time.monotonic() - started >= 0.14, "the batch waited for its window"
    frames = scan_frames(path.read_bytes()).frames
    assert len(frames) == 2  # header + one batch holding both events
    session.append("step/end", {"turn": 1, "step": 1})
    service(ctx).flush("s")  # no waiting
    assert len(scan_frames(path.read_bytes()).frames) == 3
    assert [e["type"] for e in JsonlBackend(root).read("s").events] == ["turn/start", "step/start", "step/end"]
    handle.dispose()


def test_dispose_flushes_and_releases_locks(root: Path) -> None:
    sessions = SessionStore()
    ctx, handle = mount(root, sessions, writeBatchMaxDelayMs=600_000)
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    handle.dispose()
    stored = JsonlBackend(root)
    assert [e["type"] for e in stored.read("s").events] == ["turn/start"]
    assert sorted(p.name for p in stored.find("s").parent.iterdir()) == ["session.v4.jsonl.zstd"]  # type: ignore[union-attr]
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})  # no longer persisted, no error
    assert len(stored.read("s").events) == 1


def test_session_created_over_an_existing_log_is_refused(root: Path) -> None:
    ctx, handle = mount(root)
    ctx.sessions.create("s").append("turn/start", {"turn": 1})
    handle.dispose()
    ctx2, handle2 = mount(root)
    with pytest.raises(SessionExistsError, match="load it to go on with it"):
        ctx2.sessions.create("s")
    handle2.dispose()


# -- loading --------------------------------------------------------------------------------------------------


def test_load_recovers_adopts_and_keeps_persisting(tmp_path: Path) -> None:
    fixture = load_fixture("damaged/raw-torn-tail")
    root = copy_store(fixture, tmp_path / "store")
    ctx, handle = mount(root, compression="none", writeBatchMaxDelayMs=600_000)
    service(ctx).backend.carry_forward = False  # DSH 0.1's load of a v0 log, which the fixture recorded
    session = service(ctx).load(fixture.session_id)
    assert ctx.sessions.get(fixture.session_id) is session
    assert service(ctx).load(fixture.session_id) is session  # a live session is returned as it is
    recovered = fixture.expected["events"]
    assert dumps(list(session.events)[:-1]) == dumps(recovered)
    assert session.events[-1]["type"] == "session/end-seed"  # resumed like DSH: the seed ends here
    assert standing_plan(session.events) == fixture.expected["todos"]
    assert session.header["cwd"] == fixture.expected["cwd"]
    session.append("turn/start", {"turn": 4})
    assert standing_plan(session.events) is None
    handle.dispose()
    reread = JsonlBackend(root, "none").read(fixture.session_id)
    assert len(reread.events) == len(recovered) + 2
    assert reread.events[-1]["type"] == "turn/start" and reread.events[-1]["seq"] == session.seq - 1


def test_resume_appends_one_end_seed_marker_as_dsh_does(root: Path) -> None:
    """SPEC §5.4: a session built from a stored seed appends one ``session/end-seed`` (``data: {}``) unless the
    seed already ends with one. Repro before the fix: ``load`` restored the events and appended nothing, so a log
    resumed by us and by DSH in turns differed by that event."""
    ctx, handle = mount(root)
    session = ctx.sessions.create("s", cwd="/w")
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    handle.dispose()
    ctx.sessions.close("s")
    for _ in range(2):  # the second resume finds the marker already last and adds nothing
        ctx, handle = mount(root)
        resumed = service(ctx).load("s")
        assert [e["type"] for e in resumed.events] == ["turn/start", "turn/end", "session/end-seed"]
        assert resumed.events[-1]["data"] == {} and resumed.events[-1]["seq"] == 2
        handle.dispose()
        ctx.sessions.close("s")
    stored = JsonlBackend(root).read("s").events
    assert [e["type"] for e in stored] == ["turn/start", "turn/end", "session/end-seed"]


def test_remounted_persistence_continues_a_live_session(root: Path) -> None:
    sessions = SessionStore()
    ctx, handle = mount(root, sessions, writeBatchMaxDelayMs=600_000)
    session = ctx.sessions.create("s", cwd="/w")
    session.append("turn/start", {"turn": 1})
    handle.dispose()
    session.append("step/start", {"turn": 1, "step": 1})  # happens while persistence is away
    handle = ctx.plugin(jsonl, {"root": str(root), "writeBatchMaxDelayMs": 600_000})
    session.append("step/end", {"turn": 1, "step": 1})
    handle.dispose()
    assert [e["seq"] for e in JsonlBackend(root).read("s").events] == [0, 1, 2]


def test_closed_sessions_release_their_lock_on_flush(root: Path) -> None:
    ctx, handle = mount(root)
    session = ctx.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    ctx.sessions.close("s")
    service(ctx).flush()
    store = JsonlBackend(root)
    assert store.load("s").events[-1]["type"] == "turn/end"  # another writer may now take over (and repair)
    handle.dispose()
