"""The telemetry seam against a recording sink: which events become records, with what, and what never leaves."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Agent, Context, boot
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.llm import ModelReply, ScriptedModel, ToolCallRequest
from dsh_todo.harness.telemetry import Coordinator, TelemetryRecord
from dsh_todo.harness.telemetry.coordinator import Capture
from dsh_todo.standard import composition

pytestmark = pytest.mark.anyio

SEAM = {"id": "telemetry", "name": "@deepseek-ai/dsh-session-telemetry"}


class Recorder:
    """A sink that keeps what it is handed (and can be told to fail)."""

    def __init__(self) -> None:
        self.records: list[TelemetryRecord] = []
        self.fail = False

    def emit(self, record: TelemetryRecord) -> None:
        if self.fail:
            raise RuntimeError("backend down")
        self.records.append(record)

    def ledger(self) -> list[tuple[str, int]]:
        return [(str(r.attributes["event.type"]), int(r.attributes["event.seq"])) for r in self.records
                if r.channel == "ledger"]


class Capturing:
    """A plugin that mounts a coordinator over a recorder (what a backend does)."""

    def __init__(self, capture: Capture = "live") -> None:
        self.name = "test-capture"
        self.inject = ["sessions", "session_telemetry"]
        self.recorder = Recorder()
        self.capture = capture
        self.coordinator: Coordinator | None = None

    def apply(self, ctx: Context) -> None:
        coordinator = Coordinator(ctx.sessions, self.recorder, ctx.session_telemetry.rules, self.capture)
        self.coordinator = coordinator
        ctx.on_dispose(coordinator.stop)


@pytest.fixture
def contexts() -> Iterator[Callable[..., Context]]:
    booted: list[Context] = []

    def make(root: Path | None = None, *extra: dict[str, Any]) -> Context:
        ctx = boot([*composition(root, batch_delay_ms=1), SEAM, *extra])
        booted.append(ctx)
        return ctx

    yield make
    for ctx in reversed(booted):
        ctx.dispose()


def mount(ctx: Context, capture: Capture = "live") -> Recorder:
    plugin = Capturing(capture)
    ctx.plugin(plugin)
    return plugin.recorder


def todos(*items: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s} for c, s in items]}


async def test_every_event_leaves_with_its_identity_and_its_data_as_body(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    session = ctx.sessions.create("s1", cwd="/srv/project", parentSession="p0", seedLength=3)
    session.append("turn/start", {"turn": 1})
    await ctx.tools.execute("todo_write", todos(("plan", "in_progress")), Agent("a", session))
    assert sink.ledger() == [("turn/start", 0), ("todo/write", 1)]
    first = sink.records[0]
    assert first == TelemetryRecord("ledger", session.events[0]["time"], "info", {
        "session.id": "s1", "event.type": "turn/start", "event.seq": 0, "session.cwd": "/srv/project",
        "session.parent_id": "p0", "session.seed_length": 3}, {"turn": 1})
    assert sink.records[1].body == {"todos": [{"content": "plan", "status": "in_progress"}]}


async def test_a_header_without_the_facts_gives_the_identity_alone(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    ctx.sessions.create("bare").append("turn/start", {"turn": 1})
    assert dict(sink.records[0].attributes) == {"session.id": "bare", "event.type": "turn/start", "event.seq": 0}


def result(is_error: bool, version: int = 0) -> dict[str, Any]:
    """A ``tool/result``'s data in format ``version``: v0's user message wrapping a block, v4's tool-role message."""
    text = [{"type": "text", "text": "x"}]
    if version == 4:
        return {"turn": 1, "step": 1, "message": {"role": "tool", "source": {"kind": "tool", "callId": "c"},
                                                  "toolCallId": "c", "content": text, "isError": is_error, "id": "m"}}
    block = {"type": "tool-result", "toolCallId": "c", "content": text, "isError": is_error}
    return {"turn": 1, "step": 1, "message": {"source": {"kind": "tool", "callId": "c"}, "content": [block],
                                              "role": "user", "id": "m"}}


