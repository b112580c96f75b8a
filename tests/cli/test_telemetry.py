"""``--telemetry`` on the front doors (issue 25): a real ``dsh-todo run`` process exporting a scripted session to an
OTLP/HTTP receiver on 127.0.0.1, the one stderr line saying what leaves and where, and the one-line refusals.

The process gets the collector the standard way, ``OTEL_EXPORTER_OTLP_ENDPOINT``, as a person would set it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_todo.cli import main
from dsh_todo.jsonutil import dumps
from tests.harness.telemetry.receiver import Receiver, otlp_receiver

LEDGER = "@deepseek-ai/dsh-session-telemetry-otel"
OPS = "@deepseek-ai/dsh-session-telemetry-otel/ops"
OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_HEADERS",
                  "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME", "DSH_TODO_TELEMETRY")


def todos(*items: tuple[str, str]) -> str:
    return dumps({"todos": [{"content": content, "status": status} for content, status in items]})


SCRIPT = [
    {"text": "Planning.", "tool_calls": [{"id": "call-1", "name": "todo_write",
                                          "arguments": todos(("a", "in_progress"), ("b", "in_progress"))}]},
    {"tool_calls": [{"id": "call-2", "name": "todo_write",
                     "arguments": todos(("a", "in_progress"), ("b", "pending"))}]},
    {"text": "DONE"},
]
"""A rejected call (two tasks in progress under --single-active), its correction, the answer."""

EXPORTED = [
    ("turn/start", 0, "INFO"), ("step/start", 1, "INFO"), ("system/message", 2, "INFO"), ("user/message", 3, "INFO"),
    ("assistant/message", 4, "INFO"), ("tool/call", 5, "INFO"), ("tool/result", 6, "ERROR"), ("step/end", 7, "INFO"),
    ("step/start", 8, "INFO"), ("assistant/message", 9, "INFO"), ("tool/call", 10, "INFO"), ("todo/write", 11, "INFO"),
    ("tool/result", 12, "INFO"), ("step/end", 13, "INFO"), ("step/start", 14, "INFO"),
    ("assistant/message", 15, "INFO"), ("step/end", 16, "INFO"), ("turn/end", 17, "INFO")]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as running:
        yield running


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in OTEL_VARIABLES}
    return {**env, "DSH_HOME": str(tmp_path / "dsh-home"), **extra}


def run(tmp_path: Path, env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", "run", "plan it", "--script", str(script),
                           "--root", str(tmp_path / "root"), "--session", "s1", "--single-active", *options],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL)


def logged_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["events", "s1", "--root", str(tmp_path / "root")]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_run_with_telemetry_full_exports_the_session_to_the_collector(tmp_path: Path, receiver: Receiver,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Every event of the turn reaches the collector as one log record whose body is the logged event's data (the
    rejected call's result ERROR), then the session's ``shutdown`` on the ops scope, and the turn's GenAI spans go to
    ``/v1/traces``; the first stderr line names the mode, what it shares and the very URLs, once."""
    done = run(tmp_path, environment(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base), "--telemetry", "full")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == ("telemetry full: every event of every session (prompts, replies, tool calls and their "
                        f"results) leaves as it is appended, as OpenTelemetry logs to {receiver.base}/v1/logs, and "
                        f"its turns, model requests and tool calls as spans to {receiver.base}/v1/traces")
    assert sum(line.startswith("telemetry ") for line in lines) == 1
    ledger = [r for r in receiver.records if r.scope == LEDGER]
    assert [(r.attributes["event.type"], r.attributes["event.seq"], r.severity_text) for r in ledger] == EXPORTED
    events = logged_events(tmp_path, capsys)
    assert [r.body for r in ledger] == [event["data"] for event in events]
    assert [r.time_unix_nano for r in ledger] == [int(str(event["time"])) * 1_000_000 for event in events]
    assert {r.attributes["session.id"] for r in ledger} == {"s1"}
    assert {r.attributes["session.cwd"] for r in ledger} == {str(tmp_path)}
    ops = [(r.body, r.attributes) for r in receiver.records if r.scope == OPS]
    assert ops == [({"op": "shutdown"}, {"telemetry.op": "shutdown", "session.id": "s1"})]
    assert {r.resource["service.name"] for r in receiver.records} == {"dsh-todo"}
    assert {request[":path"] for request in receiver.requests} == {"/v1/logs", "/v1/traces"}
    names = {span.span_id: span.name for span in receiver.spans}
    assert [(span.name, names.get(span.parent_span_id, ""), span.status_code,
             span.attributes.get("gen_ai.tool.call.id")) for span in receiver.spans] == [
        ("chat script.json", "invoke_agent", 0, None), ("execute_tool todo_write", "invoke_agent", 2, "call-1"),
        ("chat script.json", "invoke_agent", 0, None), ("execute_tool todo_write", "invoke_agent", 0, "call-2"),
        ("chat script.json", "invoke_agent", 0, None), ("invoke_agent", "", 0, None)]
    assert len({span.trace_id for span in receiver.spans}) == 1


