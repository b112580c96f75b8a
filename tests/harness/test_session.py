"""The session log (SPEC §5.3, §5.4) and the ``todo/write`` event tests of ``session.spec.ts`` (SPEC §11.6)."""

from __future__ import annotations

import gc
import logging
import weakref
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Session, SessionStore
from dsh_todo.harness.session import SURFACE_EVENT_TYPES, Event, SessionAppendError
from dsh_todo.standard import open_runtime
from dsh_todo.tool_todo.projection import TODOS_UNIT
from dsh_todo.tool_todo.rules import standing_plan
from tests.conftest import BootFactory, todo_writes

REENTER = "session append cannot reenter while another append is being published"


def item(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


@pytest.fixture
def store() -> SessionStore:
    return SessionStore()


def test_an_append_keeps_its_own_copy(store: SessionStore) -> None:
    session = store.create("s")
    todos = [item("a")]
    data = {"todos": todos}
    session.append("todo/write", data)
    todos.append(item("b"))
    todos[0]["status"] = "completed"
    data["todos"] = []
    assert session.events[0]["data"] == {"todos": [item("a")]}


def test_the_logged_list_and_its_items_are_frozen(store: SessionStore) -> None:
    session = store.create("s")
    event = session.append("todo/write", {"todos": [item("a")]})
    logged = session.events[0]["data"]["todos"]
    attempts = [
        lambda: logged.append(item("b")),
        lambda: logged.extend([item("b")]),
        lambda: logged.insert(0, item("b")),
        lambda: logged.pop(),
        lambda: logged.remove(logged[0]),
        lambda: logged.clear(),
        lambda: logged.sort(),
        lambda: logged.reverse(),
        lambda: logged.__setitem__(0, item("b")),
        lambda: logged.__delitem__(0),
        lambda: logged.__iadd__([item("b")]),
        lambda: logged[0].__setitem__("content", "changed"),
        lambda: logged[0].__delitem__("status"),
        lambda: logged[0].update(content="changed"),
        lambda: logged[0].pop("content"),
        lambda: logged[0].setdefault("extra", 1),
        lambda: logged[0].clear(),
        lambda: event["data"].__setitem__("todos", []),
        lambda: event.__setitem__("seq", 9),
        lambda: event.__delitem__("time"),
    ]
    for attempt in attempts:
        with pytest.raises(TypeError):
            attempt()
    assert session.events[0]["data"] == {"todos": [item("a")]}
    assert session.events[0] is event


def test_the_event_log_cannot_be_changed_through_session_events(store: SessionStore) -> None:
    session = store.create("s")
    session.append("todo/write", {"todos": []})
    events: Any = session.events
    assert not hasattr(events, "append")
    with pytest.raises(TypeError):
        events[0] = {"type": "x"}
    with pytest.raises(TypeError):
        del events[0]
    sliced = events[0:1]
    assert isinstance(sliced, tuple)
    assert session.seq == 1


def test_copies_of_frozen_data_are_plain_and_mutable(store: SessionStore) -> None:
    import copy

    session = store.create("s")
    event = session.append("todo/write", {"todos": [item("a")]})
    thawed = copy.deepcopy(event["data"])
    thawed["todos"][0]["status"] = "completed"
    thawed["todos"].append(item("b"))
    assert event["data"] == {"todos": [item("a")]}


def test_last_write_wins(store: SessionStore) -> None:
    session = store.create("s")
    session.append("todo/write", {"todos": [item("first")]})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("todo/write", {"todos": [item("second", "in_progress")]})
    session.append("step/end", {"turn": 1, "step": 1})
    assert todo_writes(session)[-1] == [item("second", "in_progress")]
    assert standing_plan(session.events) == [item("second", "in_progress")]
    session.append("turn/start", {"turn": 2})
    assert standing_plan(session.events) is None
    assert todo_writes(session)[-1] == [item("second", "in_progress")]


def test_todo_write_is_not_a_surface_event(store: SessionStore) -> None:
    session = store.create("s")
    assert "todo/write" not in SURFACE_EVENT_TYPES
    session.append("user/message", {"message": {"role": "user", "content": "hi"}}, surface_op="append")
    event = session.append("todo/write", {"todos": [item("a")]})
    assert "surfaceOp" not in event and "sourceEventSeqs" not in event and "ignorable" not in event
    assert list(event) == ["type", "seq", "time", "data"]
    surface = [e["seq"] for e in session.events if "surfaceOp" in e]
    assert surface == [0]
    with pytest.raises(SessionAppendError) as caught:
        session.append("todo/write", {"todos": []}, surface_op="append")
    assert str(caught.value) == 'session event "todo/write" is not surface-eligible and cannot carry surfaceOp'
    assert session.seq == 2


@pytest.mark.parametrize("event_type", sorted(SURFACE_EVENT_TYPES))
def test_surface_events_must_carry_surface_op(store: SessionStore, event_type: str) -> None:
    session = store.create("s")
    with pytest.raises(SessionAppendError) as caught:
        session.append(event_type, {})
    assert str(caught.value) == f'session event "{event_type}" is surface-eligible and must carry surfaceOp'
    event = session.append(event_type, {}, surface_op="append", source_event_seqs=[])
    assert list(event) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]


