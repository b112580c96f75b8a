"""The OpenTelemetry backend end to end: the SDK's OTLP/HTTP exporter posting to a receiver on 127.0.0.1.

One scripted session runs in two "processes" (two boots of one composition file over one root): a turn with a
rejected call and its correction, a feedback event, a turn left open by a crash; then a resume (recovery closes the
turn as interrupted), a turn, a second feedback event and a last turn that fails. Each mode must put exactly its
records on the wire.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dsh_todo
from dsh_todo.harness import Agent, BootError, Session, boot
from dsh_todo.harness.agent_loop import AgentLoop
from dsh_todo.harness.frozen import thaw
from dsh_todo.harness.llm import ModelReply, ScriptedModel, ToolCallRequest
from dsh_todo.harness.turns import Turns
from dsh_todo.jsonutil import dumps
from tests.harness.telemetry.receiver import Received, Receiver, otlp_receiver

pytestmark = pytest.mark.anyio

LEDGER = "@deepseek-ai/dsh-session-telemetry-otel"
OPS = "@deepseek-ai/dsh-session-telemetry-otel/ops"
CWD = "/srv/app"

COMPOSITION = """\
- id: tools
  name: '@deepseek-ai/dsh-tools'
- id: session
  name: '@deepseek-ai/dsh-session'
- id: projections
  name: '@deepseek-ai/dsh-session-projection'
- id: persistence
  name: '@deepseek-ai/dsh-session-persistence-jsonl'
  config: {{root: '{root}', writeBatchMaxDelayMs: 5}}
- id: tool-todo
  name: '@deepseek-ai/dsh-tool-todo'
  config: {{allowParallelInProgress: true}}
- id: telemetry
  name: '@deepseek-ai/dsh-session-telemetry'
- id: telemetry-otel
  name: '@deepseek-ai/dsh-session-telemetry-otel'
  config:
{config}
"""


@pytest.fixture(autouse=True)
def dsh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The anonymous id lives in a home of the test's own, never the person's ``~/.dsh``."""
    home = tmp_path / "dsh-home"
    monkeypatch.setenv("DSH_HOME", str(home))
    for variable in ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED",
                     "OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_RESOURCE_ATTRIBUTES",
                     "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(variable, raising=False)
    return home


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as running:
        yield running


def write_composition(tmp_path: Path, config: str) -> Path:
    path = tmp_path / "telemetry.yml"
    path.write_text(COMPOSITION.format(root=tmp_path / "sessions", config=config), encoding="utf-8")
    return path


def full_config(url: str, mode: str = "FULL") -> str:
    return (f"    mode: {mode}\n    shutdownTimeoutMillis: 10000\n    exporter: {{endpoint: '{url}'}}\n"
            "    processor: {schedule_delay_millis: 50}")


def call(call_id: str, *items: tuple[str, str]) -> ToolCallRequest:
    return ToolCallRequest(call_id, "todo_write", dumps({"todos": [{"content": c, "status": s} for c, s in items]}))


async def scripted_session(composition: Path) -> tuple[Session, Session]:
    """The two processes' sessions (their in-memory logs), each process disposed when its part is done."""
    first = boot(composition)
    session = first.sessions.create("tele", cwd=CWD)
    agent = Agent("agent-1", session)
    model = ScriptedModel([ModelReply("", [call("c1", ("read the code", "done"))], "tool_calls"),
                           ModelReply("", [call("c2", ("read the code", "in_progress"))], "tool_calls"),
                           ModelReply("Planned.")])
    await AgentLoop(first.tools, model, persistence=first.session_persistence).run_turn(agent, "plan the work")
    session.append("feedback/record", {"text": "first feedback"})
    crashed = Turns(first.tools, agent, persistence=first.session_persistence)
    crashed.begin()
    crashed.begin_step()  # the process dies here: the turn is never closed
    first.session_persistence.flush("tele")
    first.dispose()

    second = boot(composition)
    resumed = second.session_persistence.load("tele")
    agent = Agent("agent-1", resumed)
    loop = AgentLoop(second.tools, ScriptedModel([ModelReply("All done.")]),
                     persistence=second.session_persistence)
    await loop.run_turn(agent, "finish")
    resumed.append("feedback/record", {"text": "second feedback"})
    await loop.run_turn(agent, "post-feedback private suffix")  # no reply left: the turn fails
    second.dispose()
    return session, resumed


def ledger(records: list[Received]) -> list[tuple[str, int, str]]:
    return [(r.attributes["event.type"], r.attributes["event.seq"], r.severity_text) for r in records
            if r.scope == LEDGER]


