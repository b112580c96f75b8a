"""We write, DSH resumes: a session ``dsh-todo run`` wrote under ``$DSH_HOME/sessions``, continued by real ``dsh``.

``dsh-todo run --script`` plays one turn in a project folder (a valid list, a refused call, a text answer); then,
in the same folder with the same home:

- DSH's Python SDK opens the session without input, on a copy of the home (:func:`tests.dsh.runtime.opened`):
  DSH's ``todos`` projection must be what our log's last ``todo/write`` said. The comparison is made there, not
  after a DSH turn, because a new turn's ``turn/start`` clears the standing plan (SPEC §5.4): DSH's plan after its
  own turn is null whatever we wrote, and says nothing about how DSH read our log;
- ``dsh headless --session-id ID "go on"`` must exit 0 with our history in the model request it sends (our
  ``Updated todo list: …`` result as a ``tool_result`` block, our refused call's ``Error: …`` with
  ``is_error: true``), and our reader must then agree with DSH on the plan (null).

DSH 0.2.1-rc.2 can open no format-v0 log for writing (its migration fails to load, see DSH-0.2.md): these pass
because our writer writes format v4.

One encoding per root: DSH configured for one encoding refuses to start in a root holding a log of the other.
Our writer takes the root's encoding (issue 32), so a ``dsh-todo run`` asking for the other one into DSH's root
must not stop ``dsh`` from starting there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.carriers.mcp.agents.common import FakeModel, fake_model
from tests.dsh import ours
from tests.dsh.model import Say, steps
from tests.dsh.runtime import RAW_PATCH, Home, Scratch, Turn, opened, projection, run_turn

pytestmark = pytest.mark.slow  # the module's sessions cost several dsh turns of 1.3-1.7 s each


PLANNED = [{"content": "read the code", "status": "completed"},
           {"content": "write the fix", "status": "in_progress"},
           {"content": "run the tests", "status": "pending"}]
REPLIES = [
    {"tool_calls": [{"name": "todo_write", "arguments": json.dumps({"todos": PLANNED})}]},
    {"tool_calls": [{"name": "todo_write", "arguments": json.dumps({"todos": [
        {"content": "read the code", "status": "done"}]})}]},
    {"text": "planned"},
]
RESULTS = [("Updated todo list: 1 pending, 1 in progress, 1 completed.", False),
           ('Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]', True)]
"""Our two calls' results as the model must read them back: text, and whether flagged an error."""

SCRIPT = {"WE WROTE: go on": [Say("going on")],
          "ONE ENCODING: zstd": [Say("started")],
          "ONE ENCODING: raw": [Say("started")],
          "ONE ENCODING: raw again": [Say("started")]}


@dataclass
class Written:
    session_id: str
    cwd: Path
    home: Home
    opened: Home
    opened_error: BaseException | None
    turn: Turn
    model: FakeModel


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModel]:
    with fake_model(steps(SCRIPT)) as served:
        yield served


