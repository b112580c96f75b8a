"""DSH writes, we read: sessions made by real ``dsh`` 0.2.1 turns through ``todo_write``, read by ``dsh-todo``.

One module-scoped set of sessions serves every test here (they only read it), made by seven ``dsh headless`` turns
against one scripted model (:mod:`tests.dsh.model`), in two homes side by side after the first:

- a zstd home (DSH's default encoding), whose root first gets two older sessions: **one of ours** (``dsh-todo
  run``) and **DSH 0.1.1's** ``a-one-turn`` fixture (format v0, so the root stays a mixed v0/v4 one whatever
  format our writer writes); ``--latest`` must pass over both. Then DSH's ``mixed`` (turn 1: a valid list with two
  items ``in_progress``, one content padded with spaces, non-ASCII ones; a duplicate content and two invalid
  argument sets, all refused; a list all completed; turn 2: a text answer, which clears the standing plan) and
  ``single`` (``--patch`` ``tool-todo`` ``allowParallelInProgress: false``: a second ``in_progress`` refused,
  then a list with one);
- a raw home (``--patch`` ``compression: none``) with ``raw`` (the same two turns as ``mixed``), ``empty`` (a
  list, then the empty list) and ``broken`` (a list, then arguments that are not JSON: DSH's Messages adapter
  refuses the stream before any tool sees it, ``MALFORMED_RESPONSE``, so the turn ends ``error`` and ``dsh``
  exits 1; over this wire a model cannot hand ``todo_write`` non-JSON or non-object arguments at all).

A copy of each home is taken right after ``mixed``'s and ``raw``'s first turn: DSH writes its projection cache when
it exits, and the second turn's ``turn/start`` clears the standing plan, so each turn's plan is DSH's cache in the
copy taken after it..
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.carriers.mcp.agents.common import fake_model
from tests.conftest import fixtures_dir
from tests.dsh import ours
from tests.dsh.model import Call, Say, Step, call, steps
from tests.dsh.runtime import (
    RAW_PATCH,
    SINGLE_PATCH,
    Home,
    Scratch,
    Turn,
    exported,
    log_lines,
    log_of,
    projection,
    run_turn,
)

pytestmark = pytest.mark.slow  # the module's sessions cost several dsh turns of 1.3-1.7 s each


PADDED = "  watch the background build  "
CAFE = "réparer le café ☕ 修复"
FIRST = call(("inspect the failing test", "in_progress"), (PADDED, "in_progress"), (CAFE, "pending"))
DONE = (("inspect the failing test", "completed"), (PADDED.strip(), "completed"), (CAFE, "completed"))


def two_turns(tag: str) -> dict[str, list[Step]]:
    """``mixed``'s (and ``raw``'s) two turns, with prompts of their own (``tag``) so one model serves both."""
    return {
        f"{tag} TASK-ONE: plan, then work": [
            FIRST,
            call(("inspect the failing test", "completed"), ("inspect the failing test ", "in_progress")),
            call(("inspect the failing test", "done")),
            Call('{"todos": "nope"}'),
            call(*DONE),
            Say("DONE"),
        ],
        f"{tag} TASK-TWO: anything else?": [Say("nothing left to plan")],
    }


TWO_TURN_RESULTS = [
    "Updated todo list: 1 pending, 2 in progress, 0 completed.",
    'Error: invalid todos: duplicate content "inspect the failing test"',
    'Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]',
    'Error: invalid arguments: "todos" must be an array',
    "Updated todo list: 0 pending, 0 in progress, 3 completed.",
]
"""What DSH answered each call of the first turn (SPEC §2's texts)."""

EMPTY = {"EMPTY: plan, then drop it": [call(("a", "in_progress")), Call('{"todos": []}'), Say("dropped")]}
BROKEN = {"BROKEN: plan, then garble": [call(("x", "in_progress")), Call('{"todos": [{"content": "unfinished')]}
SINGLE = {"SINGLE: one at a time": [call(("a", "in_progress"), ("b", "in_progress")),
                                    call(("a", "in_progress"), ("b", "pending")), Say("one at a time")]}
OURS = [{"tool_calls": [{"name": "todo_write", "arguments": json.dumps({"todos": [
            {"content": "our own step", "status": "in_progress"}]})}]},
        {"text": "ours is planned"}]


@dataclass
class Made:
    """The sessions of this module (see its docstring) and DSH's turns, by name."""

    zstd: Home
    zstd_after1: Home
    raw: Home
    raw_after1: Home
    cwd: Path
    ids: dict[str, str]
    turns: dict[str, list[Turn]]

    def home(self, name: str) -> Home:
        return getattr(self, name)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def made(dsh: Path, scratch: Scratch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    base = tmp_path_factory.mktemp("dsh-writes")
    cwd = base / "project"
    cwd.mkdir()
    zstd, raw = Home.make(base / "zstd", scratch), Home.make(base / "raw", scratch)
    turns: dict[str, list[Turn]] = {}
    ids: dict[str, str] = {"ours": ours.new_session_id()}
    done = ours.run_script(zstd.sessions, cwd, ids["ours"], OURS, "OURS: plan one step")
    assert done.returncode == 0, done.stderr
    old = fixtures_dir() / "dsh-sessions" / "a-one-turn" / "zstd"
    ids["v0"] = json.loads((old / "expected.json").read_text(encoding="utf-8"))["sessionId"]
    shutil.copytree(old / "store", zstd.sessions, dirs_exist_ok=True)
    script = {**two_turns("MIXED"), **two_turns("RAW"), **EMPTY, **BROKEN, **SINGLE}
    copies: dict[str, Home] = {}

    def turn(home: Home, name: str, prompt: str, patch: str | None, url: str, status: int = 0) -> None:
        result = run_turn(dsh, home, cwd, prompt, url, session_id=ids.get(name), patch=patch)
        assert result.returncode == status, result.describe()
        ids.setdefault(name, result.session_id)
        turns.setdefault(name, []).append(result)

    with fake_model(steps(script)) as model:
        url = model.url
        prompts = list(script)

        # The first turn alone: a fresh $HOME gets DSH's 81 MB unpacked into it, which two at once could race on.
        turn(zstd, "mixed", prompts[0], None, url)
        copies["zstd"] = zstd.copy(base / "zstd-after1")

        def zstd_turns() -> None:
            turn(zstd, "mixed", prompts[1], None, url)
            turn(zstd, "single", prompts[6], SINGLE_PATCH, url)

        def raw_turns() -> None:
            turn(raw, "raw", prompts[2], RAW_PATCH, url)
            copies["raw"] = raw.copy(base / "raw-after1")
            turn(raw, "raw", prompts[3], RAW_PATCH, url)
            turn(raw, "empty", prompts[4], RAW_PATCH, url)
            turn(raw, "broken", prompts[5], RAW_PATCH, url, status=1)

        # The two homes' turns run side by side (the dicts above take distinct keys from each thread).
        with ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(zstd_turns), pool.submit(raw_turns)]:
                future.result()
    yield Made(zstd, copies["zstd"], raw, copies["raw"], cwd, ids, turns)


# (case, the home holding DSH's state after that turn, the session)
AFTER_EACH_TURN = [
    ("zstd-turn-1", "zstd_after1", "mixed"),
    ("zstd-turn-2", "zstd", "mixed"),
    ("raw-turn-1", "raw_after1", "raw"),
    ("raw-turn-2", "raw", "raw"),
    ("empty-list", "raw", "empty"),
    ("non-json-arguments", "raw", "broken"),
    ("single-policy", "zstd", "single"),
]
CASES = pytest.mark.parametrize(("home_name", "session"), [case[1:] for case in AFTER_EACH_TURN],
                                ids=[case[0] for case in AFTER_EACH_TURN])


def tool_results(turn: Turn) -> list[str]:
    return [event["result"] for event in turn.events if event.get("type") == "tool_result"]


# -- DSH's own behaviour: what the tests below compare against -----------------------------------------------------

def test_dsh_answered_each_call_with_the_contract_texts(made: Made) -> None:
    """The scripted calls did what the tests assume: DSH validated them with SPEC §2's texts, word for word."""
    for name in ("mixed", "raw"):
        first, second = made.turns[name]
        assert tool_results(first) == TWO_TURN_RESULTS
        assert tool_results(second) == []
    assert tool_results(made.turns["empty"][0]) == ["Updated todo list: 0 pending, 1 in progress, 0 completed.",
                                                    "Updated todo list: 0 pending, 0 in progress, 0 completed."]
    broken = made.turns["broken"][0]
    assert tool_results(broken) == ["Updated todo list: 0 pending, 1 in progress, 0 completed."]
    assert broken.events[-2]["reason"] == {"kind": "error", "error": {
        "message": "DeepSeek Messages stream: tool input is invalid JSON", "code": "MALFORMED_RESPONSE"}}
    assert tool_results(made.turns["single"][0]) == [
        "Error: invalid todos: at most one task may be in_progress (got 2)",
        "Updated todo list: 1 pending, 1 in progress, 0 completed."]


def test_dsh_projection_is_the_standing_plan(made: Made) -> None:
    """DSH's ``todos`` projection after each turn: the last accepted list with contents trimmed (non-ASCII kept),
    null once a later turn started, the empty list when the model wrote one, kept by a turn that ended ``error``."""
    done = [{"content": content, "status": status} for content, status in DONE]
    assert projection(made.zstd_after1, made.ids["mixed"]) == done
    assert projection(made.raw_after1, made.ids["raw"]) == done
    assert projection(made.zstd, made.ids["mixed"]) is None
    assert projection(made.raw, made.ids["raw"]) is None
    assert projection(made.raw, made.ids["empty"]) == []
    assert projection(made.raw, made.ids["broken"]) == [{"content": "x", "status": "in_progress"}]
    assert projection(made.zstd, made.ids["single"]) == [{"content": "a", "status": "in_progress"},
                                                         {"content": "b", "status": "pending"}]


def test_dsh_writes_one_v4_file_per_session_in_the_configured_encoding(made: Made) -> None:
    zstd, raw = "session.v4.jsonl.zstd", "session.v4.jsonl"
    for home, name, file in [(made.zstd, "mixed", zstd), (made.zstd, "single", zstd), (made.raw, "raw", raw)]:
        path = log_of(home.sessions, made.ids[name])
        assert path.name == file
        assert sorted(child.name for child in path.parent.iterdir()) == sorted([file, "session.lock"])
        header = json.loads(log_lines(path)[0])
        assert (header["version"], header["id"], header["cwd"], header["isSeeded"]) == (
            4, made.ids[name], str(made.cwd), False)


def test_dsh_export_is_the_stored_log_and_migrates_v0(dsh: Path, made: Made) -> None:
    """``dsh web``'s export (see :func:`tests.dsh.runtime.exported`): DSH's own zstd session and ours (format v4)
    come back as their stored lines; a format-v0 log (DSH 0.1.1's fixture) comes back migrated to v4 in memory
    (seqs shifted by the ``system/message`` it adds), each ``todo/write``'s data as stored; an unknown id is a
    404."""
    unknown = "session-00000000-0000-4000-8000-000000000000"
    names = ["mixed", "ours", "v0"]
    found = exported(dsh, made.zstd, [*(made.ids[name] for name in names), unknown])
    for name in ("mixed", "ours"):
        stored = log_lines(log_of(made.zstd.sessions, made.ids[name]))
        assert found[made.ids[name]] == b"".join(line + b"\n" for line in stored), name
    assert found[unknown] == 404
    for name in names[2:]:
        theirs = found[made.ids[name]]
        assert isinstance(theirs, bytes), f"DSH refused to export {name}: {theirs}"
        lines = [json.loads(line) for line in theirs.splitlines()]
        assert (lines[0]["version"], lines[0]["id"]) == (4, made.ids[name])
        original = [json.loads(line) for line in log_lines(log_of(made.zstd.sessions, made.ids[name]))]
        assert original[0]["version"] == 0
        assert [line["data"] for line in lines if line["type"] == "todo/write"] == [
            line["data"] for line in original if line["type"] == "todo/write"] != []


# -- our reader ------------------------------------------------------------------------------------------------------

@CASES
def test_plan_is_dsh_projection_after_each_turn(made: Made, home_name: str, session: str) -> None:
    home = made.home(home_name)
    assert ours.plan(home.sessions, made.ids[session]) == projection(home, made.ids[session])


@CASES
def test_events_are_the_log_lines_after_the_header(made: Made, home_name: str, session: str) -> None:
    """One event per line after the header (DSH 0.2.1 packs no chunk rows at the top level), in order, with
    every ``todo/write`` as written."""
    home = made.home(home_name)
    stored = [json.loads(line) for line in log_lines(log_of(home.sessions, made.ids[session]))[1:]]
    found = ours.events(home.sessions, made.ids[session])
    assert [(event["seq"], event["type"]) for event in found] == [(event["seq"], event["type"]) for event in stored]
    assert [event for event in found if event["type"] == "todo/write"] == [
        event for event in stored if event["type"] == "todo/write"]


@pytest.mark.parametrize("home_name", ["zstd", "raw", "zstd_after1"])
def test_sessions_lists_every_session_ok(made: Made, home_name: str) -> None:
    """Every session of the root, DSH 0.2.1's (format v4), 0.1.1's (v0) and ours, with verdict ``ok``."""
    home = made.home(home_name)
    names = {"zstd": ["ours", "v0", "mixed", "single"], "raw": ["raw", "empty", "broken"],
             "zstd_after1": ["ours", "v0", "mixed"]}
    assert ours.listing(home.sessions) == {made.ids[name]: "ok" for name in names[home_name]}


def test_latest_is_the_newest_dsh_session_over_an_older_one_of_ours(made: Made) -> None:
    """``plan --latest`` in the zstd root (ours and the v0 fixture first, then DSH's, ``single`` last) gives
    ``single``'s plan as DSH has it."""
    assert ours.plan(made.zstd.sessions, latest=True) == projection(made.zstd, made.ids["single"])


def test_web_lists_dsh_sessions(made: Made) -> None:
    rows = {row["sessionId"]: row for row in ours.web_rows(made.zstd.sessions)}
    assert set(rows) == {made.ids[name] for name in ("ours", "v0", "mixed", "single")}
    assert not any("error" in row for row in rows.values())
    single: Any = rows[made.ids["single"]]
    assert single["projections"]["values"]["todos"] == projection(made.zstd, made.ids["single"])