def assert_mirrors_the_log(records: list[Received], logs: list[Session]) -> None:
    """Every ledger record is its event: body, timestamps, severity number, attributes, scope."""
    events = {event["seq"]: event for log in logs for event in log.events}
    for record in records:
        assert record.scope_version == dsh_todo.__version__
        if record.scope != LEDGER:
            continue
        event = events[record.attributes["event.seq"]]
        assert record.attributes == {"session.id": "tele", "event.type": event["type"], "event.seq": event["seq"],
                                     "session.cwd": CWD}
        assert record.body == thaw(event["data"])
        assert record.time_unix_nano == record.observed_time_unix_nano == event["time"] * 1_000_000
        assert record.severity_number == {"INFO": 9, "ERROR": 17}[record.severity_text]


FIRST_PROCESS = [  # a v4 log: the loop logs its system prompt at the first step (seq 2), and not again unchanged
    ("turn/start", 0, "INFO"), ("step/start", 1, "INFO"), ("system/message", 2, "INFO"), ("user/message", 3, "INFO"),
    ("assistant/message", 4, "INFO"), ("tool/call", 5, "INFO"), ("tool/result", 6, "ERROR"), ("step/end", 7, "INFO"),
    ("step/start", 8, "INFO"), ("assistant/message", 9, "INFO"), ("tool/call", 10, "INFO"),
    ("todo/write", 11, "INFO"), ("tool/result", 12, "INFO"), ("step/end", 13, "INFO"), ("step/start", 14, "INFO"),
    ("assistant/message", 15, "INFO"), ("step/end", 16, "INFO"), ("turn/end", 17, "INFO"),
    ("feedback/record", 18, "INFO")]
CRASHED_TURN = [("turn/start", 19, "INFO"), ("step/start", 20, "INFO")]
# 21 and 22 are recovery's step/end and turn/end {interrupted}: restored, never appended live, never exported.
RESUMED = [
    ("session/end-seed", 23, "INFO"), ("turn/start", 24, "INFO"), ("step/start", 25, "INFO"),
    ("user/message", 26, "INFO"), ("assistant/message", 27, "INFO"), ("step/end", 28, "INFO"),
    ("turn/end", 29, "INFO"), ("feedback/record", 30, "INFO")]
FAILED_TURN = [("turn/start", 31, "INFO"), ("step/start", 32, "INFO"), ("user/message", 33, "INFO"),
               ("step/end", 34, "INFO"), ("turn/end", 35, "ERROR")]


async def test_full_exports_every_live_event_and_the_ops_records(tmp_path: Path, receiver: Receiver,
                                                                 dsh_home: Path) -> None:
    _, second = await scripted_session(write_composition(tmp_path, full_config(receiver.url)))
    assert [(e["type"], e["data"].get("reason")) for e in second.events][21:23] == [
        ("step/end", None), ("turn/end", {"kind": "interrupted"})]
    records = receiver.records
    assert ledger(records) == FIRST_PROCESS + CRASHED_TURN + RESUMED + FAILED_TURN
    assert_mirrors_the_log(records, [second])
    ops = [(r.attributes, r.body, r.severity_number, r.severity_text) for r in records if r.scope == OPS]
    shutdown = ({"telemetry.op": "shutdown", "session.id": "tele"}, {"op": "shutdown"}, 9, "INFO")
    assert ops == [
        shutdown,
        ({"telemetry.op": "agent-error", "session.id": "tele", "agent.id": "agent-1", "error.name": "ModelError",
          "turn": 4, "step": 1},
         {"name": "ModelError", "message": "the scripted model has no reply left (it had 1)"}, 17, "ERROR"),
        shutdown]
    scopes = [r.scope for r in records]
    assert scopes.index(OPS) == len(FIRST_PROCESS + CRASHED_TURN)  # the first process's marker ends its stream
    user_id = (dsh_home / ".anonymous-user-id").read_text(encoding="utf-8").strip()
    assert len(user_id) == 36
    for record in records:
        assert {k: record.resource[k] for k in ("service.name", "service.version", "user.id")} == {
            "service.name": "dsh-todo", "service.version": dsh_todo.__version__, "user.id": user_id}
    assert {r["content-type"] for r in receiver.requests} == {"application/x-protobuf"}


async def test_feedback_only_releases_the_log_through_each_feedback_event(tmp_path: Path,
                                                                           receiver: Receiver) -> None:
    _, second = await scripted_session(write_composition(tmp_path, full_config(receiver.url, "FEEDBACK_ONLY")))
    records = receiver.records
    assert ledger(records) == FIRST_PROCESS + RESUMED
    assert_mirrors_the_log(records, [second])
    assert [r for r in records if r.scope != LEDGER] == []
    wire = repr([r.body for r in records])
    assert "second feedback" in wire and "post-feedback private suffix" not in wire
    assert "post-feedback private suffix" in repr([e["data"] for e in second.events])