def test_severity_is_error_only_where_the_event_says_it_failed(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    session = ctx.sessions.create("sev")
    session.append("tool/result", result(True), surface_op="append")
    session.append("tool/result", result(False), surface_op="append")
    session.append("tool/result", result(True, 4), surface_op="append")
    session.append("tool/result", result(False, 4), surface_op="append")
    session.append("turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"name": "E", "message": "m"}}})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
    session.append("plugin/unheard-of", {"isError": True})
    assert [r.severity for r in sink.records] == ["error", "info", "error", "info", "error", "info", "info"]


def test_only_the_first_chunk_of_each_step_leaves(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    session = ctx.sessions.create("chunks")
    for turn, step, text in [(1, 1, "a"), (1, 1, "b"), (1, 2, "c"), (2, 1, "d"), (1, 2, "e")]:
        session.append("assistant/chunk", {"turn": turn, "step": step, "delta": text})
    assert [r.body["delta"] for r in sink.records] == ["a", "c", "d"]
    assert sink.ledger() == [("assistant/chunk", 0), ("assistant/chunk", 2), ("assistant/chunk", 3)]


def test_a_resumed_session_reports_only_what_it_appends(contexts: Callable[..., Context], tmp_path: Path) -> None:
    """The first process handed its events off; the second one's seed (with the closer recovery wrote) never
    leaves again, its ``session/end-seed`` does, and a chunk continuing the seed's open step stays dropped."""
    first = contexts(tmp_path)
    sink1 = mount(first)
    session = first.sessions.create("r1")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("assistant/chunk", {"turn": 1, "step": 1, "delta": "he"})
    first.session_persistence.flush("r1")
    first.dispose()  # the turn is left open: the next load closes it as interrupted
    assert sink1.ledger() == [("turn/start", 0), ("step/start", 1), ("assistant/chunk", 2)]
    assert [r.attributes["telemetry.op"] for r in sink1.records if r.channel == "ops"] == ["shutdown"]

    second = contexts(tmp_path)
    sink2 = mount(second)
    resumed = second.session_persistence.load("r1")
    assert [e["type"] for e in resumed.events][3:] == ["step/end", "turn/end", "session/end-seed"]
    assert resumed.events[4]["data"]["reason"] == {"kind": "interrupted"}
    resumed.append("assistant/chunk", {"turn": 1, "step": 1, "delta": "llo"})
    resumed.append("turn/start", {"turn": 2})
    assert sink2.ledger() == [("session/end-seed", 5), ("turn/start", 7)]


def test_a_remounted_backend_resumes_after_what_was_handed_off(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    plugin = Capturing()
    handle = ctx.plugin(plugin)
    session = ctx.sessions.create("cursor")
    session.append("turn/start", {"turn": 1})
    handle.dispose()
    session.append("step/start", {"turn": 1, "step": 1})  # logged while no backend listened
    again = mount(ctx)
    session.append("step/end", {"turn": 1, "step": 1})
    assert again.ledger() == [("step/start", 1), ("step/end", 2)]


def test_on_demand_capture_hands_over_a_prefix_at_a_time(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    plugin = Capturing("on-demand")
    ctx.plugin(plugin)
    session = ctx.sessions.create("od")
    for turn in (1, 2, 3):
        session.append("turn/start", {"turn": turn})
    assert plugin.recorder.records == []
    assert plugin.coordinator is not None
    plugin.coordinator.capture_session(session, 1)
    assert plugin.recorder.ledger() == [("turn/start", 0), ("turn/start", 1)]
    plugin.coordinator.capture_session(session)
    assert plugin.recorder.ledger() == [("turn/start", 0), ("turn/start", 1), ("turn/start", 2)]
    session.append("turn/start", {"turn": 4})
    ctx.sessions.close("od")
    assert plugin.recorder.ledger()[-1] == ("turn/start", 2)  # nothing followed, no shutdown record
    assert all(r.channel == "ledger" for r in plugin.recorder.records)


def test_a_redact_rule_changes_what_leaves_and_never_the_log(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    secret = "sk-0123456789"
    ctx.session_telemetry.rule(lambda record, next: next()._replace(
        body={"text": str(next().body.get("text", "")).replace(secret, "[REDACTED]")}))
    session = ctx.sessions.create("red")
    session.append("feedback/record", {"text": f"my key is {secret}"})
    assert sink.records[0].body == {"text": "my key is [REDACTED]"}
    assert session.events[0]["data"] == {"text": f"my key is {secret}"}


def test_rules_stack_first_added_outermost(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    order: list[str] = []

    def outer(record: TelemetryRecord, next: Callable[[], TelemetryRecord]) -> TelemetryRecord:
        order.append("outer-before")
        inner_record = next()
        order.append("outer-after")
        return inner_record._replace(attributes={**inner_record.attributes, "outer": 1})

    def inner(record: TelemetryRecord, next: Callable[[], TelemetryRecord]) -> TelemetryRecord:
        order.append("inner")
        return next()._replace(attributes={**next().attributes, "inner": 1})

    ctx.session_telemetry.rule(outer)
    ctx.session_telemetry.rule(inner)
    ctx.sessions.create("stack").append("turn/start", {"turn": 1})
    assert order == ["outer-before", "inner", "outer-after"]
    assert sink.records[0].attributes["outer"] == 1 and sink.records[0].attributes["inner"] == 1


def test_a_rule_that_skips_next_replaces_everything_beneath(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    called: list[bool] = []
    replaced = TelemetryRecord("ops", 0, "info", {}, "replaced")
    ctx.session_telemetry.rule(lambda record, next: replaced)
    ctx.session_telemetry.rule(lambda record, next: called.append(True) or next())
    ctx.sessions.create("veto").append("turn/start", {"turn": 1})
    assert sink.records == [replaced]
    assert called == []


def test_a_failing_rule_withholds_that_record_only(contexts: Callable[..., Context],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    ctx = contexts()
    sink = mount(ctx)

    def picky(record: TelemetryRecord, next: Callable[[], TelemetryRecord]) -> TelemetryRecord:
        if record.body.get("turn") == 1:
            raise ValueError("rule exploded")
        return next()

    dispose = ctx.session_telemetry.rule(picky)
    session = ctx.sessions.create("closed")
    with caplog.at_level(logging.WARNING, logger="dsh_todo.telemetry"):
        first = session.append("turn/start", {"turn": 1})
    session.append("turn/start", {"turn": 2})
    assert first["seq"] == 0 and session.seq == 2
    assert sink.ledger() == [("turn/start", 1)]
    assert "telemetry: capture of turn/start seq 0 failed" in caplog.text
    dispose()
    session.append("turn/start", {"turn": 1})
    assert sink.ledger() == [("turn/start", 1), ("turn/start", 2)]


def test_a_failing_backend_never_reaches_the_append(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    session = ctx.sessions.create("down")
    sink.fail = True
    session.append("turn/start", {"turn": 1})
    sink.fail = False
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert session.seq == 2
    assert sink.ledger() == [("turn/end", 1)]


def test_shutdown_records_at_close_and_at_stop(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    plugin = Capturing()
    handle = ctx.plugin(plugin)
    ctx.sessions.create("closes")
    ctx.sessions.create("stays")
    ctx.sessions.close("closes")
    handle.dispose()
    ops = [r for r in plugin.recorder.records if r.channel == "ops"]
    assert [(dict(r.attributes), r.body, r.severity) for r in ops] == [
        ({"telemetry.op": "shutdown", "session.id": "closes"}, {"op": "shutdown"}, "info"),
        ({"telemetry.op": "shutdown", "session.id": "stays"}, {"op": "shutdown"}, "info")]


async def test_an_agent_error_is_an_ops_record_with_a_stable_body(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    sink = mount(ctx)
    session = ctx.sessions.create("err")
    call = ToolCallRequest("c1", "todo_write", '{"todos": []}')
    model = ScriptedModel([ModelReply("", [call], "tool_calls")])  # the second request finds no reply: ModelError
    outcome = await AgentLoop(ctx.tools, model).run_turn(Agent("agent-7", session), "go")
    assert outcome.reason["kind"] == "error"
    ops = [r for r in sink.records if r.channel == "ops"]
    assert [(dict(r.attributes), r.body, r.severity) for r in ops] == [(
        {"telemetry.op": "agent-error", "session.id": "err", "agent.id": "agent-7", "error.name": "ModelError",
         "turn": 1, "step": 2},
        {"name": "ModelError", "message": "the scripted model has no reply left (it had 1)"}, "error")]
    turn_end = next(r for r in sink.records if r.attributes.get("event.type") == "turn/end")
    assert turn_end.severity == "error"
    assert sink.records.index(ops[0]) < sink.records.index(turn_end)  # the signal comes before the closer


def test_the_seam_alone_adds_nothing_to_the_append_path(contexts: Callable[..., Context]) -> None:
    bare = boot(composition(None))
    try:
        without = len(bare.sessions.listeners)
    finally:
        bare.dispose()
    ctx = contexts()
    assert len(ctx.sessions.listeners) == without
    assert ctx.session_telemetry.sharing is None


def test_sessions_live_before_the_backend_are_adopted_with_what_they_logged(contexts: Callable[..., Context]) -> None:
    """A backend mounted late (or remounted with no cursor) hands over the live session's log from its first live
    event: nothing of it had left the process yet."""
    ctx = contexts()
    session = ctx.sessions.create("early")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    sink = mount(ctx)
    assert sink.ledger() == [("turn/start", 0), ("step/start", 1)]
    session.append("step/end", {"turn": 1, "step": 1})
    assert sink.ledger() == [("turn/start", 0), ("step/start", 1), ("step/end", 2)]


def test_a_session_refused_as_it_opens_gets_no_shutdown_record(contexts: Callable[..., Context]) -> None:
    ctx = contexts()
    plugin = Capturing()
    handle = ctx.plugin(plugin)

    def refuse(session: Any) -> None:
        if session.id == "refused":
            raise RuntimeError("another writer holds it")

    ctx.sessions.on_open(refuse)
    with pytest.raises(RuntimeError, match="another writer holds it"):
        ctx.sessions.create("refused")
    ctx.sessions.create("kept")
    handle.dispose()
    assert [r.attributes["session.id"] for r in plugin.recorder.records] == ["kept"]
