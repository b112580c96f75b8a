"""``plan --latest`` and ``watch --latest`` (issue 21, "Findable"): the most recently written session under the root,
optionally of one project (``--project DIR``), with a one-line error when there is none."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from dsh_todo.cli import main
from dsh_todo.harness import Agent
from dsh_todo.standard import open_runtime


def write_sessions(root: Path, sessions: list[tuple[str, str, str]]) -> dict[str, Path]:
    """Each ``(id, cwd, task)``: a session in project ``cwd`` whose plan is one in-progress ``task``; their logs'
    modification times follow the list's order (the last is the most recently written)."""
    logs: dict[str, Path] = {}
    ctx = open_runtime(root)
    try:
        for session_id, cwd, task in sessions:
            session = ctx.sessions.create(session_id, cwd=cwd)
            asyncio.run(ctx.tools.execute("todo_write", {"todos": [{"content": task, "status": "in_progress"}]},
                                          agent=Agent("a", session)))
        ctx.session_persistence.flush()
        for session_id, _cwd, _task in sessions:
            located = ctx.session_persistence.locate(session_id)
            assert located is not None
            logs[session_id] = Path(located)
    finally:
        ctx.dispose()
    for stamp, log in enumerate(logs.values(), start=1):
        os.utime(log, ns=(stamp * 10**18, stamp * 10**18))
    return logs


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    write_sessions(root, [("old-a", "/srv/a", "first"), ("b", "/srv/b", "in b"), ("new-a", "/srv/a", "latest a"),
                          ("c", "/srv/c", "newest")])
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_latest_reads_the_most_recently_written_session(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: an MCP client never shows the session id, so ``dsh-todo plan <root>/--<project>--/<id>`` could not be
    typed; there was no way to say "the session that was just written"."""
    code, out, err = run(capsys, "plan", "--latest", "--root", str(root))
    assert (code, out) == (0, "To-dos: 1 in progress\n  [>] newest\n")
    log = next(root.glob("*/c/session*.jsonl*"))
    assert err == f"dsh-todo plan: the latest session is c ({log})\n"


def test_project_narrows_it_to_one_working_directory(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--latest", "--project", "/srv/a", "--root", str(root), "--json")
    assert (code, out) == (0, '[{"content":"latest a","status":"in_progress"}]\n')


def test_no_session_is_one_line(tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    for command in ("plan", "watch"):
        assert run(capsys, command, "--latest", "--root", str(tmp_path / "empty")) == (
            2, "", f"dsh-todo {command}: no sessions under {tmp_path / 'empty'}\n")
        assert run(capsys, command, "--latest", "--root", str(tmp_path / "absent")) == (
            2, "", f"dsh-todo {command}: no sessions under {tmp_path / 'absent'} (it does not exist)\n")
        assert run(capsys, command, "--latest", "--project", "/srv/z", "--root", str(root)) == (
            2, "", f"dsh-todo {command}: no sessions of the project /srv/z under {root}\n")


def test_latest_and_a_session_do_not_mix(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("plan", "watch"):
        assert run(capsys, command, "c", "--latest", "--root", str(root)) == (
            2, "", f"dsh-todo {command}: give a SESSION or --latest, not both\n")
        assert run(capsys, command, "--root", str(root)) == (
            2, "", f"dsh-todo {command}: give a SESSION, or --latest for the most recently written one\n")
        assert run(capsys, command, "c", "--project", "/srv/a", "--root", str(root)) == (
            2, "", f"dsh-todo {command}: --project goes with --latest\n")


def test_watch_latest_follows_the_most_recently_written_session(root: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "watch", "--latest", "--project", "/srv/b", "--root", str(root), "--seconds",
                         "0.3", "--interval", "0.05")
    assert (code, out) == (0, "plan: 1 in progress | now: in b\n")
    assert err == f"dsh-todo watch: the latest session is b ({next(root.glob('*/b/session*.jsonl*'))})\n"


def test_the_root_is_listed_once(root: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Repro: ``--latest`` read every session's header twice, once for ``written()`` (which listed the root) and once
    for the listing it then made itself. It reads each header once more than ``plan PATH`` reads, and no more."""
    from dsh_todo.harness.persistence.jsonl import reader

    reads: list[Path] = []
    header = reader._header

    def counted(path: Path) -> object:
        reads.append(path)
        return header(path)

    monkeypatch.setattr(reader, "_header", counted)
    log = next(root.glob("*/c/session*.jsonl*"))
    assert run(capsys, "plan", str(log))[0] == 0
    by_path = len(reads)
    reads.clear()
    assert run(capsys, "plan", "--latest", "--root", str(root))[0] == 0
    assert len(reads) == by_path + 4