def test_envelope_shape_and_seq(store: SessionStore) -> None:
    clock = iter([1000, 999, 1234])
    session = Session("s", clock=lambda: next(clock))
    for n in range(3):
        event = session.append("todo/write", {"todos": [item(f"t{n}")]})
        assert event["seq"] == n
    assert [e["time"] for e in session.events] == [1000, 999, 1234]
    assert session.seq == 3
    assert session.events[1] == {"type": "todo/write", "seq": 1, "time": 999, "data": {"todos": [item("t1")]}}


def test_replay_round_trip(store: SessionStore) -> None:
    original = store.create("orig")
    original.append("turn/start", {"turn": 1})
    original.append("todo/write", {"todos": [item("a", "in_progress"), item("b")]})
    original.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    replayed = Session("orig")
    replayed.restore([dict(event) for event in original.events])
    assert list(replayed.events) == list(original.events)
    assert [e["data"] for e in replayed.events] == [e["data"] for e in original.events]
    assert TODOS_UNIT.fold(replayed.events) == TODOS_UNIT.fold(original.events) == [item("a", "in_progress"),
                                                                                     item("b")]
    first_live = replayed.append("turn/start", {"turn": 2})
    assert first_live["seq"] == original.seq
    with pytest.raises(TypeError):
        replayed.events[1]["data"]["todos"].append(item("c"))


def test_restore_needs_an_empty_log_and_contiguous_seqs(store: SessionStore) -> None:
    session = Session("s")
    with pytest.raises(SessionAppendError) as caught:
        session.restore([{"type": "turn/start", "seq": 1, "time": 0, "data": {"turn": 1}}])
    assert str(caught.value) == "restored event 0 has seq 1"
    session = store.create("t")
    session.append("turn/start", {"turn": 1})
    with pytest.raises(SessionAppendError) as caught:
        session.restore([])
    assert str(caught.value) == 'session "t" already has events; restore needs an empty log'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.0, {1: "x"}, {"a": {1, 2}}, b"bytes", object()],
                         ids=["nan", "inf", "negative-zero", "int-key", "set", "bytes", "object"])
def test_data_that_is_not_lossless_json_is_refused(store: SessionStore, bad: Any) -> None:
    session = store.create("s")
    with pytest.raises(SessionAppendError) as caught:
        session.append("custom/x", {"value": bad})
    assert str(caught.value).startswith('session event "custom/x" data is not lossless JSON: ')
    assert session.seq == 0


def test_bad_event_types_are_refused(store: SessionStore) -> None:
    session = store.create("s")
    for bad in ("", None, 3):
        with pytest.raises(SessionAppendError) as caught:
            session.append(bad, {})  # type: ignore[arg-type]
        assert str(caught.value) == "session event type must be a non-empty string"
    assert session.seq == 0