@pytest.fixture(scope="module")
def written(dsh: Path, scratch: Scratch, model: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Written:
    base = tmp_path_factory.mktemp("we-write")
    cwd = base / "project"
    cwd.mkdir()
    home = Home.make(base / "home", scratch)
    session_id = ours.new_session_id()
    done = ours.run_script(home.sessions, cwd, session_id, REPLIES, "plan the fix")
    assert done.returncode == 0, done.stderr
    copy = home.copy(base / "opened")
    error = None
    try:
        opened(copy, cwd, session_id)
    except Exception as exc:  # DSH could not open our log: the tests that need its view say so
        error = exc
    turn = run_turn(dsh, home, cwd, "WE WROTE: go on", model.url, session_id=session_id)
    return Written(session_id, cwd, home, copy, error, turn, model)


def _step_request(model: FakeModel, prompt: str) -> dict[str, Any]:
    found = [request.body for request in model.requests if isinstance(request.body, dict) and request.body.get("tools")
             and any(block.get("text") == prompt for message in request.body["messages"]
                     for block in (message["content"] if isinstance(message["content"], list) else []))]
    assert found, f"dsh sent no step request for {prompt!r}"
    return found[0]


def test_dsh_resumes_our_session(written: Written) -> None:
    assert written.turn.returncode == 0, written.turn.describe()
    assert written.turn.session_id == written.session_id


def test_dsh_sends_the_model_our_history(written: Written) -> None:
    """Each of our results reaches the model as a ``tool_result`` answering our ``todo_write`` call, with our text
    and the error flag: DSH read our log's ``tool/result`` events, not a placeholder."""
    assert written.turn.returncode == 0, written.turn.describe()
    body = _step_request(written.model, "WE WROTE: go on")
    calls: dict[str, Any] = {}
    results = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_use":
                calls[block["id"]] = block
            elif block.get("type") == "tool_result":
                assert calls[block["tool_use_id"]]["name"] == "todo_write"
                results.append(("".join(part["text"] for part in block["content"]), block["is_error"]))
    assert results == RESULTS
    assert [call["input"] for call in calls.values()] == [json.loads(reply["tool_calls"][0]["arguments"])
                                                          for reply in REPLIES[:2]]


def test_dsh_plan_of_our_session_is_our_last_write(written: Written) -> None:
    assert written.opened_error is None, f"DSH could not open our session: {written.opened_error}"
    last = [event["data"]["todos"] for event in ours.events(written.home.sessions, written.session_id)
            if event["type"] == "todo/write"]
    assert projection(written.opened, written.session_id) == PLANNED == last[0]


def test_after_dsh_turn_both_plans_are_cleared(written: Written) -> None:
    assert written.turn.returncode == 0, written.turn.describe()
    assert projection(written.home, written.session_id) is None
    assert ours.plan(written.home.sessions, written.session_id) is None


# -- one encoding per root -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def raw_root(dsh: Path, scratch: Scratch, model: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Home:
    """A home whose root holds one raw log of DSH's own (``--patch`` ``compression: none``); tests use copies."""
    home = Home.make(tmp_path_factory.mktemp("raw-root") / "home", scratch)
    (home.path.parent / "project").mkdir()
    turn = run_turn(dsh, home, home.path.parent / "project", "ONE ENCODING: raw", model.url, patch=RAW_PATCH)
    assert turn.returncode == 0, turn.describe()
    return home


def test_dsh_refuses_a_root_of_two_encodings(dsh: Path, raw_root: Home, model: FakeModel, tmp_path: Path) -> None:
    """DSH's rule, which ours follows: ``dsh`` configured for zstd does not start in a root holding a raw log,
    and says why (the message pinned as DSH 0.2.1-rc.2 prints it)."""
    home = raw_root.copy(tmp_path / "home")
    refused = run_turn(dsh, home, raw_root.path.parent / "project", "ONE ENCODING: zstd", model.url)
    assert refused.returncode == 1
    raw_log = next(home.sessions.glob("--*--/*/session.v4.jsonl"))
    assert f'session artifact "{raw_log}" uses .jsonl, but this backend is configured for compression "zstd"; ' \
           "use a separate root or select the matching compression mode" in refused.stderr


def test_our_raw_request_in_a_zstd_root_leaves_dsh_working(dsh: Path, written: Written, model: FakeModel,
                                                         tmp_path: Path) -> None:
    """``dsh-todo run --compression none`` into DSH's zstd root is refused in one line naming the root's encoding
    (exit 2, nothing written), and ``dsh`` (zstd, its default) still starts a session there."""
    home = written.home.copy(tmp_path / "home")
    before = sorted(home.sessions.rglob("*"))
    session_id = ours.new_session_id()
    done = ours.run_script(home.sessions, written.cwd, session_id, REPLIES, "ours, raw asked",
                           "--compression", "none")
    assert done.returncode == 2, done.stderr
    refusal = [line for line in done.stderr.splitlines() if line.startswith("dsh-todo run:")]
    assert len(refusal) == 1 and 'keeps its logs in compression "zstd"' in refusal[0] and '"none"' in refusal[0]
    assert "Traceback" not in done.stderr
    assert sorted(home.sessions.rglob("*")) == before
    turn = run_turn(dsh, home, written.cwd, "ONE ENCODING: zstd", model.url)
    assert turn.returncode == 0, turn.describe()


def test_our_default_in_a_raw_root_leaves_dsh_working(dsh: Path, raw_root: Home, model: FakeModel,
                                                      tmp_path: Path) -> None:
    """``dsh-todo run`` (zstd by default) into a root where DSH keeps raw logs writes raw, so ``dsh`` configured
    for raw logs still starts a session there."""
    home = raw_root.copy(tmp_path / "home")
    cwd = raw_root.path.parent / "project"
    done = ours.run_script(home.sessions, cwd, ours.new_session_id(), REPLIES, "ours, default")
    assert done.returncode == 0, done.stderr
    turn = run_turn(dsh, home, cwd, "ONE ENCODING: raw again", model.url, patch=RAW_PATCH)
    assert turn.returncode == 0, turn.describe()
