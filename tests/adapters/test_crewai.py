"""The CrewAI adapter, in CrewAI's own runtime: a crew whose agent's model is a scripted ``BaseLLM`` (no network).

crewai cannot be installed beside the suite's packages (every release needs ``openai<3``; the suite pins openai 3),
so the test installs ``crewai`` and this checkout (editable) into a virtual environment of its own with ``uv``, kept
under the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``) per crewai version, Python and checkout, so a repeated
run only re-checks it (about a second; a cold install takes seconds with uv's package cache warm). There
``crewai_driver.py`` plays the scenario and prints what the model was handed; the log it leaves under a root is
read here with :func:`dsh_todo.logview.read_session`. Skipped, with the reason, where uv is missing or the install
fails.

CrewAI parses the model's argument text itself, so the scenario's call that is not JSON (``c3``) is answered by
CrewAI in its own words and never reaches the tool or the log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.adapters import bind_todo
from dsh_todo.jsonutil import dumps
from dsh_todo.logview import read_session
from tests.adapters.scenario import CANONICAL, FINAL_TEXT, RAW, STEPS, TEXT
from tests.advertised import assert_advertised
from tests.conftest import REPO_ROOT
from tests.environments import environment

pytestmark = pytest.mark.slow

CREWAI = "1.15.30"
"""The crewai release the adapter is tested against (the extra allows ``>=1.15.30,<2``)."""

RUN_TIMEOUT_S = 180
DRIVER = Path(__file__).with_name("crewai_driver.py")
README = REPO_ROOT / "README.md"

PARSE_ERROR = ("Error: Failed to parse tool arguments as JSON: Expecting value: line 1 column 12 (char 11). "
               "Please provide valid JSON arguments for the 'todo_write' tool.")
"""What CrewAI itself answers for ``c3`` (its text is not JSON), before any tool runs."""
ANSWERED = {**TEXT, "c3": PARSE_ERROR}
REACHED = ["c1", "c2", "c4"]
"""The calls that reach the tool, in order."""


def environment_dir() -> Path:
    """Where the environment lives: one per crewai version, Python and checkout (its install of this project is
    editable, so it follows this checkout's sources, and another checkout must not repoint it)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(json.dumps([CREWAI, sys.version, str(REPO_ROOT)]).encode()).hexdigest()[:12]
    return cache / "dsh-todo" / f"crewai-{CREWAI}-{key}"


@pytest.fixture(scope="module")
def crewai_python() -> Path:
    """The interpreter of an environment holding crewai and this checkout."""
    # Every run installs: a no-op once installed, and it picks up a change of this project's dependencies.
    return environment(environment_dir(), [f"crewai=={CREWAI}", "-e", str(REPO_ROOT)], f"crewai {CREWAI}",
                       no_config=True)


def run_in(python: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python argv`` in ``cwd`` with CrewAI's telemetry, tracing and version check off and its files kept in
    ``cwd`` (never the user's home)."""
    home = cwd / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "CREWAI_STORAGE_DIR": str(home / "crewai"),
           "CREWAI_TRACING_ENABLED": "false", "OTEL_SDK_DISABLED": "true", "CREWAI_DISABLE_VERSION_CHECK": "true",
           "PYTHONUTF8": "1"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([str(python), *argv], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL)


def drive(python: Path, mode: str, tmp_path: Path, *, raw: dict[str, str] = RAW,
          steps: list[list[str]] = STEPS) -> tuple[dict[str, Any], Any]:
    """Run the driver in ``mode``: its report and the session it left (as :func:`read_session` reads it)."""
    root = tmp_path / "sessions"
    scenario = {"raw": raw, "steps": steps, "final": FINAL_TEXT}
    done = run_in(python, [str(DRIVER), mode, str(root), json.dumps(scenario)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [log] = list(root.rglob("session*.jsonl*"))
    return json.loads(done.stdout), read_session(log)


def tool_answers(request: dict[str, Any]) -> dict[str, str]:
    """The tool results in a request's messages, by call id: what the model read back."""
    return {message["tool_call_id"]: message["content"] for message in request["messages"]
            if message["role"] == "tool"}


def calls_in(events: list[Any]) -> list[tuple[str, str, bool]]:
    """Each logged call: its argument text, the text it was answered and whether that is an error (each advertised
    by the ``assistant/message`` just before it)."""
    results = {e["sourceEventSeqs"][0]: e["data"]["message"] for e in events
               if e["type"] == "tool/result"}
    by_seq = {e["seq"]: e for e in events}
    found = []
    for event in events:
        if event["type"] == "tool/call":
            assert_advertised(by_seq[event["seq"] - 1], event)  # the model's message, logged just before the call
            block = results[event["seq"]]
            found.append((event["data"]["arguments"], block["content"][0]["text"], block["isError"]))
    return found


def test_a_kickoff_offers_the_native_tool_reads_the_contract_texts_and_is_one_turn(crewai_python: Path,
                                                                                    tmp_path: Path) -> None:
    report, session = drive(crewai_python, "run", tmp_path)
    assert report["output"] == FINAL_TEXT
    requests = report["requests"]
    assert len(requests) == len(STEPS) + 1
    with bind_todo() as todos:
        native = todos.definition()
        # What every request hands the model: our name, description and schema (our key order), where CrewAI's
        # strict pipeline adds only ``additionalProperties: false`` on the root object and ``strict: true``.
        expected = {"type": "function", "function": {
            "name": "todo_write", "description": native.description,
            "parameters": {**todos.parameters, "additionalProperties": False}, "strict": True}}
    for request in requests:
        assert request["tools"] == [expected]
        assert dumps(request["tools"]) == dumps([expected])
        assert request["available_functions"] is False  # CrewAI runs the tools itself, not the model layer
    # What the model read back: exactly the contract's text for an accepted and a refused call; CrewAI's own
    # words for the call whose text is not JSON.
    assert tool_answers(requests[-1]) == ANSWERED
    assert tool_answers(requests[1]) == {"c1": TEXT["c1"]}
    # The log: one turn, completed, holding the calls that reached the tool, in order, and the plan.
    kinds = [event["type"] for event in session.events]
    assert session.closers == 0
    assert kinds.count("turn/start") == kinds.count("turn/end") == 1
    assert kinds[0] == "turn/start" and kinds[-1] == "turn/end"
    assert session.events[-1]["data"]["reason"] == {"kind": "completed"}
    assert calls_in(session.events) == [(RAW[cid], TEXT[cid], cid != "c1") for cid in REACHED]
    assert [e["data"]["todos"] for e in session.events if e["type"] == "todo/write"] == [CANONICAL]
    call_ids = [e["data"]["callId"] for e in session.events if e["type"] == "tool/call"]
    assert len(set(call_ids)) == 3 and not set(call_ids) & set(RAW)  # CrewAI keeps the model's ids to itself
    assert session.plan == CANONICAL
    assert report["plan"] == CANONICAL


def test_a_failed_kickoff_ends_its_turn_with_the_error_and_keeps_the_plan(crewai_python: Path,
                                                                          tmp_path: Path) -> None:
    """The model fails after the first call, on every retry CrewAI makes: the kickoff raises."""
    report, session = drive(crewai_python, "fail", tmp_path)
    assert report["raised"] == "RuntimeError: the model is down"
    kinds = [event["type"] for event in session.events]
    assert session.closers == 0  # no turn left open
    assert kinds.count("turn/start") == kinds.count("turn/end") == 1 and kinds[-1] == "turn/end"
    assert session.events[-1]["data"]["reason"] == {
        "kind": "error", "error": {"name": "RuntimeError", "message": "the model is down"}}
    assert calls_in(session.events) == [(RAW["c1"], TEXT["c1"], False)]
    assert session.plan == report["plan"] == CANONICAL


def test_a_cancelled_kickoff_ends_its_turn_aborted_and_keeps_the_plan(crewai_python: Path, tmp_path: Path) -> None:
    """The task running ``crew.akickoff()`` is cancelled while the model answers its second request."""
    report, session = drive(crewai_python, "cancel", tmp_path)
    assert report["raised"] == "CancelledError"
    assert len(report["requests"]) == 2
    kinds = [event["type"] for event in session.events]
    assert session.closers == 0
    assert kinds.count("turn/start") == kinds.count("turn/end") == 1 and kinds[-1] == "turn/end"
    assert session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert calls_in(session.events) == [(RAW["c1"], TEXT["c1"], False)]
    assert session.plan == report["plan"] == CANONICAL


def test_a_kickoff_cancelled_during_a_call_ends_its_turn_after_the_call(crewai_python: Path, tmp_path: Path) -> None:
    """The task running ``crew.akickoff()`` is cancelled while a call runs in CrewAI's worker thread, which nothing
    stops: the turn waits for it, so the call and its ``todo/write`` stay inside the turn, which ends ``aborted``.
    (Closed at once, as ``todos.turn()`` would, the call's ``todo/write`` came after the ``turn/end``.)"""
    raw = {**RAW, "c5": '{"todos":[]}'}
    report, session = drive(crewai_python, "cancel-in-call", tmp_path, raw=raw, steps=[["c1"], ["c5"]])
    assert report["raised"] == "CancelledError"
    kinds = [event["type"] for event in session.events]
    assert session.closers == 0
    assert kinds.count("turn/start") == kinds.count("turn/end") == 1
    assert kinds[-7:] == ["step/start", "assistant/message", "tool/call", "todo/write", "tool/result", "step/end",
                          "turn/end"]
    assert session.events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert calls_in(session.events) == [(RAW["c1"], TEXT["c1"], False),
                                        ('{"todos":[]}', "Updated todo list: 0 pending, 0 in progress, 0 completed.",
                                         False)]
    assert session.plan == report["plan"] == []


def test_the_readme_example_runs_as_printed(crewai_python: Path, tmp_path: Path) -> None:
    """The README's CrewAI example (a ``py`` block: the snippet test cannot run it beside the suite's packages)."""
    section = README.read_text(encoding="utf-8").split("### CrewAI\n", 1)[1]
    found = re.match(r".*?```py\n(.*?)```\n\n```text\n(.*?)```", section, re.S)
    assert found is not None, "the README has no CrewAI example"
    code, expected = found.groups()
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    done = run_in(crewai_python, ["example.py"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == expected
