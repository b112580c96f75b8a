"""``plan``, ``events``, ``sessions`` and ``watch`` over damaged logs: one reader, one verdict, one line, no traceback.

Each test's docstring keeps the repro of the defect it pins (what the commands did before there was one reader).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from dsh_todo.cli import main
from tests.crafted import (
    A_ID,
    B_ID,
    both_encodings,
    broken_json_middle,
    copied_elsewhere,
    copy_fixture,
    flat_layout,
    malformed_todos,
    mixed_encodings,
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> dict[str, list[str]]:
    """``sessions`` output: id -> [plan label, where, verdict]."""
    table = {}
    for line in out.splitlines():
        session_id, *rest = line.split("\t")
        table[session_id] = rest
    return table


def test_broken_json_after_a_good_envelope_is_refused_by_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: b-three-turns/none with its first ``step/end`` line's JSON broken (envelope intact), turns ending
    after it. ``dsh-todo plan LOG`` exited 0 and showed ``[]`` (the fast scan checked envelopes only), ``events``
    refused it as corrupt, ``sessions`` listed it as healthy."""
    log = broken_json_middle(tmp_path)
    reason = "corrupt session log: unparsable committed event at line 24"
    assert run(capsys, "plan", str(log)) == (2, "", f"dsh-todo plan: {reason}\n")
    assert run(capsys, "plan", "--json", str(log)) == (2, "", f"dsh-todo plan: {reason}\n")
    assert run(capsys, "events", str(log)) == (2, "", f"dsh-todo events: {reason}\n")
    code, out, err = run(capsys, "sessions", "--root", str(tmp_path))
    assert (code, err) == (0, "")
    assert rows(out) == {B_ID: ["-", str(log), f"refused: {reason}"]}


def test_a_log_copied_into_another_session_directory_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: copy a session directory to ``<project>/a-copy/``; ``dsh-todo plan <copy>`` said only
    ``corrupt session log "<copy>": header id "…" and cwd identify "<original>"``: no reason, no remedy."""
    copy = copied_elsewhere(tmp_path)
    original = tmp_path / "--home-dev-projects-demo--" / A_ID / "session.jsonl"
    code, out, err = run(capsys, "plan", str(copy))
    assert (code, out) == (2, "")
    assert err == (f'dsh-todo plan: {copy} is not where its header puts it: the header names session "{A_ID}" '
                   f'(cwd "/home/dev/projects/demo"), whose log belongs at {original}; a copied log keeps its '
                   "original id, so move it to that place (under this root or another) to read it\n")
    assert err.count("\n") == 1


def test_one_damaged_session_never_hides_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: a root with a healthy session and a copy of it in another session directory. ``dsh-todo sessions
    ROOT`` failed as a whole (``dsh-todo sessions: corrupt session log …``) and listed nothing."""
    copy = copied_elsewhere(tmp_path)
    code, out, err = run(capsys, "sessions", "--root", str(tmp_path))
    assert (code, err) == (0, "")
    table = rows(out)
    assert set(table) == {A_ID, "a-copy"}
    assert table[A_ID][0] == "2 in progress · 1 pending"
    assert table[A_ID][2] == "ok"
    assert table["a-copy"][:2] == ["-", str(copy)]
    assert table["a-copy"][2].startswith(f"refused: {copy} is not where its header puts it")


@pytest.mark.parametrize(("payload", "why"), [
    (b'{"todos":"x"}', "todos must be a list or null"),
    (b'{"todos":[{"content":"a","status":"done"}]}', "todos[0].status must be one of pending, in_progress, "
                                                      "completed"),
])
def test_a_malformed_standing_todo_write_is_reported_not_raised(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], payload: bytes, why: str) -> None:
    """Repro: b-three-turns/none whose last ``todo/write`` carries ``{"todos":"x"}``. ``dsh-todo plan``,
    ``sessions`` and ``watch`` ended in a Python traceback (``InvalidTodosView``)."""
    log = malformed_todos(tmp_path, payload)
    reason = f"the standing plan cannot be shown: the todo/write at seq 165 is malformed ({why})"
    assert run(capsys, "plan", str(log)) == (2, "", f"dsh-todo plan: {reason}\n")
    assert run(capsys, "events", str(log)) == (2, "", f"dsh-todo events: {reason}\n")
    code, out, _ = run(capsys, "sessions", "--root", str(tmp_path))
    assert code == 0
    assert rows(out) == {B_ID: ["-", str(log), f"refused: {reason}"]}


