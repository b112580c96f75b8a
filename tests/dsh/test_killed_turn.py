"""A killed ``dsh`` turn: what DSH appends when it reopens the log, and what ``dsh-todo`` reads from it.

The scripted model answers the turn's first step with a ``todo_write`` call and holds back its reply to the second
step (:class:`tests.dsh.model.Hold`); once the ``todo/write`` is on disk, ``dsh`` gets SIGKILL, mid-turn, with
step 2 open. Three copies of the home are then read:

- ``killed``: the log as the kill left it, for our reader (``dsh-todo events``, ``plan``);
- ``opened``: DSH's Python SDK opens the session without input and closes it
  (:func:`tests.dsh.runtime.opened`): DSH repairs the log (the interrupted turn's closers, then
  ``session/end-seed``) and writes its projection cache, with no new turn to clear the standing plan;
- ``resumed``: ``dsh headless --session-id ID "go on"``, a person's way back into the session: the same closers,
  then a new turn.

Our reader must give the closers DSH writes (SPEC §5.5, "Closing the crashed turn") and DSH's plan.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.carriers.mcp.agents.common import fake_model
from tests.dsh import ours
from tests.dsh.model import Hold, Say, call, steps
from tests.dsh.runtime import Home, Scratch, Turn, log_lines, log_of, opened, projection, run_turn, start_turn, turn_of

pytestmark = pytest.mark.slow  # the module's sessions cost several dsh turns of 1.3-1.7 s each


WRITTEN = [{"content": "write the test", "status": "completed"}, {"content": "fix the bug", "status": "in_progress"}]
WAIT_SECONDS = 60


@dataclass
class Killed:
    session_id: str
    killed: Home
    opened: Home
    resumed: Home
    resumed_turn: Turn

    def lines(self, home: Home) -> list[dict[str, Any]]:
        """The events of the session's log in ``home`` (the header left out)."""
        return [json.loads(line) for line in log_lines(log_of(home.sessions, self.session_id))[1:]]


def _wait_for_write(home: Home) -> None:
    """Until a ``todo/write`` is in a log under ``home`` (written in batches, up to 200 ms after the event)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for path in home.sessions.glob("--*--/*/session.v4.jsonl.zstd"):
            if any(b'"type":"todo/write"' in line for line in log_lines(path)):
                return
        time.sleep(0.05)
    raise AssertionError(f"no todo/write reached a log under {home.sessions} within {WAIT_SECONDS} s")


@pytest.fixture(scope="module")
def killed(dsh: Path, scratch: Scratch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Killed]:
    base = tmp_path_factory.mktemp("dsh-killed")
    cwd = base / "project"
    cwd.mkdir()
    home = Home.make(base / "home", scratch)
    hold = Hold()
    script = {"KILL: plan, then wait": [call(*[(item["content"], item["status"]) for item in WRITTEN]), hold],
              "KILL: go on": [Say("back again")]}
    with fake_model(steps(script)) as model:
        process = start_turn(dsh, home, cwd, "KILL: plan, then wait", model.url)
        try:
            assert hold.arrived.wait(WAIT_SECONDS), "dsh never asked for the held step"
            _wait_for_write(home)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            hold.released.set()
        gone = turn_of(process)
        assert gone.returncode == -signal.SIGKILL, gone.describe()
        session_id = gone.session_id
        kept = home.copy(base / "killed")
        reopened = home.copy(base / "opened")
        opened(reopened, cwd, session_id)
        resumed = home.copy(base / "resumed")
        turn = run_turn(dsh, resumed, cwd, "KILL: go on", model.url, session_id=session_id)
    yield Killed(session_id, kept, reopened, resumed, turn)


def _closers(made: Killed, home: Home) -> list[dict[str, Any]]:
    """What DSH appended to the killed log when it reopened it, before its ``session/end-seed``."""
    stored = made.lines(made.killed)
    after = made.lines(home)
    assert after[:len(stored)] == stored, "DSH rewrote the killed log's events"
    added = after[len(stored):]
    ends = [index for index, event in enumerate(added) if event["type"] == "session/end-seed"]
    assert ends, f"no session/end-seed among what DSH appended: {added}"
    return added[:ends[0]]


def test_dsh_closes_the_killed_turn_and_keeps_its_plan(killed: Killed) -> None:
    """DSH's repair of the killed log: the open step ended, the turn ended ``interrupted``, each closer continuing
    the seqs with the last stored event's time; the ``todo/write`` stands (a ``turn/end`` keeps the plan)."""
    stored = killed.lines(killed.killed)
    assert any(event["type"] == "todo/write" for event in stored)
    closers = _closers(killed, killed.opened)
    assert [event["type"] for event in closers][-1] == "turn/end"
    assert closers[-1]["data"]["reason"] == {"kind": "interrupted"}
    assert [event["seq"] for event in closers] == list(range(len(stored), len(stored) + len(closers)))
    assert {event["time"] for event in closers} == {stored[-1]["time"]}
    assert projection(killed.opened, killed.session_id) == WRITTEN


def test_dsh_resumes_a_killed_session(killed: Killed) -> None:
    """``dsh headless --session-id`` goes on after the kill: the same closers as an open without input, then a
    new turn, whose ``turn/start`` clears the standing plan."""
    assert killed.resumed_turn.returncode == 0, killed.resumed_turn.describe()
    assert _closers(killed, killed.resumed) == _closers(killed, killed.opened)
    assert projection(killed.resumed, killed.session_id) is None


def test_events_are_the_stored_events_and_dsh_closers(killed: Killed) -> None:
    """``dsh-todo events`` of the killed log: the stored events, then the closers recovery appends in memory,
    exactly those DSH writes when it reopens the file."""
    expected = killed.lines(killed.killed) + _closers(killed, killed.resumed)
    assert ours.events(killed.killed.sessions, killed.session_id) == expected


def test_plan_of_the_killed_log_is_dsh_plan(killed: Killed) -> None:
    assert ours.plan(killed.killed.sessions, killed.session_id) == projection(killed.opened, killed.session_id)