def test_reentering_append_from_a_listener_is_refused(store: SessionStore) -> None:
    session = store.create("s")
    seen: list[str] = []

    def listener(s: Session, event: Event) -> None:
        if event["type"] == "todo/write":
            try:
                s.append("custom/echo", {})
            except SessionAppendError as exc:
                seen.append(str(exc))

    store.listen(listener)
    session.append("todo/write", {"todos": []})
    assert seen == [REENTER]
    assert [e["type"] for e in session.events] == ["todo/write"]
    session.append("custom/after", {})
    assert session.seq == 2


def test_reentering_append_from_an_observer_vetoes_the_outer_append(store: SessionStore) -> None:
    session = store.create("s")

    def observer(s: Session, event: Event) -> None:
        s.append("custom/echo", {})

    stop = store.observe(observer)
    with pytest.raises(SessionAppendError) as caught:
        session.append("todo/write", {"todos": []})
    assert str(caught.value) == REENTER
    assert session.seq == 0
    stop()
    session.append("todo/write", {"todos": []})
    assert session.seq == 1


def test_an_observer_veto_leaves_the_log_unchanged(store: SessionStore) -> None:
    session = store.create("s")
    heard: list[int] = []
    store.listen(lambda s, e: heard.append(e["seq"]))

    def veto(s: Session, event: Event) -> None:
        if event["type"] == "todo/write":
            raise RuntimeError("no")

    store.observe(veto)
    with pytest.raises(RuntimeError):
        session.append("todo/write", {"todos": []})
    assert session.seq == 0 and heard == []
    session.append("turn/start", {"turn": 1})
    assert heard == [0]


def test_a_failing_listener_cannot_undo_the_append(store: SessionStore, caplog: pytest.LogCaptureFixture) -> None:
    session = store.create("s")
    later: list[int] = []

    def broken(s: Session, event: Event) -> None:
        raise RuntimeError("listener bug")

    store.listen(broken)
    store.listen(lambda s, e: later.append(e["seq"]))
    with caplog.at_level(logging.WARNING, logger="dsh_todo.session"):
        event = session.append("todo/write", {"todos": []})
    assert session.events[-1] is event
    assert later == [0]
    assert any("listener failed" in record.getMessage() for record in caplog.records)


def test_store_identity_and_lifecycle(store: SessionStore) -> None:
    session = store.create("s", cwd="/tmp/project")
    assert store.get("s") is session
    assert session.cwd == "/tmp/project"
    assert isinstance(session.header["createdAt"], int)
    with pytest.raises(ValueError) as caught:
        store.create("s")
    assert str(caught.value) == 'session "s" already exists'
    opened: list[str] = []
    store.on_open(lambda s: opened.append(s.id))
    store.create("t")
    assert opened == ["t"]
    store.close("s")
    assert store.get("s") is None
    with pytest.raises(SessionAppendError) as closed:
        session.append("turn/start", {"turn": 1})
    assert str(closed.value) == 'session "s" is closed'


def test_session_id_must_be_a_non_empty_string() -> None:
    with pytest.raises(ValueError):
        Session("")


def test_sessions_service_through_boot(make_ctx: BootFactory) -> None:
    ctx = make_ctx(tool=False, projections=False)
    session = ctx.sessions.create("s")
    assert ctx.sessions.list() == [session]