def test_watch_reports_a_malformed_plan_and_keeps_watching(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo watch LOG`` on a log whose standing ``todo/write`` is ``{"todos":"x"}`` died with a
    traceback on the first poll. Now it says so once, and shows the plan when the log is fixed."""
    log = malformed_todos(tmp_path)
    good = log.read_bytes().replace(b'"data":{"todos":"x"}', b'"data":{"todos":[]}')

    def fix() -> None:
        time.sleep(0.5)
        log.write_bytes(good)

    fixer = threading.Thread(target=fix)
    fixer.start()
    code, out, err = run(capsys, "watch", str(log), "--seconds", "1.5", "--interval", "0.05")
    fixer.join()
    assert code == 0
    assert err == ("dsh-todo watch: the standing plan cannot be shown: the todo/write at seq 165 is malformed "
                   "(todos must be a list or null)\n")
    assert out.splitlines() == ["plan: empty"]


def test_raw_and_zstd_logs_mix_under_one_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: a root with a raw log (a/none) and a zstd log (b/zstd). ``dsh-todo sessions ROOT`` failed with
    ``… uses .jsonl, but this backend is configured for compression "zstd"; … select the matching compression
    mode``. Each log's encoding is now detected from its file."""
    raw, zstd = mixed_encodings(tmp_path)
    code, out, err = run(capsys, "sessions", "--root", str(tmp_path))
    assert (code, err) == (0, "")
    assert rows(out) == {A_ID: ["2 in progress · 1 pending", str(raw), "ok"],
                         B_ID: ["empty plan", str(zstd), "ok"]}
    for session_id, expected in ((A_ID, 3), (B_ID, 0)):
        code, out, err = run(capsys, "plan", "--json", "--root", str(tmp_path), session_id)
        assert (code, err) == (0, "")
        assert len(json.loads(out)) == expected


def test_both_encodings_in_one_session_directory_stay_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DSH refuses a session whose directory holds both files; so does every command (one line, the others shown)."""
    raw = both_encodings(tmp_path)
    copy_fixture("a-one-turn/zstd", tmp_path)
    reason = (f"session directory {raw.parent} holds both session.jsonl and session.jsonl.zstd; a session is "
              "stored in one encoding: keep the one you want and move the other away")
    assert run(capsys, "plan", str(raw.parent)) == (2, "", f"dsh-todo plan: {reason}\n")
    assert run(capsys, "plan", "--root", str(tmp_path), B_ID) == (2, "", f"dsh-todo plan: {reason}\n")
    code, out, _ = run(capsys, "sessions", "--root", str(tmp_path))
    assert code == 0
    table = rows(out)
    assert table[B_ID] == ["-", str(raw.parent), f"refused: {reason}"]
    assert table[A_ID][2] == "ok"


def test_the_flat_layout_stays_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flat = flat_layout(tmp_path)
    copy_fixture("a-one-turn/zstd", tmp_path)
    target = flat.parent / B_ID / "session.jsonl"
    reason = f'"{flat}" is a session log in the retired flat layout; move it to "{target}" to read it'
    assert run(capsys, "plan", "--root", str(tmp_path), B_ID) == (2, "", f"dsh-todo plan: {reason}\n")
    code, out, _ = run(capsys, "sessions", "--root", str(tmp_path))
    assert code == 0
    table = rows(out)
    assert table[B_ID] == ["-", str(flat), f"refused: {reason}"]
    assert table[A_ID][2] == "ok"


def test_sessions_are_named_by_path_or_by_id_under_a_root(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    log = copy_fixture("a-one-turn/zstd", tmp_path / "root")
    by_path = run(capsys, "events", str(log))
    assert by_path[0] == 0
    assert run(capsys, "events", "--root", str(tmp_path / "root"), A_ID) == by_path
    monkeypatch.setenv("DSH_TODO_ROOT", str(tmp_path / "root"))
    assert run(capsys, "events", A_ID) == by_path
    assert run(capsys, "sessions")[1] == run(capsys, "sessions", "--root", str(tmp_path / "root"))[1]
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "plan", "nope") == (
        2, "", f'dsh-todo plan: nope does not exist, and no session of that id is stored under {tmp_path / "root"}\n')


def test_recovery_is_reported_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = copy_fixture("damaged/raw-torn-tail", tmp_path)
    size = log.stat().st_size
    note = ("recovered in memory (the log is unchanged): ignored a torn tail from byte 21744; closed the interrupted "
            "turn 3 with tool/result, step/end, turn/end")
    code, out, err = run(capsys, "plan", "--json", str(log))
    assert (code, out, err) == (0, "[]\n", f"dsh-todo plan: {note}\n")
    code, out, err = run(capsys, "events", str(log))
    assert (code, err) == (0, f"dsh-todo events: {note}\n")
    assert len(out.splitlines()) == 169
    assert rows(run(capsys, "sessions", "--root", str(tmp_path))[1]) == {B_ID: ["empty plan", str(log), note]}
    assert log.stat().st_size == size


def test_a_checkpoint_never_vouches_for_a_damaged_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log our runtime wrote, with its projection checkpoint beside it, then damaged before the checkpoint's
    offset (JSON broken after a good envelope, the size unchanged). The checkpoint read (the old ``plan`` path)
    still showed the plan from the checkpoint; every reader must refuse the log as the exact read does."""
    import asyncio

    from dsh_todo.harness import Agent
    from dsh_todo.harness.persistence.jsonl.checkpoint import CHECKPOINT_NAME
    from dsh_todo.standard import open_runtime

    ctx = open_runtime(tmp_path, compression="none", batch_delay_ms=1)
    session = ctx.sessions.create("cp", cwd="/w")
    for turn in (1, 2):
        session.append("turn/start", {"turn": turn})
        asyncio.run(ctx.tools.execute("todo_write", {"todos": [{"content": "a", "status": "in_progress"}]},
                                      agent=Agent("a", session)))
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    ctx.dispose()
    log = next(tmp_path.glob("*/cp/session.v4.jsonl"))
    assert (log.parent / CHECKPOINT_NAME).is_file()
    lines = log.read_bytes().split(b"\n")
    # The first turn's todo/write, long before the checkpoint's offset; same size, so the offset stays a line start.
    lines[2] = lines[2][:-1] + b"]"
    log.write_bytes(b"\n".join(lines))
    reason = "corrupt session log: unparsable committed event at line 2"
    assert run(capsys, "plan", str(log)) == (2, "", f"dsh-todo plan: {reason}\n")
    assert rows(run(capsys, "sessions", "--root", str(tmp_path))[1]) == {"cp": ["-", str(log), f"refused: {reason}"]}


def test_an_event_the_fold_cannot_take_refuses_the_plan_even_before_the_standing_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """b-three-turns/none whose *first* ``todo/write`` has no ``data``: the standing plan is a later write, but the
    page's projection fold breaks on the first one, so every reader refuses the log, naming that event."""
    log = copy_fixture("b-three-turns/none", tmp_path)
    lines = log.read_bytes().split(b"\n")
    index = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"todo/write"'))
    seq = json.loads(lines[index])["seq"]
    lines[index] = lines[index][:lines[index].index(b',"data":')] + b"}"
    log.write_bytes(b"\n".join(lines))
    reason = f"the standing plan cannot be shown: the todo/write at seq {seq} has no data"
    assert run(capsys, "plan", str(log)) == (2, "", f"dsh-todo plan: {reason}\n")
    assert run(capsys, "events", str(log)) == (2, "", f"dsh-todo events: {reason}\n")


def test_a_pass_read_again_folds_the_plan_again() -> None:
    """The reader's pass starts over when the file changes under it; the plan it folded so far is dropped with the
    first event of the new pass, so a plan is never folded from a log seen twice over."""
    from dsh_todo.logview.plan import PlanFold

    write = {"type": "todo/write", "seq": 1, "time": 0, "data": {"todos": [{"content": "a", "status": "pending"}]}}
    plan = PlanFold()
    plan.see([{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}, write])
    plan.see([{"type": "turn/end", "seq": 0, "time": 0, "data": {"turn": 1}}])  # not a real log: seq 0 again
    assert plan.plan() is None
    plan.see([{"seq": 1, "time": 0, "data": {}}])
    with pytest.raises(Exception, match="the event at seq 1 has no type"):
        plan.plan()
    plan.see([{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}, write])
    assert plan.plan() == [{"content": "a", "status": "pending"}]


@pytest.mark.parametrize("command", ["plan", "events", "watch"])
@pytest.mark.parametrize("shadow", ["file", "folder"])
def test_a_file_or_folder_named_like_the_id_never_shadows_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str,
        shadow: str) -> None:
    """Repro: a session stored under ``--root R`` as ``notes``, and a file (or an empty folder) named ``notes`` in
    the working directory: ``dsh-todo plan --root R notes`` (and ``events``, ``watch``) answered ``notes is not a
    session log (expected session.jsonl or session.jsonl.zstd)``, exit 2. A path is a path only when it is a
    session log or a session folder; with ``--root``, an id is an id."""
    root = tmp_path / "root"
    assert main(["run", "--root", str(root), "--script", str(script_file(tmp_path)), "--session", "notes",
                 "hi"]) == 0
    capsys.readouterr()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "notes").write_text("my notes\n") if shadow == "file" else (work / "notes").mkdir()
    extra = ["--seconds", "0.3"] if command == "watch" else []
    code, out, err = run(capsys, command, "--root", str(root), "notes", *extra)
    assert (code, err) == (0, "")
    expected = {"plan": "To-dos: 1 in progress", "events": '{"type":"turn/start","seq":0,', "watch": "1 in progress"}
    assert expected[command] in out
    monkeypatch.setenv("DSH_TODO_ROOT", str(root))  # without --root, the default root's id wins over a plain file
    code, out, err = run(capsys, command, "notes", *extra)
    assert (code, err) == (0, "")
    assert expected[command] in out
    assert run(capsys, "plan", "--root", str(root), "nope") == (
        2, "", f"dsh-todo plan: nope does not exist, and no session of that id is stored under {root}\n")
    assert run(capsys, "plan", "--root", str(tmp_path / "elsewhere"), "notes") == (
        2, "", "dsh-todo plan: notes is not a session log or session folder, and no session of that id is stored "
               f"under {tmp_path / 'elsewhere'}\n")


def test_a_session_log_or_folder_named_with_a_root_is_still_read_as_a_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--root R PATH`` where PATH is a session log or folder (under another root) and no session of that name is
    stored under R: the path is read, as before."""
    log = copy_fixture("a-one-turn/none", tmp_path / "other")
    for source in (log, log.parent):
        code, out, err = run(capsys, "plan", "--root", str(tmp_path / "root"), str(source))
        assert (code, err) == (0, "")
        assert out.startswith("To-dos: 2 in progress · 1 pending")


def script_file(tmp_path: Path) -> Path:
    script = tmp_path / "script.json"
    arguments = json.dumps({"todos": [{"content": "write notes", "status": "in_progress"}]})
    script.write_text(json.dumps([{"tool_calls": [{"name": "todo_write", "arguments": arguments}]},
                                  {"text": "done"}]))
    return script
