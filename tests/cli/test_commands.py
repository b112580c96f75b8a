"""The command line, driven in-process through ``dsh_todo.cli.main`` (and once as a real subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dsh_todo.cli import main
from dsh_todo.jsonutil import dumps
from tests.conftest import fixtures_dir

FIXTURES = fixtures_dir() / "dsh-sessions"


def fixture_log(name: str, variant: str = "none") -> Path:
    matches = list((FIXTURES / name / variant / "store").glob("*/*/session.jsonl*"))
    assert len(matches) == 1
    return matches[0]


def expected(name: str, variant: str = "none") -> dict[str, object]:
    loaded: dict[str, object] = json.loads((FIXTURES / name / variant / "expected.json").read_text())
    return loaded


@pytest.mark.parametrize(("name", "variant"), [("a-one-turn", "none"), ("a-one-turn", "zstd"),
                                               ("b-three-turns", "zstd"), ("c2-no-cwd", "none")])
def test_plan_json_matches_the_fixture(name: str, variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--json", str(fixture_log(name, variant))]) == 0
    assert json.loads(capsys.readouterr().out) == expected(name, variant)["todos"]


def test_plan_accepts_the_session_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(fixture_log("a-one-turn").parent)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "To-dos: 2 in progress · 1 pending"
    assert out[1] == "  [>] Refactor the parser module"


def test_events_prints_the_log_as_a_reader_sees_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["events", str(fixture_log("d-long", "zstd"))]) == 0
    lines = capsys.readouterr().out.splitlines()
    want = expected("d-long", "zstd")["events"]
    assert isinstance(want, list)
    assert len(lines) == len(want)
    assert [json.loads(line) for line in lines] == want
    assert lines[0] == dumps(want[0])


def test_recovery_is_applied_in_memory_without_touching_the_file(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    source = FIXTURES / "damaged" / "raw-torn-tail" / "store"
    shutil.copytree(source, tmp_path / "store")
    log = next((tmp_path / "store").glob("*/*/session.jsonl"))
    before = log.read_bytes()
    assert main(["events", str(log)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["type"] for line in lines[-3:]] == ["tool/result", "step/end", "turn/end"]
    assert json.loads(lines[-1])["data"]["reason"] == {"kind": "interrupted"}
    assert main(["plan", "--json", str(log)]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert log.read_bytes() == before


def test_corrupt_log_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    log = FIXTURES / "damaged" / "raw-garbage-corrupt" / "store"
    path = next(log.glob("*/*/session.jsonl"))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == "dsh-todo plan: corrupt session log: unparsable committed event at line 50\n"


def test_missing_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["events", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


SCRIPT = [
    {"text": "Planning.", "tool_calls": [{"name": "todo_write", "arguments": dumps(
        {"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]})}]},
    {"text": "DONE"},
]


def test_run_with_a_script_persists_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    root = tmp_path / "root"
    assert main(["run", "do it", "--script", str(script), "--root", str(root), "--session", "s1",
                 "--single-active"]) == 0
    out = capsys.readouterr().out
    assert "Error: invalid todos: at most one task may be in_progress (got 2)" in out
    log = next(root.glob("*/s1/session.v4.jsonl.zstd"))
    assert main(["plan", "--json", str(log)]) == 0
    assert json.loads(capsys.readouterr().out) is None
    assert main(["run", "again", "--script", str(script), "--root", str(root), "--session", "s1"]) == 0
    assert "resuming session s1" in capsys.readouterr().out
    assert main(["plan", "--json", str(log)]) == 0
    assert json.loads(capsys.readouterr().out) == [{"content": "a", "status": "in_progress"},
                                                   {"content": "b", "status": "in_progress"}]
    assert main(["events", str(log)]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1, 2]


def test_run_without_key_or_script_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    assert main(["run", "x", "--root", str(tmp_path)]) == 2
    assert "DEEPSEEK_API_KEY" in capsys.readouterr().err


def test_sessions_lists_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(FIXTURES / "a-one-turn" / "zstd" / "store", tmp_path / "store")
    assert main(["sessions", "--root", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3f6c2a1e-8b4d-4c7a-9e15-0a2b3c4d5e6f\t2 in progress · 1 pending\t")


def test_watch_prints_one_line_per_plan_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_todo.harness import Agent
    from dsh_todo.standard import open_runtime

    ctx = open_runtime(tmp_path, batch_delay_ms=1)
    session = ctx.sessions.create("w", cwd="/w")
    session.append("turn/start", {"turn": 1})
    ctx.session_persistence.flush()
    log = next(tmp_path.glob("*/w/session.v4.jsonl.zstd"))

    def write() -> None:
        import asyncio

        for todos in ([{"content": "a", "status": "in_progress"}], [{"content": "a", "status": "completed"}]):
            time.sleep(0.4)
            asyncio.run(ctx.tools.execute("todo_write", {"todos": todos}, agent=Agent("a", session)))
            ctx.session_persistence.flush()

    writer = threading.Thread(target=write)
    writer.start()
    assert main(["watch", str(log), "--seconds", "2.0", "--interval", "0.05"]) == 0
    writer.join()
    ctx.dispose()
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["plan: none", "plan: 1 in progress | now: a", "plan: 1 completed"]


def test_demo_runs_as_a_real_command(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "demo", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "SCRIPTED" in out
    assert "Error: invalid todos: duplicate content \"Document the limits\"" in out
    assert "plan: 2 completed · 2 in progress · 1 pending" in out
    assert "plan: none" in out
    log = next(tmp_path.glob("*/*/session.v4.jsonl.zstd"))
    assert f"session log (DSH format): {log}" in out
