"""A format-v0 session we resume is carried forward to v4 the way DSH 0.2 does it, and ``dsh`` resumes the result.

DSH 0.2.1 migrates a v0 log when it opens it for writing, but in the packaged runtime that path fails for every v0
log (``Cannot find module …/worker.cjs``); its read-only export runs the same migration in memory. So the proof is
DSH's export of the v0 log: ``dsh-todo run --session ID`` on a v0 session writes ``session.v4.jsonl`` beside it whose
first lines are exactly that export (the header and every migrated event), leaves the v0 file as it was, and ``dsh``
then resumes the session with exit 0. The v0 log is DSH 0.1.1's own (the ``a-one-turn`` fixture), its header's
``cwd`` moved to this test's project folder (``dsh`` resumes a session only from the directory it was recorded in).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from dsh_todo.harness.persistence.jsonl.paths import project_key
from dsh_todo.harness.persistence.jsonl.zstd import compress_frame, frame_pieces, scan_frames
from dsh_todo.jsonutil import dumps_bytes
from tests.carriers.mcp.agents.common import FakeModel, fake_model
from tests.dsh import ours
from tests.dsh.model import Say, steps
from tests.dsh.runtime import Home, Scratch, exported, run_turn

pytestmark = pytest.mark.slow  # two dsh starts (an export, a turn) of 1.3-1.7 s each

FIXTURE = Path(__file__).parent.parent / "fixtures" / "dsh-sessions" / "a-one-turn" / "zstd" / "store"
REPLIES = [{"tool_calls": [{"name": "todo_write", "arguments": json.dumps(
    {"todos": [{"content": "carry the log forward", "status": "in_progress"}]})}]}, {"text": "carried"}]


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModel]:
    with fake_model(steps({"CARRIED: go on": [Say("resumed")]})) as served:
        yield served


def v0_session(home: Home, cwd: Path) -> tuple[str, Path]:
    """DSH 0.1.1's one-turn zstd log under ``home`` (DSH's default encoding, so ``dsh web`` exports from that root),
    its header frame rewritten with ``cwd``, every other frame DSH's: its id and its log."""
    [source] = FIXTURE.glob("*/*/session.jsonl.zstd")
    data = source.read_bytes()
    (_, header_end), *_ = scan_frames(data).frames
    record = json.loads(b"".join(frame_pieces(memoryview(data)[:header_end], 1 << 16)))
    record["cwd"] = str(cwd)
    session_id = record["id"]
    target = home.sessions / project_key(str(cwd)) / source.parent.name / "session.jsonl.zstd"
    target.parent.mkdir(parents=True)
    target.write_bytes(compress_frame(dumps_bytes(record) + b"\n") + data[header_end:])
    return session_id, target


def test_a_resumed_v0_session_is_dshs_own_migration_and_dsh_resumes_it(
        dsh: Path, scratch: Scratch, model: FakeModel, tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    home = Home.make(tmp_path / "home", scratch)
    session_id, v0_log = v0_session(home, cwd)
    before = v0_log.read_bytes()
    migrated = exported(dsh, home, [session_id])[session_id]
    assert isinstance(migrated, bytes), f"DSH refused to export the v0 log: {migrated}"
    assert json.loads(migrated.split(b"\n", 1)[0])["version"] == 4

    done = ours.run_script(home.sessions, cwd, session_id, REPLIES, "carry it")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    v4_log = v0_log.with_name("session.v4.jsonl.zstd")
    assert v0_log.read_bytes() == before, "the v0 generation stays as it was"
    written = zstandard.ZstdDecompressor().stream_reader(v4_log.read_bytes(), read_across_frames=True).read()
    assert written.startswith(migrated), "the v4 generation begins with DSH's own migration of the v0 log"
    tail = [json.loads(line) for line in written[len(migrated):].splitlines()]
    assert [event["type"] for event in tail[:2]] == ["session/end-seed", "turn/start"]
    assert ours.plan(home.sessions, session_id) == [{"content": "carry the log forward", "status": "in_progress"}]

    shutil.rmtree(home.path / "storages", ignore_errors=True)
    turn = run_turn(dsh, home, cwd, "CARRIED: go on", model.url, session_id=session_id)
    assert turn.returncode == 0, turn.describe()
    assert ours.listing(home.sessions)[session_id] == "ok"
