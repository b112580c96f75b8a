"""A log changed under its writer by another process: the writer refuses to append, and nothing vouches for it.

Repro (issue 34, item 4, against main before the fix): a writer appends a batch, another process truncates the file
(to its header, or to half), and the writer's next ``append`` succeeded: it landed after the cut (O_APPEND), so the
log held a seq gap or a torn line followed by committed events, and the end-of-turn projection checkpoint hashed
that damaged file, so cold readers (``plan``, ``sessions``) said ``ok`` while full readers said ``corrupt session
log``. A file replaced (``mv other session.v4.jsonl``) or removed under the writer was appended to just the same (the
open descriptor still names the old inode): acknowledged events in a file no reader sees.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Agent, Context
from dsh_todo.harness.persistence import SessionLogChangedError, SessionWriteError
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.checkpoint import CHECKPOINT_NAME
from dsh_todo.harness.persistence.jsonl.writer import JsonlWriter
from dsh_todo.harness.persistence.jsonl.zstd import scan_frames
from dsh_todo.harness.session import Session
from dsh_todo.standard import open_runtime

COMPRESSIONS = ["none", "zstd"]


def events(start: int, count: int) -> list[dict[str, Any]]:
    return [{"type": "assistant/chunk", "seq": start + i, "time": 100,
             "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": f"w{i}"}}}
            for i in range(count)]


def written(tmp_path: Path, compression: Any) -> tuple[JsonlWriter, Path]:
    """A writer that made two batches durable, and its log."""
    store = JsonlBackend(tmp_path / "root", compression)
    writer = store.create({"id": "s1", "createdAt": 5, "cwd": "/w"})
    writer.append(events(0, 3))
    writer.append(events(3, 3))
    path = store.find("s1")
    assert path is not None
    return writer, path


def header_end(data: bytes, compression: str) -> int:
    """Where a log's header ends: its line, or its own frame under zstd."""
    return scan_frames(data, 1).frames[0][1] if compression == "zstd" else data.index(b"\n") + 1