def nested_lists(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_data_as_deep_as_a_log_line_allows_is_logged_and_reads_back(tmp_path: Any) -> None:
    """Repro: ``session.append(type, data)`` with data nested ~500 levels raised ``RecursionError`` out of the copy
    (two frames a level), and data nested deeper than the reader's bound was written, making the whole log unreadable
    (``corrupt session log: … nests deeper than 512 levels``). Now anything up to ``MAX_DATA_DEPTH`` is copied
    (without recursion when it must be) and reads back; anything deeper is refused and nothing is appended."""
    from dsh_todo.harness.frozen import MAX_DATA_DEPTH
    from dsh_todo.logview import read_session
    from dsh_todo.standard import open_runtime

    ctx = open_runtime(tmp_path)
    try:
        session = ctx.sessions.create("deep", cwd="/srv/deep")
        deepest = {"v": nested_lists(MAX_DATA_DEPTH - 1)}  # the object plus the lists: exactly MAX_DATA_DEPTH
        event = session.append("assistant/chunk", deepest)
        assert event["data"] == deepest
        with pytest.raises(TypeError):
            event["data"]["v"].append(1)
        for too_deep in ({"v": nested_lists(MAX_DATA_DEPTH)}, {"v": nested_lists(100_000)}):
            with pytest.raises(SessionAppendError, match=f"nests deeper than {MAX_DATA_DEPTH} levels"):
                session.append("assistant/chunk", too_deep)
        assert session.seq == 1
        ctx.session_persistence.flush()
        log = ctx.session_persistence.locate("deep")
    finally:
        ctx.dispose()
    view = read_session(log)
    assert view.health.state == "ok", view.health.reason
    assert view.events[-1]["data"] == deepest


@pytest.mark.parametrize("persisted", [False, True])
def test_disposing_the_runtime_frees_its_sessions_without_a_collection(persisted: bool, tmp_path: Path) -> None:
    """Repro: ``open_runtime``, a session with events, ``ctx.dispose()``, every reference dropped, with the cycle
    collector off (as in a process that only reads logs afterwards): the session and its events stayed in memory,
    held by the store that held it, which it held (a benchmark that wrote 1M events kept 1 GB for its whole run)."""
    ctx = open_runtime(tmp_path if persisted else None)
    session = ctx.sessions.create("s1", cwd="/w")
    session.append("turn/start", {"turn": 1})
    gone = weakref.ref(session)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        ctx.dispose()
        del ctx, session
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()


def test_a_session_held_after_the_runtime_is_disposed_can_still_be_read() -> None:
    ctx = open_runtime(None)
    session = ctx.sessions.create("s1", cwd="/w")
    session.append("turn/start", {"turn": 1})
    ctx.dispose()
    assert [event["type"] for event in session.events] == ["turn/start"]


@pytest.mark.parametrize("persisted", [False, True])
def test_a_session_of_a_disposed_runtime_refuses_appends(persisted: bool, tmp_path: Path) -> None:
    """Repro: ``open_runtime(root)``, a session, ``ctx.dispose()``, then ``session.append(...)``: the append returned
    an event as if it were logged, though persistence was gone and nothing would ever write it (lost without a
    word). A disposed runtime's sessions are closed: the append is refused with the closed session's error, the log
    on disk keeps what was flushed, and the session can still be read."""
    ctx = open_runtime(tmp_path if persisted else None)
    session = ctx.sessions.create("s1", cwd="/w")
    session.append("turn/start", {"turn": 1})
    log = ctx.session_persistence.locate("s1") if persisted else None
    ctx.dispose()
    assert session.closed
    with pytest.raises(SessionAppendError) as refused:
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert str(refused.value) == 'session "s1" is closed'
    assert [event["type"] for event in session.events] == ["turn/start"]
    if log is not None:
        from dsh_todo.logview import read_session

        assert [event["type"] for event in read_session(log).events] == ["turn/start"]


# -- what the append trusts (issue 24 goal 4) ---------------------------------------------------------------------


def _deep_chain(levels: int) -> Any:
    from dsh_todo.harness.frozen import frozen_object

    value: Any = frozen_object(v=1)
    for _ in range(levels - 1):
        value = frozen_object(v=value)
    return value


def _bad_frozen() -> list[tuple[str, Any, str]]:
    from dsh_todo.harness.frozen import FrozenDict, FrozenList, frozen_object

    return [
        ("set", frozen_object(a={1, 2}), "data.a is a set, not a JSON value"),
        ("nan", frozen_object(a=float("nan")), "data.a is nan, which JSON cannot carry losslessly"),
        ("object", frozen_object(a=object()), "data.a is a object, not a JSON value"),
        ("deep inside", frozen_object(a=FrozenList([FrozenDict(b=float("inf"))])),
         "data.a[0].b is inf, which JSON cannot carry losslessly"),
        ("built directly", FrozenDict(a=b"bytes"), "data.a is a bytes, not a JSON value"),
        ("shared inside plain data", {"x": FrozenDict(a={1})}, "data.x.a is a set, not a JSON value"),
        ("too deep", _deep_chain(600), "data nests deeper than 511 levels, more than a session log line can hold"),
    ]


@pytest.mark.parametrize(("data", "text"), [case[1:] for case in _bad_frozen()], ids=[c[0] for c in _bad_frozen()])
def test_frozen_data_that_is_not_json_is_refused_at_the_append(store: SessionStore, data: Any, text: str) -> None:
    """Repro (issue 24): the append shared any ``FrozenDict`` unchecked, and ``frozen_object`` checked nothing, so a
    set, a NaN or an object entered the log and failed only on the writer thread, which re-queued the batch for
    ever (NaN was written as ``null``). Now only what a checked constructor proved is shared; anything else is
    checked here, in the caller's thread, in the append's words, and nothing is appended."""
    session = store.create("s")
    seen: list[Event] = []
    store.listen(lambda _session, event: seen.append(event))
    with pytest.raises(SessionAppendError) as caught:
        session.append("custom/x", data)
    assert str(caught.value) == f'session event "custom/x" data is not lossless JSON: {text}'
    assert session.seq == 0 and seen == []


def test_what_the_checked_constructors_built_is_shared_and_the_rest_is_copied(store: SessionStore) -> None:
    """The fast path stays: data built by ``frozen_object``/``frozen_array`` from JSON values and checked
    containers is logged as it is (no copy); a frozen container nobody checked is logged as a checked copy."""
    from dsh_todo.harness.frozen import FrozenDict, frozen_array, frozen_object

    session = store.create("s")
    items = frozen_array([frozen_object(content="a", status="pending"), 1, 2.5, None, True])
    data = frozen_object(todos=items)
    assert session.append("custom/x", data)["data"] is data
    unchecked = FrozenDict(todos=items)
    logged = session.append("custom/x", unchecked)["data"]
    assert logged == unchecked and logged is not unchecked and logged["todos"] is items


def test_a_surface_op_that_is_not_a_string_is_refused(store: SessionStore) -> None:
    session = store.create("s")
    with pytest.raises(SessionAppendError, match='session event "tool/result" surfaceOp must be a string'):
        session.append("tool/result", {}, surface_op=["append"])  # type: ignore[arg-type]
    assert session.seq == 0


def test_the_type_keyword_design_names_still_appends(store: SessionStore) -> None:
    """``session.append(type=..., data=...)`` as DESIGN.md spelled it keeps working after the parameter stopped
    shadowing the builtin: the same event as the type by position (decision 0050)."""
    session = store.create("s")
    by_keyword = session.append(type="todo/write", data={"todos": [item("a")]})
    by_position = session.append("todo/write", {"todos": [item("a")]})
    assert (by_keyword["type"], by_keyword["data"]) == (by_position["type"], by_position["data"])
    assert [event["seq"] for event in session.events] == [0, 1]


@pytest.mark.parametrize(("args", "kwargs", "words"), [
    (("todo/write",), {}, "missing required argument: 'data'"),
    (("todo/write", {}), {"type": "todo/write"}, "the event type twice"),
    (("todo/write", {}), {"kind": "x"}, "unexpected keyword argument 'kind'"),
])
def test_append_refuses_a_malformed_call_as_python_would(store: SessionStore, args: tuple[Any, ...],
                                                         kwargs: dict[str, Any], words: str) -> None:
    session = store.create("s")
    with pytest.raises(TypeError, match=words):
        session.append(*args, **kwargs)
    assert list(session.events) == []