def test_run_with_the_variable_feedback_only_and_no_feedback_sends_nothing(tmp_path: Path,
                                                                           receiver: Receiver) -> None:
    """``DSH_TODO_TELEMETRY`` picks the mode when the option is absent; ``feedback-only`` says so and, with no
    feedback event in the turn, nothing reaches the collector."""
    done = run(tmp_path, environment(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
                                     DSH_TODO_TELEMETRY="feedback-only"))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "telemetry feedback-only: nothing leaves until a feedback event; then that session's log up to it leaves, "
        f"as OpenTelemetry logs to {receiver.base}/v1/logs")
    assert receiver.records == [] and receiver.requests == []


@pytest.mark.parametrize("options", [["--telemetry", "disabled"], []], ids=["disabled", "default"])
def test_run_with_telemetry_disabled_sends_nothing_and_says_nothing(tmp_path: Path, receiver: Receiver,
                                                                    options: list[str]) -> None:
    """With a collector configured, ``disabled`` (and the default) sends nothing and prints no telemetry line."""
    done = run(tmp_path, environment(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base), *options)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "tools mounted: todo_write (allowParallelInProgress: false)"
    assert receiver.records == [] and receiver.requests == []
    assert not (tmp_path / "dsh-home").exists()  # not even the anonymous id is created


@pytest.mark.parametrize("command", [["run", "x", "--script", "s.json"], ["mcp"], ["acp", "--script", "s.json"],
                                     ["web"], ["demo"]])
def test_each_front_door_refuses_telemetry_without_a_collector(command: list[str], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``--telemetry full`` with no endpoint variable is one line and exit 2, before anything boots or serves."""
    for variable in OTEL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--root", str(tmp_path / "root"), "--telemetry", "full"]) == 2
    assert capsys.readouterr().err == (
        f"dsh-todo {command[0]}: telemetry full needs a collector: set OTEL_EXPORTER_OTLP_ENDPOINT (or "
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) to its OTLP/HTTP URL\n")
    assert not (tmp_path / "root").exists()


def test_an_unknown_telemetry_variable_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TODO_TELEMETRY", "on")
    assert main(["demo", "--root", str(tmp_path / "root")]) == 2
    assert capsys.readouterr().err == ("dsh-todo demo: DSH_TODO_TELEMETRY must be full, feedback-only or disabled, "
                                       "not 'on'\n")


NO_SDK = """
import sys
from dsh_todo.cli import main
code = main(sys.argv[1:])
assert code == 0, code
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_a_run_without_telemetry_imports_no_opentelemetry(tmp_path: Path) -> None:
    """The default costs nothing: a whole ``run`` never imports the SDK (nor the API)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", NO_SDK, "run", "x", "--script", str(script), "--root",
                           str(tmp_path / "root")], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=environment(tmp_path), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_demo_with_telemetry_full_exports_its_session(tmp_path: Path, receiver: Receiver) -> None:
    """Another front door, the same boot: ``dsh-todo demo --telemetry full`` says so first and its scripted session
    reaches the collector as logs and as one trace of an agent span with chat and tool children."""
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "demo", "--root", str(tmp_path / "root"),
                           "--telemetry", "full"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=environment(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "telemetry full: every event of every session (prompts, replies, tool calls and their results) leaves as it "
        f"is appended, as OpenTelemetry logs to {receiver.base}/v1/logs, and its turns, model requests and tool calls "
        f"as spans to {receiver.base}/v1/traces")
    ledger = [r for r in receiver.records if r.scope == LEDGER]
    assert [r.attributes["event.seq"] for r in ledger] == list(range(len(ledger)))
    assert ledger[-1].attributes["event.type"] == "turn/end"
    kinds = {span.attributes["gen_ai.operation.name"] for span in receiver.spans}
    assert kinds == {"invoke_agent", "chat", "execute_tool"}
    roots = {span.span_id: span for span in receiver.spans if not span.parent_span_id}
    turns = [r for r in ledger if r.attributes["event.type"] == "turn/start"]
    assert [span.name for span in roots.values()] == ["invoke_agent"] * len(turns)
    for span in receiver.spans:  # every chat and tool span is a child of its turn's span, in that turn's trace
        if span.parent_span_id:
            assert roots[span.parent_span_id].trace_id == span.trace_id
    assert len({span.trace_id for span in receiver.spans}) == len(turns)