async def test_disabled_sends_nothing_and_says_so_at_each_feedback(tmp_path: Path, receiver: Receiver,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    config = f"    mode: DISABLED\n    exporter: {{endpoint: '{receiver.url}'}}"
    with caplog.at_level(logging.WARNING, logger="dsh_todo.telemetry"):
        await scripted_session(write_composition(tmp_path, config))
    assert receiver.records == [] and receiver.requests == []
    assert [r.getMessage() for r in caplog.records if r.name == "dsh_todo.telemetry"] == [
        "session telemetry is DISABLED; nothing will be shared and this feedback remains local"] * 2


@pytest.mark.parametrize(("mode", "sharing"), [("FULL", "full"), ("FEEDBACK_ONLY", "feedback-only"),
                                               ("DISABLED", "disabled")])
def test_each_mode_discloses_what_it_shares(tmp_path: Path, receiver: Receiver, mode: str, sharing: str) -> None:
    ctx = boot(write_composition(tmp_path, full_config(receiver.url, mode)))
    try:
        assert ctx.session_telemetry.sharing == sharing
    finally:
        ctx.dispose()


def test_a_direct_record_reaches_the_wire_only_in_full(tmp_path: Path, receiver: Receiver) -> None:
    from dsh_todo.harness.telemetry import TelemetryRecord

    record = TelemetryRecord("ops", 1_700_000_000_000, "warn", {"telemetry.op": "custom"}, {"n": 1})
    for mode in ("FULL", "FEEDBACK_ONLY"):
        ctx = boot(write_composition(tmp_path, full_config(receiver.url, mode)))
        ctx.session_telemetry.emit(record)
        ctx.dispose()
    assert [(r.scope, r.attributes, r.body, r.severity_number, r.severity_text, r.time_unix_nano)
            for r in receiver.records] == [(OPS, {"telemetry.op": "custom"}, {"n": 1}, 13, "WARN",
                                            1_700_000_000_000_000_000)]


def test_the_exporter_settings_and_the_sdk_variables_reach_the_exporter(tmp_path: Path, receiver: Receiver,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    config = (f"    mode: FULL\n    exporter: {{endpoint: '{receiver.url}', compression: gzip,"
              " headers: {authorization: Bearer t0ken}, timeout: 5}")
    ctx = boot(write_composition(tmp_path, config))
    ctx.sessions.create("one").append("turn/start", {"turn": 1})
    ctx.dispose()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-tenant=acme")
    ctx = boot(write_composition(tmp_path, "    mode: FULL"))
    ctx.sessions.create("two").append("turn/start", {"turn": 1})
    ctx.dispose()
    assert [(r.get("content-encoding"), r.get("authorization"),
             r.get("x-tenant")) for r in receiver.requests] == [("gzip", "Bearer t0ken", None),
                                                                (None, None, "acme")]
    assert [r.attributes["session.id"] for r in receiver.records if r.scope == LEDGER] == ["one", "two"]


@pytest.mark.parametrize(("config", "message"), [
    ("    mode: VERBOSE\n    exporter: 12",
     "unsupported mode 'VERBOSE' (FULL, FEEDBACK_ONLY or DISABLED)"),
    ("    mode: FULL",
     "exporter.endpoint is required (the full OTLP logs endpoint), or set OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or "
     "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ("    mode: FULL\n    exporter: {endpoint: 'ftp://127.0.0.1/v1/logs'}",
     "exporter.endpoint must be http(s), got 'ftp://127.0.0.1/v1/logs'"),
    ("    mode: FEEDBACK_ONLY\n    exporter: {endpoint: 'http://127.0.0.1:9/v1/logs'}\n    shutdownTimeoutMillis: 0",
     "shutdownTimeoutMillis must be a positive finite number no greater than 2147483647, got 0"),
])
def test_a_bad_config_fails_the_boot_naming_the_row(tmp_path: Path, config: str, message: str) -> None:
    with pytest.raises(BootError) as raised:
        boot(write_composition(tmp_path, config))
    assert str(raised.value) == ('composition row "telemetry-otel" (@deepseek-ai/dsh-session-telemetry-otel): '
                                 f"@deepseek-ai/dsh-session-telemetry-otel: {message}")


def test_the_sdk_refuses_its_own_bad_settings_at_boot(tmp_path: Path) -> None:
    config = ("    mode: FULL\n    exporter: {endpoint: 'http://127.0.0.1:9/v1/logs'}\n"
              "    processor: {max_export_batch_size: 0}")
    with pytest.raises(BootError, match=r"^composition row \"telemetry-otel\" .*: ValueError: .*max_export_batch"):
        boot(write_composition(tmp_path, config))


def test_disabled_reads_no_transport_setting(tmp_path: Path) -> None:
    ctx = boot(write_composition(tmp_path, "    mode: DISABLED\n    exporter: not even a mapping\n"
                                           "    shutdownTimeoutMillis: -1"))
    ctx.dispose()


@pytest.fixture
def silent_collector() -> Iterator[str]:
    """A collector that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/logs"
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()


def test_shutdown_is_bounded_when_the_collector_never_answers(tmp_path: Path, silent_collector: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    config = (f"    mode: FULL\n    shutdownTimeoutMillis: 300\n    exporter: {{endpoint: '{silent_collector}',"
              " timeout: 3}")
    ctx = boot(write_composition(tmp_path, config))
    ctx.sessions.create("stuck").append("turn/start", {"turn": 1})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="dsh_todo.telemetry"):
        ctx.dispose()
    took = time.monotonic() - started
    assert 0.3 <= took < 1.5
    assert ("session-telemetry-otel: provider shutdown exceeded 300ms; records still queued are lost"
            in [r.getMessage() for r in caplog.records])


LAZY = """
import sys
from dsh_todo.harness import boot
import dsh_todo.harness.telemetry.otel
assert not [m for m in sys.modules if m.startswith("opentelemetry")], "imported with the plugin module"
ctx = boot([{"name": "@deepseek-ai/dsh-session"}, {"name": "@deepseek-ai/dsh-session-telemetry"},
            {"name": "@deepseek-ai/dsh-session-telemetry-otel"}])
ctx.sessions.create("s").append("feedback/record", {"text": "kept here"})
ctx.dispose()
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_disabled_is_the_default_and_imports_no_sdk(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, timeout=60,
                          env={"PATH": "", "DSH_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
    assert done.stderr == ("session telemetry is DISABLED; nothing will be shared and this feedback remains local\n")


def test_the_anonymous_id_is_kept_and_reused(tmp_path: Path) -> None:
    from dsh_todo.harness.telemetry.user_id import anonymous_user_id

    env: dict[str, Any] = {"DSH_HOME": str(tmp_path / "home")}
    first = anonymous_user_id(env, new_id=lambda: "0f8fad5b-d9cb-469f-a165-70867728950e")
    assert first == "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert (tmp_path / "home" / ".anonymous-user-id").read_text(encoding="utf-8") == first + "\n"
    assert anonymous_user_id(env, new_id=lambda: "never used") == first
    other = tmp_path / "other"
    other.mkdir()
    (other / ".anonymous-user-id").write_text("not a uuid\n", encoding="utf-8")
    replaced = anonymous_user_id({"DSH_HOME": str(other)}, new_id=lambda: "7c9e6679-7425-40de-944b-e07fc1f90ae7")
    assert replaced == "7c9e6679-7425-40de-944b-e07fc1f90ae7"
    assert (other / ".anonymous-user-id").read_text(encoding="utf-8") == replaced + "\n"


def test_a_stuck_collector_never_slows_or_fails_the_append(tmp_path: Path, silent_collector: str) -> None:
    """The SDK's queue full, its export thread waiting on a collector that never answers: appends still take
    microseconds, the log keeps every event, and the SDK drops what does not fit (its documented loss policy)."""
    config = (f"    mode: FULL\n    shutdownTimeoutMillis: 200\n    exporter: {{endpoint: '{silent_collector}',"
              " timeout: 3}\n    processor: {max_queue_size: 4, max_export_batch_size: 2, schedule_delay_millis: 1}")
    ctx = boot(write_composition(tmp_path, config))
    session = ctx.sessions.create("flood")
    started = time.monotonic()
    for turn in range(5_000):
        session.append("turn/start", {"turn": turn})
    took = time.monotonic() - started
    assert session.seq == 5_000
    assert took < 1.0, f"5,000 appends took {took:.2f} s"
    ctx.dispose()


def test_a_second_backend_is_refused(tmp_path: Path) -> None:
    path = write_composition(tmp_path, "    mode: DISABLED")
    path.write_text(path.read_text(encoding="utf-8") + "- id: telemetry-otel-2\n"
                    "  name: '@deepseek-ai/dsh-session-telemetry-otel'\n", encoding="utf-8")
    with pytest.raises(BootError) as raised:
        boot(path)
    assert str(raised.value) == ('composition row "telemetry-otel-2" (@deepseek-ai/dsh-session-telemetry-otel): '
                                 "ValueError: a session telemetry backend is already mounted")
