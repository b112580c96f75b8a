"""Every front door on every backend: ``--root``, ``--database`` and ``--compression`` mean the same everywhere."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.cli import main
from dsh_todo.harness.persistence.jsonl.paths import project_key
from dsh_todo.jsonutil import dumps
from dsh_todo.runtime import Storage, StorageError
from tests import needs

PLAN = [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]
SCRIPT = [{"tool_calls": [{"name": "todo_write", "arguments": dumps({"todos": PLAN})}]}, {"text": "DONE"}]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_TODO_ROOT", "DSH_TODO_DATABASE_URL")}
    return {**env, **extra}


def cli(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", *argv], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env or clean_env(), stdin=subprocess.DEVNULL)


def test_storage_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_TODO_DATABASE_URL", raising=False)
    monkeypatch.setenv("DSH_TODO_ROOT", "/env/root")
    assert Storage.resolve() == Storage(root=Path("/env/root"))
    assert Storage.resolve("/r", compression="none") == Storage(root=Path("/r"), compression="none")
    monkeypatch.setenv("DSH_TODO_DATABASE_URL", "postgresql://db/x")
    assert Storage.resolve() == Storage(database="postgresql://db/x")
    assert Storage.resolve("/r") == Storage(root=Path("/r"))  # an explicit root beats the environment
    with pytest.raises(StorageError, match="choose one of --root and --database"):
        Storage.resolve("/r", "postgresql://db/x")
    with pytest.raises(StorageError, match="--compression is for JSONL roots"):
        Storage.resolve(database="postgresql://db/x", compression="none")


def test_contradicting_options_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "x", "--script", "s.json", "--root", str(tmp_path), "--database", "postgresql://h/d"]) == 2
    assert capsys.readouterr().err == "dsh-todo run: choose one of --root and --database\n"


def test_demo_writes_under_the_default_root_and_prints_how_to_look_again(tmp_path: Path) -> None:
    """Repro before the fix: ``demo`` wrote to ``./.dsh-todo/demo`` whatever ``$DSH_TODO_ROOT`` said, so
    ``dsh-todo sessions`` and ``dsh-todo web`` right after the demo showed nothing."""
    root = tmp_path / "sessions"
    proc = cli("demo", cwd=tmp_path, env=clean_env(DSH_TODO_ROOT=str(root)))
    assert proc.returncode == 0, proc.stderr
    [log] = list(root.glob("*/*/session.v4.jsonl.zstd"))
    session_id = log.parent.name
    last = proc.stdout.rstrip("\n").splitlines()[-7:]
    assert last[0] == "look at it again:"  # the lines themselves: tests/cli/test_demo_lines.py
    assert last[2].endswith(f" plan --root {root} {session_id} --turn 1")
    assert last[6].endswith(f" web --root {root}")
    assert not (tmp_path / ".dsh-todo").exists()


def test_run_resumes_a_raw_log_under_a_zstd_configured_root(tmp_path: Path) -> None:
    """Repro before the fix: a root of raw ``.jsonl`` logs made ``run`` (zstd by default) fail with "select the
    matching compression mode", an option no command had. Since DSH 0.2, a new session also takes the root's
    encoding, and a conflicting ``--compression`` is refused in one line naming the root's (DSH refuses to work in
    a root of two encodings)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    root = tmp_path / "root"
    first = cli("run", "plan", "--script", str(script), "--root", str(root), "--compression", "none",
                "--session", "s", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = cli("run", "again", "--script", str(script), "--root", str(root), "--session", "s", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert [p.name for p in root.glob("*/*/session*")] == ["session.v4.jsonl"]  # the log kept its encoding
    fresh = cli("run", "new", "--script", str(script), "--root", str(root), "--session", "t", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    # A new session takes the root's encoding, as DSH keeps one encoding per root.
    assert sorted(p.name for p in root.glob("*/*/session*.jsonl*")) == ["session.v4.jsonl", "session.v4.jsonl"]
    refused = cli("run", "zstd", "--script", str(script), "--root", str(root), "--session", "u", "--compression",
                  "zstd", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.endswith(
        f'dsh-todo run: the session root {root} keeps its logs in compression "none" (session.v4.jsonl in '
        f'{root / project_key(str(tmp_path)) / "s"}), not "zstd": DeepSeek Harness keeps one encoding per root, so '
        'use compression "none" there or another root\n')
    assert not list(root.glob("*/u"))


# -- --database on every front door ---------------------------------------------------------------------------


def stored_events(url: str, session_id: str) -> list[dict[str, Any]]:
    from dsh_todo.harness.persistence.postgres import PgBackend

    store = PgBackend(url)
    try:
        return store.read(session_id).events
    finally:
        store.close()


def plan_of(events: list[dict[str, Any]]) -> Any:
    from dsh_todo.tool_todo.rules import standing_plan

    return standing_plan(events)


def test_run_and_demo_take_a_database(tmp_path: Path, pg_url: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    session_id = f"run-{uuid.uuid4()}"
    proc = cli("run", "plan", "--script", str(script), "--database", pg_url, "--session", session_id, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert plan_of(stored_events(pg_url, session_id)) == PLAN
    demo = cli("demo", cwd=tmp_path, env=clean_env(DSH_TODO_DATABASE_URL=pg_url))
    assert demo.returncode == 0, demo.stderr
    line = next(line for line in demo.stdout.splitlines() if " plan --database " in line)
    demo_id = line.split()[-3]  # … plan --database URL ID --turn 1
    assert [e["type"] for e in stored_events(pg_url, demo_id)][-1] == "turn/end"


def test_mcp_takes_a_database(tmp_path: Path, pg_url: str) -> None:
    needs.module("mcp")
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_todo.cli", "mcp", "--database", pg_url],
                                   cwd=str(tmp_path), env=clean_env())

    async def one_call() -> str:
        async with Client(params) as client:
            result = await client.call_tool("todo_write", {"todos": PLAN})
            assert not result.is_error
            assert result.meta is not None
            return str(result.meta["dsh-todo/sessionId"])

    session_id = asyncio.run(asyncio.wait_for(one_call(), 60))
    assert plan_of(stored_events(pg_url, session_id)) == PLAN


def test_acp_takes_a_database(tmp_path: Path, pg_url: str) -> None:
    needs.module("acp")
    from acp.helpers import text_block
    from acp.stdio import spawn_agent_process

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))

    class Quiet:
        async def session_update(self, *args: Any, **kwargs: Any) -> None:
            return None

        async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    async def one_prompt() -> str:
        argv = ["-m", "dsh_todo.cli", "acp", "--script", str(script), "--database", pg_url]
        async with spawn_agent_process(Quiet(), sys.executable, *argv, cwd=tmp_path, env=clean_env()) as (conn, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("plan")])
            return session.session_id

    session_id = asyncio.run(asyncio.wait_for(one_prompt(), 60))
    assert plan_of(stored_events(pg_url, session_id)) == PLAN


def test_a_session_being_created_elsewhere_is_the_same_one_line_refusal(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: two ``run --session NEW`` at the same moment: the loser found no log yet, went on to create the session,
    hit the winner's writer lock and died with a traceback instead of the refusal a non-racing second writer gets."""
    from dsh_todo.standard import open_runtime

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    winner = open_runtime(tmp_path / "root")
    try:
        winner.sessions.create("new", cwd=str(tmp_path))  # holds the lock; nothing written yet
        code = main(["run", "x", "--script", str(script), "--root", str(tmp_path / "root"), "--session", "new"])
        err = capsys.readouterr().err
    finally:
        winner.dispose()
    assert code == 2
    mounted, refusal = err.splitlines()
    assert mounted.startswith("tools mounted: todo_write")
    assert refusal.startswith(f'dsh-todo run: session "new" is already open for writing by process {os.getpid()} ')
    assert refusal.endswith("a session log takes one writer at a time")


def test_an_empty_session_id_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``--session ""`` silently started a session with a random id."""
    assert main(["run", "x", "--script", "s.json", "--root", str(tmp_path), "--session", ""]) == 2
    assert capsys.readouterr().err == "dsh-todo run: --session needs a non-empty id\n"
    assert not (tmp_path / "root").exists()


def test_ids_with_control_or_bidi_characters_are_listed_escaped(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Repro: ``dsh-todo sessions`` printed ids as they are, so an id holding an escape sequence or a bidi override
    rewrote the terminal (or the line) a person was reading."""
    from dsh_todo.standard import open_runtime

    ctx = open_runtime(tmp_path / "root")
    try:
        session = ctx.sessions.create("evil\x1b[2J\u202eid", cwd="/w")
        session.append("turn/start", {"turn": 1})
    finally:
        ctx.dispose()
    assert main(["sessions", "--root", str(tmp_path / "root")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("evil\\x1b[2J\\u202eid\t")
    assert "\x1b" not in out and "\u202e" not in out
