"""The persistence contract, once per registered backend and variant (raw JSONL, zstd JSONL, PostgreSQL, memory),
through ``ctx.session_persistence``.

Every test here talks only to :class:`~dsh_todo.harness.persistence.SessionPersistence` and the standard runtime, so
a backend that drifts from the others fails the same test the others pass. The backends are the registered ones
(:mod:`dsh_todo.harness.persistence.registry`): a new backend is held to this suite by its registration alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Context
from dsh_todo.harness.persistence import (
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    SessionPersistence,
)
from dsh_todo.harness.persistence.registry import backend_plugin, backends
from dsh_todo.testing import backend_composition
from tests.conftest import BootFactory

Boot = Callable[..., Context]
PLAN = [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]


MARKS = {"pg_url": pytest.mark.postgres}
"""The marks a scratch store's fixtures put on a test (as ``tests/conftest.py`` puts them by fixture name)."""


def registered() -> list[Any]:
    """One param per registered backend and variant, marked by the fixtures its scratch store needs."""
    params = []
    for short in backends():
        plugin = backend_plugin(short)
        marks = [MARKS[need] for need in plugin.NEEDS if need in MARKS]
        params += [pytest.param((short, variant), id=variant or short, marks=marks) for variant in plugin.VARIANTS]
    return params


@pytest.fixture(params=registered())
def booter(request: pytest.FixtureRequest, tmp_path: Path, make_ctx: BootFactory) -> Boot:
    """``booter(**options) -> Context``: the standard runtime persisting to one backend's scratch store; disposed
    afterwards. Every context a test boots shares the store (one root, one schema, one in-memory backend)."""
    short, variant = request.param
    plugin = backend_plugin(short)
    config = plugin.scratch(tmp_path, request.getfixturevalue, variant)

    def make(batch_delay_ms: int = 200) -> Context:
        return make_ctx(backend_composition(short, config(batch_delay_ms)))

    return make


def persistence(ctx: Context) -> SessionPersistence:
    return ctx.session_persistence


def one_turn(ctx: Context, session_id: str, *, close: bool = True, turn: int = 1) -> None:
    session = ctx.sessions.get(session_id) or ctx.sessions.create(session_id, cwd="/w")
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("todo/write", {"todos": PLAN})
    session.append("step/end", {"turn": turn, "step": 1})
    if close:
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def test_appends_are_durable_after_flush_and_read_back_exactly(booter: Boot) -> None:
    writer = booter(batch_delay_ms=60_000)
    one_turn(writer, "s")
    persistence(writer).flush()
    reader = booter()
    stored = persistence(reader).read("s")
    assert [event["type"] for event in stored.events] == ["turn/start", "step/start", "todo/write", "step/end",
                                                         "turn/end"]
    assert stored.events == list(writer.sessions.get("s").events)  # type: ignore[union-attr]
    assert stored.torn is None and stored.session_id == "s" and stored.meta["cwd"] == "/w"
    assert persistence(reader).locate("s") is not None and persistence(reader).locate("nope") is None
    assert [entry.id for entry in persistence(reader).stored_sessions()] == ["s"]


def test_one_writer_per_session_and_closing_releases_it(booter: Boot) -> None:
    first, second = booter(), booter()
    one_turn(first, "s", close=False)
    persistence(first).flush()
    with pytest.raises(SessionLockedError):
        second.sessions.create("s", cwd="/w")
    assert second.sessions.get("s") is None
    with pytest.raises(SessionLockedError):
        persistence(second).load("s")
    first.sessions.close("s")  # flushes and unlocks
    loaded = persistence(second).load("s")
    assert loaded.seq == 6  # four events, the interrupted turn's end, the end of the seed


def test_load_closes_an_interrupted_turn_and_marks_the_end_of_the_seed(booter: Boot) -> None:
    writer = booter()
    one_turn(writer, "s", close=False)
    writer.dispose()  # the turn is still open, as a crash leaves it
    loaded = persistence(booter()).load("s")
    kinds = [event["type"] for event in loaded.events]
    assert kinds[4:] == ["turn/end", "session/end-seed"]
    assert loaded.events[4]["data"]["reason"] == {"kind": "interrupted"}
    assert booter().session_projections.snapshot(loaded)["values"]["todos"] == PLAN


def test_a_second_load_changes_nothing(booter: Boot) -> None:
    writer = booter()
    one_turn(writer, "s")
    writer.dispose()
    first = booter()
    seq = persistence(first).load("s").seq
    first.dispose()
    again = booter()
    assert persistence(again).load("s").seq == seq
    assert len(persistence(again).read("s").events) == seq


def test_loaded_sessions_keep_being_persisted(booter: Boot) -> None:
    writer = booter()
    one_turn(writer, "s")
    writer.dispose()
    ctx = booter()
    session = persistence(ctx).load("s")
    one_turn(ctx, "s", turn=2)
    ctx.dispose()
    stored = persistence(booter()).read("s").events
    assert [event["seq"] for event in stored] == list(range(session.seq))
    assert stored[-1]["type"] == "turn/end" and stored[-1]["data"]["turn"] == 2


def test_missing_and_existing_sessions(booter: Boot) -> None:
    ctx = booter()
    with pytest.raises(SessionNotFoundError):
        persistence(ctx).load("missing")
    with pytest.raises(SessionNotFoundError):
        persistence(ctx).read("missing")
    one_turn(ctx, "s")
    ctx.sessions.close("s")
    other = booter()
    with pytest.raises(SessionExistsError):
        other.sessions.create("s", cwd="/w")


