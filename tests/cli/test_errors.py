"""No traceback on any input (issue 13 item 14): each case prints one line on stderr and exits with the code the
error tree's group maps to (``cli.main``'s table)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dsh_todo.cli import main, one_line

SCRIPT = '[{"text": "done"}]'
UNREACHABLE = "postgresql://nobody@127.0.0.1:1/nothing"


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "not-a-root"
    path.write_text("x", encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [["run", "--script", "{script}", "hi"], ["mcp"], ["demo"]])
def test_a_root_that_is_a_file(command: list[str], a_file: Path, script: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo run --root /etc/passwd …`` (and ``mcp``, ``demo``) died in a BootError traceback."""
    argv = [part.format(script=script) for part in command] + ["--root", str(a_file)]
    assert main(argv) == 2
    assert one_error_line(capsys) == f"dsh-todo {command[0]}: the session root {a_file} is not a directory"


def test_an_unreachable_database(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo run --database postgresql://…:1/…`` printed a traceback and psycopg's two-line text."""
    assert main(["run", "--database", UNREACHABLE, "--script", str(script), "hi"]) == 2
    line = one_error_line(capsys)
    assert line.startswith('dsh-todo run: composition row "persistence"')
    assert "Connection refused" in line


def test_import_from_an_unreachable_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo import ROOT --database <unreachable>`` printed libpq's two-line text once per session, then
    "0 sessions imported, 1 failed" and exit 1: a setup problem reported as failed sessions."""
    (tmp_path / "some-project").mkdir()
    assert main(["import", str(tmp_path), "--database", UNREACHABLE]) == 2
    assert one_error_line(capsys) == (
        "dsh-todo import: cannot open the database postgresql://127.0.0.1:1/nothing (schema public): "
        "Connection refused")


def test_reading_commands_name_an_unreachable_database_in_one_short_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: the reader's refusal carried libpq's hint ("Is the server running on that host and accepting
    TCP/IP connections?") and the address twice."""
    for command in (["plan", "x"], ["events", "x"], ["sessions"]):
        assert main([*command, "--database", UNREACHABLE]) == 2
        assert one_error_line(capsys) == (
            f"dsh-todo {command[0]}: cannot open the database postgresql://127.0.0.1:1/nothing (schema public): "
            "Connection refused")


def test_import_of_a_file(a_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo import /etc/passwd --database …`` raised NotADirectoryError with a traceback."""
    assert main(["import", str(a_file), "--database", UNREACHABLE]) == 2
    assert one_error_line(capsys) == f"dsh-todo import: {a_file} is not a directory (a JSONL persistence root is one)"


def test_import_of_a_missing_directory_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo import ./typo --database …`` printed "0 sessions imported" and exited 0."""
    assert main(["import", str(tmp_path / "typo"), "--database", UNREACHABLE]) == 2
    assert one_error_line(capsys) == f"dsh-todo import: {tmp_path / 'typo'} does not exist"


def test_import_with_a_bad_schema_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo import ROOT --schema Bad-Name`` raised ValueError with a traceback."""
    assert main(["import", str(tmp_path), "--schema", "Bad-Name", "--database", UNREACHABLE]) == 2
    assert one_error_line(capsys) == (
        "dsh-todo import: PostgreSQL schema name must match [a-z_][a-z0-9_]{0,39}, not 'Bad-Name'")


def test_watch_with_a_negative_interval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo watch SESSION --interval -1`` died in ``time.sleep`` (ValueError traceback)."""
    assert main(["watch", "s1", "--root", str(tmp_path), "--interval", "-1"]) == 2
    assert one_error_line(capsys) == "dsh-todo watch: --interval must be a positive number of seconds, not -1"


def test_watch_of_a_log_deleted_while_watching(tmp_path: Path, script: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: start ``dsh-todo watch LOG``, then delete the session directory: watching says so once and goes on
    (the log may come back), with no traceback."""
    root = tmp_path / "root"
    assert main(["run", "--root", str(root), "--script", str(script), "--session", "s1", "hi"]) == 0
    log = next(root.rglob("session*.jsonl*"))
    capsys.readouterr()
    timer = threading.Timer(0.3, lambda: [p.unlink() for p in log.parent.iterdir()])
    timer.start()
    try:
        assert main(["watch", str(log), "--interval", "0.05", "--seconds", "1"]) == 0
    finally:
        timer.cancel()
    assert one_error_line(capsys) == f"dsh-todo watch: {log} does not exist"


@pytest.mark.parametrize("command", [["web"], ["mcp", "--http"], ["demo", "--web"]])
def test_a_port_out_of_range(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo web --port 99999`` served on another port (99999 wraps to 34463) without a word."""
    assert main([*command, "--port", "99999"]) == 2
    assert one_error_line(capsys) == (
        f"dsh-todo {command[0]}: --port must be between 0 and 65535 (0 picks a free one), not 99999")


def test_anything_unexpected_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A bug is still one line; ``--debug`` or ``DSH_TODO_DEBUG=1`` lets the traceback through."""
    from dsh_todo.commands import schema

    def broken(_args: object) -> int:
        raise KeyError("boom")

    monkeypatch.setattr(schema, "COMMAND", schema.COMMAND._replace(run=broken))
    assert main(["schema"]) == 1
    assert one_error_line(capsys) == "dsh-todo: error: 'boom'"
    with pytest.raises(KeyError):
        main(["--debug", "schema"])
    monkeypatch.setenv("DSH_TODO_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["schema"])


def test_multi_line_texts_become_one_line() -> None:
    assert one_line(RuntimeError("connection failed: refused\n\tIs the server running?\n")) == (
        "connection failed: refused Is the server running?")
    assert one_line(RuntimeError("")) == "RuntimeError"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["session.jsonl", "session.jsonl.zstd"])
def test_a_fifo_where_a_log_belongs_is_refused_not_waited_on(tmp_path: Path, name: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``mkfifo <root>/--p--/s1/session.jsonl``, then ``dsh-todo sessions <root>``, ``plan s1`` or ``events
    s1``: each hung for ever, opening the pipe for reading and waiting for a writer that never comes (and so would
    ``dsh-todo web`` listing that root). A log, its checkpoint and its lock are opened only when they are regular
    files: the session is refused in one line, and the listing goes on to the others."""
    import os

    from dsh_todo.standard import open_runtime

    root = tmp_path / "root"
    ctx = open_runtime(root)
    try:
        ctx.sessions.create("good", cwd="/p").append("turn/start", {"turn": 1})
    finally:
        ctx.dispose()
    (root / "--p--" / "s1").mkdir(parents=True)
    os.mkfifo(root / "--p--" / "s1" / name)
    assert main(["sessions", "--root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert f"refused: {root / '--p--' / 's1' / name} is not a regular file" in out, out
    assert "good" in out and err.count("\n") <= 1, err
    for command in (["plan", "--root", str(root), "s1"], ["events", "--root", str(root), "s1"]):
        assert main(command) == 2, command
        out, err = capsys.readouterr()
        assert err.splitlines() == [f"dsh-todo {command[0]}: {root / '--p--' / 's1' / name} is not a regular file"]
