"""One log, one verdict: ``plan``, ``events``, ``sessions`` and the web page (history tail and session list) over
every DSH fixture, intact and damaged, and over logs damaged on purpose, must all say the same thing.

The verdict is ``ok``, ``recovered`` (with the one-line note of what recovery did in memory) or ``refused`` (with
the one-line reason). For the DSH fixtures it must also be DSH's: a log DSH's loader refused is refused with DSH's
message, a log it repaired is recovered, an intact one is ok.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.cli import main
from dsh_todo.harness.persistence.jsonl.paths import decode_segment
from tests.carriers.web.conftest import Web
from tests.crafted import CRAFTED, FIXTURES, copy_fixture, flat_layout, mixed_encodings

FIXTURE_NAMES = sorted(str(path.parent.relative_to(FIXTURES)) for path in FIXTURES.rglob("expected.json"))

Verdict = tuple[str, str]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def command_verdict(capsys: pytest.CaptureFixture[str], command: str, log: Path) -> Verdict:
    code, _out, err = cli(capsys, command, str(log))
    prefix = f"dsh-todo {command}: "
    assert err.count("\n") <= 1 and (not err or err.startswith(prefix)), err
    said = err[len(prefix):].rstrip("\n")
    if code == 2:
        return "refused", said
    assert code == 0
    return ("recovered", said) if said else ("ok", "")


def sessions_verdict(capsys: pytest.CaptureFixture[str], root: Path, session_id: str) -> Verdict:
    code, out, err = cli(capsys, "sessions", "--root", str(root))
    assert (code, err) == (0, "")
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in out.splitlines()}
    said = rows[session_id][2]
    if said == "ok":
        return "ok", ""
    if said.startswith("refused: "):
        return "refused", said[len("refused: "):]
    return "recovered", said


def list_row(web: Web, session_id: str) -> dict[str, Any]:
    status, body = web.post("/api/session.list", {"type": "client-request", "rpcId": "l", "method": "session.list",
                                                  "payload": {}})
    assert status == 200, body
    rows = {row["sessionId"]: row for row in body["result"]["value"]["sessions"]}
    row: dict[str, Any] = rows[session_id]
    return row


def web_verdict(web: Web, session_id: str) -> Verdict:
    """The list row's verdict, checked against the history tail read of the same session."""
    row = list_row(web, session_id)
    status, body = web.history(session_id)
    result = body["result"]
    if "error" in row:
        assert status in (404, 422, 500) and not result["ok"]
        assert result["error"]["message"] == row["error"]["message"]
        return "refused", row["error"]["message"]
    assert status == 200 and result["ok"], body
    return ("recovered", row["recovered"]) if "recovered" in row else ("ok", "")


def all_verdicts(capsys: pytest.CaptureFixture[str], web: Web, log: Path, session_id: str) -> set[Verdict]:
    verdicts = {command_verdict(capsys, "plan", log), command_verdict(capsys, "events", log),
                sessions_verdict(capsys, web.root, session_id), web_verdict(web, session_id)}
    assert len(verdicts) == 1, verdicts
    return verdicts


def dsh_verdict(name: str, root: Path) -> Verdict:
    """What DSH's loader made of the fixture, as a verdict (the recovery note is checked by the readers' tests)."""
    expected = json.loads((FIXTURES / name / "expected.json").read_text(encoding="utf-8"))
    load = expected["load"]
    if not load["ok"]:
        # DSH 0.1.1 read v0 alone and called v1 newer; a harness reading v4 calls it older (DSH 0.2's text).
        newer = ("but this harness reads only v0: the log was written by a newer harness — upgrade the harness to "
                 "open it")
        return "refused", load["error"]["message"].replace("<root>", str(root)).replace(
            newer, "older than the supported v4, and this build ships no upgrade path for it")
    return ("recovered", "") if load.get("rewroteFile") else ("ok", "")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_dsh_fixture_gets_one_verdict_and_it_is_dshs(
        name: str, web: Web, capsys: pytest.CaptureFixture[str]) -> None:
    log = copy_fixture(name, web.root)
    ((state, reason),) = all_verdicts(capsys, web, log, decode_segment(log.parent.name))
    want_state, want_reason = dsh_verdict(name, web.root)
    assert state == want_state
    if state == "refused":
        assert reason == want_reason
    else:
        assert (reason == "") == (state == "ok")


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_every_crafted_damage_gets_one_verdict(name: str, web: Web, capsys: pytest.CaptureFixture[str]) -> None:
    log = CRAFTED[name](web.root)
    ((state, reason),) = all_verdicts(capsys, web, log, decode_segment(log.parent.name))
    assert state == ("recovered" if name == "torn-tail" else "refused"), reason


def test_the_flat_layout_gets_one_verdict(web: Web, capsys: pytest.CaptureFixture[str]) -> None:
    log = flat_layout(web.root)
    ((state, reason),) = all_verdicts(capsys, web, log, decode_segment(log.name.removesuffix(".jsonl")))
    assert state == "refused" and "in the retired flat layout" in reason


def test_raw_and_zstd_logs_under_one_root_are_both_ok(web: Web, capsys: pytest.CaptureFixture[str]) -> None:
    for log in mixed_encodings(web.root):
        assert all_verdicts(capsys, web, log, decode_segment(log.parent.name)) == {("ok", "")}
