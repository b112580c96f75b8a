"""Calls that a framework runs on a thread, or in an event loop, of its own (issue 34, items 1 and 2).

Each scenario runs in a process of its own (``threads_driver.py``), bounded in time and memory, so a hang fails the
test instead of stalling the suite, and a process that cannot exit (a thread stuck for ever) fails it too. The log it
persists is then read back and checked by ``invariant.py``, and ``dsh-todo plan`` is run on it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.logview.reader import read_session
from tests import needs
from tests.adapters.invariant import ABORTED, answer_text, assert_calls_inside_their_turns, last_plan

RUN_TIMEOUT_S = 60
"""The driver's bound in time: its scenarios take a few seconds; a hang would take for ever."""

MEMORY_LIMIT = 4 << 30
"""The driver's bound in memory (address space): the frameworks' imports need a few hundred MB of it."""

REPO = Path(__file__).resolve().parents[2]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def drive(tmp_path: Path, *argv: str) -> dict[str, dict[str, str]]:
    """Run the driver in a process of its own; what each call's caller was told, by session and call id."""
    command = [sys.executable, "-m", "tests.adapters.threads_driver", argv[0], str(tmp_path), *argv[1:]]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=REPO,
                              stdin=subprocess.DEVNULL, preexec_fn=_limit_memory, env={**os.environ})
    except subprocess.TimeoutExpired as exc:
        stderr = (exc.stderr or b"")[-4000:]
        pytest.fail(f"the driver did not finish within {RUN_TIMEOUT_S} s (a hang); stderr: {stderr!r}")
    assert done.returncode == 0, done.stderr[-4000:]
    told: dict[str, dict[str, str]] = json.loads(done.stdout.splitlines()[-1])
    return told


def log_of(root: Path, session: str) -> tuple[Path, list[Any]]:
    [path] = [path for path in root.rglob("session*.jsonl*") if path.parent.name == session]
    return path, list(read_session(path).events)


def plan_shown(path: Path) -> Any:
    """What ``dsh-todo plan PATH --json`` prints, run as a person runs it."""
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "plan", str(path), "--json"], capture_output=True,
                          text=True, timeout=60, cwd=REPO, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_holds(tmp_path: Path, session: str, told: dict[str, str]) -> list[Any]:
    path, events = log_of(tmp_path, session)
    assert_calls_inside_their_turns(events, told)
    assert plan_shown(path) == last_plan(events)
    return events


@pytest.fixture
def google_adk() -> None:
    needs.module("google.adk", "google-adk is not installed")


@pytest.fixture
def langchain_core() -> None:
    needs.module("langchain_core", "langchain-core is not installed")


def kinds(events: list[Any]) -> list[str]:
    return [event["type"] for event in events]




@pytest.mark.usefixtures("google_adk")
@pytest.mark.parametrize("calls", [2, 3])
def test_parallel_calls_of_an_adk_live_run_on_the_tool_thread_pool_all_land(tmp_path: Path, calls: int) -> None:
    """Issue 34, item 1. With ``RunConfig(tool_thread_pool_config=ToolThreadPoolConfig())`` (ADK's documented way
    to keep a live session responsive) every call of our tool runs on its own pool thread and its own event loop,
    and the binding serialised them with one ``asyncio.Lock``: with two parallel ``todo_write`` calls the turn hung
    for ever and the process could not exit; with three the run died with ``RuntimeError: … Lock … is bound to a
    different event loop``. Repro: ``Runner.run_live`` with a scripted ``BaseLlmConnection``,
    ``ToolThreadPoolConfig(max_workers=4)``, one model turn with two or three ``todo_write`` calls."""
    told = drive(tmp_path, "adk-live", str(calls))["live"]
    assert sorted(told) == [f"c{index}" for index in range(calls)]
    assert told == {f"c{index}": f"Updated todo list: {9 - index} pending, 1 in progress, {index} completed."
                    for index in range(calls)}
    events = assert_holds(tmp_path, "live", told)
    assert kinds(events).count("turn/start") == 1
    assert kinds(events).count("todo/write") == calls
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


@pytest.mark.usefixtures("google_adk")
def test_a_cancelled_adk_live_run_lands_no_call_after_its_turn_end(tmp_path: Path) -> None:
    """Issue 34, item 1. A cancelled live run's call landed after its ``turn/end``: the run's task is cancelled
    while the first of three parallel calls is in flight on its pool thread (held there half a second), and the
    turn closed on the loop thread while the call went on in its own. Now the turn's end waits for the call in
    flight and answers it with its real result; the calls that had not started yet run no more in that turn."""
    told = drive(tmp_path, "adk-live-cancel", "3")["live"]
    events = assert_holds(tmp_path, "live", told)
    assert kinds(events) == ["turn/start", "step/start", "assistant/message", "tool/call", "todo/write",
                             "tool/result", "step/end", "turn/end"]
    # The call in flight when the run was cancelled (the first to reach the writer: c0 as a rule, another one when
    # its pool thread started first) ended inside the run's turn with its real answer; the two calls waiting for it
    # on their pool threads were answered aborted and never logged.
    first = events[3]["data"]["callId"]
    index = int(first.removeprefix("c"))
    assert told == {f"c{call}": f"Updated todo list: {9 - index} pending, 1 in progress, {index} completed."
                    if call == index else ABORTED for call in range(3)}
    assert answer_text(events[5]) == told[first]
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}


@pytest.mark.usefixtures("langchain_core")
def test_a_cancelled_sync_langchain_agent_on_its_executor_thread_never_writes_after_the_turn(tmp_path: Path) -> None:
    """Issue 34, item 2. A synchronous agent awaited from async code (``await RunnableLambda(agent).ainvoke(...)``,
    LangChain's executor) and cancelled mid-call: ``Turns._close`` answered the call ``aborted`` and wrote
    ``turn/end`` on the loop thread while the worker thread was still in ``Turns._run``, which then appended
    ``todo/write`` and ``tool/result`` after ``turn/end``. The model was told ``Updated todo list: …``, the log said
    aborted, and ``dsh-todo plan`` showed the aborted list; with 10-item lists and random cancels, 1–5 of 40 logs
    ended a turn with a call unanswered. Here: 40 runs, three 10-item calls each, cancelled at a random moment."""
    runs = 40
    told = drive(tmp_path, "langchain-cancel", str(runs), "34")
    assert len(told) == runs
    for run in range(runs):
        session = f"run{run}"
        assert sorted(told[session]) == [f"r{run}c{call}" for call in range(3)], session
        assert_holds(tmp_path, session, told[session])


@pytest.mark.parametrize("framework", ["pydantic-ai", "openai-agents"])
def test_sync_runs_on_several_threads_share_one_binding(tmp_path: Path, framework: str) -> None:
    """The same lock in the other adapters' thread mode: each of three threads runs a framework's synchronous run
    (``Agent.run_sync``, ``Runner.run_sync``), so each runs its calls in an event loop of its own, on one binding.
    With the binding's ``asyncio.Lock`` a call waiting for another loop's call was never woken (a hang) or refused
    (``RuntimeError: … bound to a different event loop``)."""
    module = {"pydantic-ai": "pydantic_ai", "openai-agents": "agents"}[framework]
    needs.module(module, f"{framework} is not installed")
    told = drive(tmp_path, f"{framework}-threads", "3")["threads"]
    assert sorted(told) == [f"t{run}c{call}" for run in range(3) for call in range(2)]
    assert all(text.startswith("Updated todo list: ") for text in told.values())
    events = assert_holds(tmp_path, "threads", told)
    assert kinds(events).count("todo/write") == 6