def test_unknown_event_types_are_refused_unless_ignorable(booter: Boot) -> None:
    writer = booter()
    session = writer.sessions.create("s", cwd="/w")
    session.append("turn/start", {"turn": 1})
    session.append("future/widget", {"x": 1})
    writer.dispose()
    reader = booter()
    with pytest.raises(SessionFormatUnsupportedError, match='event type "future/widget" \\(seq 1\\) unknown'):
        persistence(reader).read("s")
    with pytest.raises(SessionFormatUnsupportedError):
        persistence(reader).load("s")


def test_checkpoints_restore_cold_projections_from_the_tail(booter: Boot) -> None:
    ctx = booter(batch_delay_ms=60_000)
    one_turn(ctx, "s")
    session = ctx.sessions.get("s")
    assert session is not None
    session.append("turn/start", {"turn": 2})
    session.append("todo/write", {"todos": []})
    ctx.sessions.close("s")  # closing checkpoints the last event
    found = persistence(ctx).backend.read_checkpointed("s")
    assert found is not None
    assert found.rows == {"todos": {"ver": 2, "seq": 6, "val": []}}
    assert found.base <= 7 and all(event["seq"] >= found.base for event in found.tail)
    cold = booter()
    restored = cold.get("session_projection_cache").restore("s")
    assert restored.snapshot == {"asOfSeq": 6, "values": {"todos": []}}


def test_written_batches_are_announced_with_their_seqs(booter: Boot) -> None:
    ctx = booter(batch_delay_ms=60_000)
    heard: list[tuple[str, int, int]] = []
    persistence(ctx).on_written(lambda sid, batch: heard.append((sid, batch.first_seq, batch.last_seq)))
    one_turn(ctx, "s")
    persistence(ctx).flush()
    assert heard[-1] == ("s", 0, 4)


def test_followers_get_what_is_stored_then_each_new_batch_in_order(booter: Boot) -> None:
    writer = booter(batch_delay_ms=60_000)
    one_turn(writer, "s", close=False)
    persistence(writer).flush()
    reader = booter()
    seen: dict[str, list[int]] = {"s": [], "later": []}
    done = threading.Event()

    def follower(session_id: str) -> Callable[[Sequence[Any]], None]:
        def on_events(events: Sequence[Any]) -> None:
            seen[session_id] += [event["seq"] for event in events]
            if seen["s"][-1:] == [5] and seen["later"][-1:] == [0]:
                done.set()
        return on_events

    subscriptions = [persistence(reader).follow("s", 1, follower("s")),
                     persistence(reader).follow("later", -1, follower("later"))]  # not stored yet
    assert seen == {"s": [2, 3], "later": []}  # what is stored is handed over before follow returns
    session = writer.sessions.get("s")
    assert session is not None
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    persistence(writer).flush()
    session.append("turn/start", {"turn": 2})
    writer.sessions.create("later", cwd="/w").append("turn/start", {"turn": 1})
    persistence(writer).flush()
    assert done.wait(10), seen
    for subscription in subscriptions:
        subscription.close()
    assert seen == {"s": [2, 3, 4, 5], "later": [0]}


def test_a_follower_of_a_log_the_reader_refuses_gets_the_readers_refusal(booter: Boot) -> None:
    """Repro: PostgreSQL's feed handed a follower the events of a log holding an unknown event type (not marked
    ``ignorable``), where the file and memory backends refuse it with the reader's words, as the contract says."""
    writer = booter(batch_delay_ms=60_000)
    session = writer.sessions.create("s", cwd="/w")
    session.append("turn/start", {"turn": 1})
    session.append("future/thing", {})
    persistence(writer).flush()
    reader = booter()
    seen: list[Any] = []
    with pytest.raises(SessionFormatUnsupportedError) as refused:
        persistence(reader).follow("s", -1, seen.append)
    assert seen == []
    with pytest.raises(SessionFormatUnsupportedError) as read:
        persistence(reader).read("s")
    assert str(refused.value) == str(read.value)


def test_a_follower_that_fails_or_is_refused_is_said_once_and_the_feed_goes_on(
        booter: Boot, caplog: pytest.LogCaptureFixture) -> None:
    """Every backend's follower is one :class:`~dsh_todo.harness.persistence.followers.Follower`: a callback that
    raises is logged and handed the next run all the same; a log that turns refused is one warning while it stays so."""
    writer = booter(batch_delay_ms=60_000)
    session = writer.sessions.create("s", cwd="/w")
    session.append("turn/start", {"turn": 1})
    persistence(writer).flush()
    reader = booter()
    seen: list[int] = []
    grown = threading.Event()

    def on_events(events: Sequence[Any]) -> None:
        seen.extend(event["seq"] for event in events)
        if seen[-1] == 1:
            grown.set()
        if len(seen) == 1:
            raise RuntimeError("a follower failing")

    subscription = persistence(reader).follow("s", -1, on_events)
    session.append("todo/write", {"todos": PLAN})
    persistence(writer).flush()
    assert grown.wait(10), seen
    for _ in range(2):
        session.append("future/thing", {})
        persistence(writer).flush()
        time.sleep(0.5)
    subscription.close()
    assert seen == [0, 1]
    failed = [r for r in caplog.records if r.getMessage().startswith("a follower of session 's' failed on seq 0..0")]
    refused = [r for r in caplog.records if r.getMessage().startswith("cannot follow session 's': session \"s\" "
                                                                          'contains event type "future/thing" (seq 2)')]
    assert (len(failed), len(refused)) == (1, 1), [r.getMessage() for r in caplog.records]