def message(writer: JsonlWriter, what: str) -> str:
    return (f"session s1: its log {writer.path} was changed by another process ({what}); "
            "nothing more is written to it")


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("cut", ["header", "half", "one byte"])
def test_an_append_after_an_outside_cut_is_refused_and_touches_nothing(tmp_path: Path, compression: str,
                                                                       cut: str) -> None:
    writer, path = written(tmp_path, compression)
    data = path.read_bytes()
    size = len(data)
    to = {"header": header_end(data, compression), "half": size // 2, "one byte": size - 1}[cut]
    os.truncate(path, to)
    left = path.read_bytes()
    with pytest.raises(SessionLogChangedError) as raised:
        writer.append(events(6, 2))
    assert str(raised.value) == message(writer, f"size {to}, expected {size}")
    assert isinstance(raised.value, SessionWriteError)  # the write-failure family: front doors exit 1
    # Refused from then on, even once the file has its old size again: the writer no longer vouches for it.
    os.truncate(path, size)
    with pytest.raises(SessionLogChangedError, match="was changed by another process"):
        writer.append(events(6, 2))
    assert path.read_bytes() == left + b"\0" * (size - to)
    assert writer.cursor == 6
    writer.close()


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_an_append_after_the_log_was_replaced_or_removed_is_refused(tmp_path: Path, compression: str) -> None:
    writer, path = written(tmp_path, compression)
    content = path.read_bytes()
    other = path.with_name("other")
    other.write_bytes(content)  # the same bytes, another file: an editor's save, a restore from a copy
    os.replace(other, path)
    with pytest.raises(SessionLogChangedError) as raised:
        writer.append(events(6, 1))
    assert str(raised.value) == message(writer, "it is another file now")
    assert path.read_bytes() == content
    writer.close()

    writer, path = written(tmp_path / "again", compression)
    path.unlink()
    with pytest.raises(SessionLogChangedError) as raised:
        writer.append(events(6, 1))
    assert str(raised.value) == message(writer, "it was removed")
    assert not path.exists()
    writer.close()


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_resumed_writer_checks_the_log_it_read(tmp_path: Path, compression: str) -> None:
    """A writer that resumed a log (without a repair) knows its size from the read, not from its first append."""
    writer, path = written(tmp_path, compression)
    writer.close()
    store = JsonlBackend(tmp_path / "root", compression)
    _, resumed = store.resume("s1")  # appends DSH's closers: the log is repaired, so its size is the writer's
    size = path.stat().st_size
    os.truncate(path, size - 1)
    with pytest.raises(SessionLogChangedError, match=rf"\(size {size - 1}, expected {size}\)"):
        resumed.append([{"type": "turn/start", "seq": resumed.cursor, "time": 1, "data": {"turn": 2}}])
    resumed.close()


def todo_write(ctx: Context, session: Session, content: str) -> None:
    asyncio.run(ctx.tools.execute("todo_write", {"todos": [{"content": content, "status": "in_progress"}]},
                                  agent=Agent("a", session)))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_no_checkpoint_vouches_for_a_cut_log(tmp_path: Path, compression: str) -> None:
    """The end-of-turn checkpoint (and the one on dispose) is not written once the log was cut: the flush that
    would make the turn durable fails, and with it the checkpoint that waits for it. The session stays refused."""
    ctx = open_runtime(tmp_path / "root", compression=compression, batch_delay_ms=60_000)
    try:
        session = ctx.sessions.create("s", cwd="/w")
        session.append("turn/start", {"turn": 1})
        todo_write(ctx, session, "a")
        ctx.session_persistence.flush()
        [path] = list((tmp_path / "root").glob("*/s/session*.jsonl*"))
        os.truncate(path, path.stat().st_size // 2)
        cut = path.read_bytes()
        todo_write(ctx, session, "b")
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        with pytest.raises(SessionLogChangedError):
            ctx.session_persistence.flush()
        with pytest.raises(SessionLogChangedError) as again:  # refused for good, said once (``repeat``)
            ctx.session_persistence.flush()
        assert again.value.repeat
        ctx.get("session_projection_cache").settle()
        assert not (path.parent / CHECKPOINT_NAME).exists()
    finally:
        ctx.dispose()
    assert not (path.parent / CHECKPOINT_NAME).exists()
    assert path.read_bytes() == cut


def test_a_checkpoint_is_not_written_for_a_batch_the_log_no_longer_holds(tmp_path: Path) -> None:
    """The checkpoint is written behind, after its batch was durable: a cut in between must not be hashed."""
    writer, path = written(tmp_path, "none")
    batch = writer.last_batch
    assert batch is not None
    writer.close()
    os.truncate(path, batch.end - 1)
    store = JsonlBackend(tmp_path / "root", "none")
    rows = {"todos": {"ver": 2, "seq": batch.last_seq, "val": []}}
    with pytest.raises(SessionLogChangedError, match=rf"\(size {batch.end - 1}, expected at least {batch.end}\)"):
        store.write_checkpoint("s1", {"createdAt": 5, "cwd": "/w"}, rows, batch.last_seq, batch)
    assert not (path.parent / CHECKPOINT_NAME).exists()


def cli(root: Path, *words: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("DSH_TODO_ROOT", None)
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", *words, "--root", str(root)], capture_output=True,
                          text=True, timeout=60, env=env)


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("cut", ["before its record", "inside its record", "after its record"])
def test_readers_agree_on_a_cut_log_with_a_checkpoint(tmp_path: Path, compression: str, cut: str) -> None:
    """A checkpoint written before the cut: a cold reader (``plan``, ``sessions``) uses it only when its proof still
    holds (the cut left the bytes before its record) and the tail from its record reads; its verdict and plan are
    what it says without the checkpoint, and what the full readers say (``events``, ``plan --turn 1``)."""
    root = tmp_path / "root"
    ctx = open_runtime(root, compression=compression, batch_delay_ms=60_000)
    try:
        session = ctx.sessions.create("s", cwd=str(tmp_path))
        session.append("turn/start", {"turn": 1})
        todo_write(ctx, session, "a")
        ctx.session_persistence.flush()  # the turn's end in a batch (a frame) of its own: the checkpoint's record
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        ctx.session_persistence.flush()
        ctx.get("session_projection_cache").settle()
        [path] = list(root.glob("*/s/session*.jsonl*"))
        offset = json.loads((path.parent / CHECKPOINT_NAME).read_text())["offset"]
        record_end = path.stat().st_size
        session.append("turn/start", {"turn": 2})
        todo_write(ctx, session, "b")
        ctx.session_persistence.flush()
        size = path.stat().st_size
        to = {"before its record": offset - 1, "inside its record": (offset + record_end) // 2,
              "after its record": (record_end + size) // 2}[cut]
        os.truncate(path, to)
        with pytest.raises(SessionLogChangedError):
            todo_write(ctx, session, "c")
            ctx.session_persistence.flush()
    finally:
        ctx.dispose()
    checkpointed = [cli(root, "sessions"), cli(root, "plan", "s")]
    assert checkpointed[0].returncode == 0, checkpointed[0].stderr
    [row] = checkpointed[0].stdout.splitlines()
    verdict = row.split("\t")[-1]
    assert verdict.startswith("recovered in memory (the log is unchanged): ignored a torn ")
    turn, events = cli(root, "plan", "--turn", "1", "s"), cli(root, "events", "s")
    assert (checkpointed[1].returncode, checkpointed[1].stderr) == (0, f"dsh-todo plan: {verdict}\n")
    assert (events.returncode, events.stderr) == (0, f"dsh-todo events: {verdict}\n")
    assert (turn.returncode, turn.stderr) == (0, f"dsh-todo plan: {verdict}\n")
    if cut != "before its record":  # (before it, the todo/write is cut: a raw line goes, a zstd block may stay)
        assert "[>] a" in turn.stdout
    (path.parent / CHECKPOINT_NAME).unlink()
    full = [cli(root, "sessions"), cli(root, "plan", "s")]
    assert [(done.returncode, done.stdout, done.stderr) for done in full] == [
        (done.returncode, done.stdout, done.stderr) for done in checkpointed]
