"""Damaged session logs made on purpose from DSH's fixtures, for the tests that every reader agrees on a verdict.

Each builder copies a fixture store into ``root`` (a scratch directory) and damages the copy in one precise way; it
returns the damaged log's path. The originals in ``tests/fixtures`` are never touched.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tests.conftest import FIXTURES_DIR

FIXTURES = FIXTURES_DIR / "dsh-sessions"
B_ID = "8d1f4e2a-5c3b-4a6d-b7e8-9f0a1b2c3d4e"
"""The session id of ``b-three-turns`` (and of every damaged fixture derived from it)."""
A_ID = "3f6c2a1e-8b4d-4c7a-9e15-0a2b3c4d5e6f"


def copy_fixture(name: str, root: Path) -> Path:
    """Copy the store of fixture ``name`` (e.g. ``"b-three-turns/none"``) into ``root``; returns the copied log."""
    source = FIXTURES / name / "store"
    for project in source.iterdir():
        shutil.copytree(project, root / project.name, dirs_exist_ok=True)
    relative = next(source.glob("*/*/session*.jsonl*")).relative_to(source)
    return root / relative


def _edit_lines(log: Path, edit: Callable[[list[bytes]], None]) -> Path:
    lines = log.read_bytes().split(b"\n")
    edit(lines)
    log.write_bytes(b"\n".join(lines))
    return log


def broken_json_middle(root: Path) -> Path:
    """b/none with the JSON of its first ``step/end`` line broken after a good envelope; turns end after it.

    The envelope ``{"type":"step/end","seq":39,`` is intact, so only a reader that parses the line sees the damage.
    """
    def edit(lines: list[bytes]) -> None:
        index = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"step/end"'))
        lines[index] = lines[index][:-2] + b",}"

    return _edit_lines(copy_fixture("b-three-turns/none", root), edit)


def torn_tail(root: Path) -> Path:
    """b/none cut in the middle of its last line (no final newline): a crash tail, recovered in memory."""
    log = copy_fixture("b-three-turns/none", root)
    data = log.read_bytes()
    last = data.rfind(b"\n", 0, len(data) - 1)
    log.write_bytes(data[:last + 20])
    return log


def malformed_todos(root: Path, payload: bytes = b'{"todos":"x"}') -> Path:
    """b/none whose last ``todo/write`` (the standing plan, ``[]``) carries ``payload`` as its data instead."""
    def edit(lines: list[bytes]) -> None:
        index = max(i for i, line in enumerate(lines) if line.startswith(b'{"type":"todo/write"'))
        head = lines[index][:lines[index].index(b'"data":') + len(b'"data":')]
        lines[index] = head + payload + b"}"

    return _edit_lines(copy_fixture("b-three-turns/none", root), edit)


def todo_write_without_data(root: Path) -> Path:
    """b/none whose last ``todo/write`` has no ``data`` key at all (a hand-written event)."""
    def edit(lines: list[bytes]) -> None:
        index = max(i for i, line in enumerate(lines) if line.startswith(b'{"type":"todo/write"'))
        lines[index] = lines[index][:lines[index].index(b',"data":')] + b"}"

    return _edit_lines(copy_fixture("b-three-turns/none", root), edit)


def copied_elsewhere(root: Path) -> Path:
    """a/none's session directory copied, whole, into another session directory of the same project."""
    original = copy_fixture("a-one-turn/none", root)
    copy = original.parent.parent / "a-copy" / original.name
    shutil.copytree(original.parent, copy.parent)
    return copy


def unknown_type(root: Path) -> Path:
    return copy_fixture("damaged/raw-unknown-type", root)


def seq_gap(root: Path) -> Path:
    return copy_fixture("damaged/raw-seq-gap-corrupt", root)


def mixed_encodings(root: Path) -> tuple[Path, Path]:
    """One root holding a raw log (a/none) and a zstd log (b/zstd): two sessions, two encodings."""
    return copy_fixture("a-one-turn/none", root), copy_fixture("b-three-turns/zstd", root)


def both_encodings(root: Path) -> Path:
    """One session directory holding both ``session.jsonl`` and ``session.jsonl.zstd`` (DSH refuses it)."""
    raw = copy_fixture("b-three-turns/none", root)
    shutil.copy(next((FIXTURES / "b-three-turns" / "zstd" / "store").glob("*/*/session.jsonl.zstd")),
                raw.with_name("session.jsonl.zstd"))
    return raw


def flat_layout(root: Path) -> Path:
    """A log in DSH's retired flat layout: ``<project>/<id>.jsonl`` (DSH refuses it)."""
    log = copy_fixture("b-three-turns/none", root)
    flat = log.parent.parent / f"{B_ID}.jsonl"
    log.rename(flat)
    log.parent.rmdir()
    return flat


def spread_sessions(root: Path, count: int, *, folders: int) -> list[str]:
    """``count`` healthy copies of a/none under new ids, spread round-robin over ``folders`` working directories
    (so over that many project directories); returns their ids. Each copy's header names its own id and cwd, so it
    is where its header says."""
    from dsh_todo.harness.persistence.jsonl.paths import log_path

    lines = (FIXTURES / "a-one-turn" / "none" / "store").glob("*/*/session.jsonl").__next__().read_bytes()
    first, rest = lines.split(b"\n", 1)
    header = json.loads(first)
    ids = []
    for index in range(count):
        session_id = f"s{index:06d}"
        cwd = f"/home/dev/projects/p{index % folders:06d}"
        log = log_path(root, cwd, session_id, "none", 0)  # a DSH 0.1 log (format v0) keeps its v0 name
        log.parent.mkdir(parents=True)
        stamped = {**header, "id": session_id, "createdAt": header["createdAt"] + index, "cwd": cwd}
        log.write_bytes(json.dumps(stamped, separators=(",", ":")).encode() + b"\n" + rest)
        ids.append(session_id)
    return ids


DEEP: Final = 1000
"""How deep the crafted line nests: beyond the reader's bound (:data:`dsh_todo.jsonutil.MAX_VALUE_DEPTH`)."""


def deep_line(root: Path, *, at_end: bool = False) -> Path:
    """b/none with one ``step/end`` (or, ``at_end``, an extra last event) whose data nests :data:`DEEP` arrays.

    Repro before the bound: ``events`` and ``run --session`` died of ``RecursionError`` ("maximum recursion depth
    exceeded while encoding a JSON object"), ``plan`` showed a plan for it, and the web history answered 500.
    """
    nested = b"[" * DEEP + b"]" * DEEP

    def edit(lines: list[bytes]) -> None:
        if at_end:
            seq = len(lines) - 2  # the header, then seqs 0..n-1, then the empty string after the final newline
            lines.insert(-1, b'{"type":"step/end","seq":%d,"time":1,"data":%s}' % (seq, nested))
            return
        index = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"step/end"'))
        lines[index] = lines[index][:lines[index].index(b'"data":') + len(b'"data":')] + nested + b"}"

    return _edit_lines(copy_fixture("b-three-turns/none", root), edit)


CRAFTED: dict[str, Callable[[Path], Path]] = {
    "broken-json-middle": broken_json_middle,
    "torn-tail": torn_tail,
    "malformed-todos": malformed_todos,
    "malformed-item": lambda root: malformed_todos(root, b'{"todos":[{"content":"a","status":"done"}]}'),
    "todo-write-without-data": todo_write_without_data,
    "copied-elsewhere": copied_elsewhere,
    "unknown-type": unknown_type,
    "seq-gap": seq_gap,
    "both-encodings": both_encodings,
    "deep-line": deep_line,
    "deep-last-line": lambda root: deep_line(root, at_end=True),
}
"""Every crafted variant whose log a path can name (the flat layout and mixed roots are checked on their own)."""
