"""Where DSH's fixture logs live, scratch copies of them, and the two todo read rules the fixtures record.

The fixtures are real DSH session logs in ``tests/fixtures/dsh-sessions``. Tests treat them as read-only, so every
test that loads (and may repair) one works on a copy.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURES_DIR

FIXTURES = FIXTURES_DIR / "dsh-sessions"



DSH_01_TO_02: dict[str, str] = {
    "uses log format v1, but this harness reads only v0: the log was written by a newer harness — upgrade the "
    "harness to open it": "uses log format v1, older than the supported v4, and this build ships no upgrade path "
                          "for it",
}
"""Where this harness, reading as DSH 0.2 does (format v4), words a refusal otherwise than DSH 0.1.1 did when it made
the fixtures: a v1 log is now older than the supported version, not newer."""


def now_error(record: dict[str, Any]) -> dict[str, Any]:
    """A fixture's recorded error as this harness gives it (:data:`DSH_01_TO_02`), every other word unchanged."""
    message = record["message"]
    for then, now in DSH_01_TO_02.items():
        message = message.replace(then, now)
    return {**record, "message": message}


def fixtures_root() -> Path:
    return FIXTURES


def _fixture_names() -> list[str]:
    root = FIXTURES
    if not root.is_dir():
        return []
    return sorted(str(path.parent.relative_to(root)) for path in root.rglob("expected.json"))


FIXTURE_NAMES = _fixture_names()
INTACT_NAMES = [name for name in FIXTURE_NAMES if not name.startswith("damaged/")]
DAMAGED_NAMES = [name for name in FIXTURE_NAMES if name.startswith("damaged/")]
RAW_INTACT_NAMES = [name for name in INTACT_NAMES if name.endswith("/none")]
ZSTD_INTACT_NAMES = [name for name in INTACT_NAMES if name.endswith("/zstd")]


def _recoverable(name: str) -> bool:
    return bool(json.loads((FIXTURES / name / "expected.json").read_text(encoding="utf-8"))["load"]["ok"])


RECOVERABLE_NAMES = [name for name in DAMAGED_NAMES if _recoverable(name)]


@dataclass
class Fixture:
    """One fixture folder: its expectations, the original store, and (after :func:`copy_store`) a writable copy."""

    name: str
    folder: Path
    expected: dict[str, Any]

    @property
    def session_id(self) -> str:
        return str(self.expected["sessionId"])

    @property
    def compression(self) -> str:
        return str(self.expected["compression"])

    @property
    def log_file(self) -> Path:
        return self.folder / str(self.expected["file"])

    def after_load_file(self) -> Path | None:
        after = self.expected.get("fileAfterLoad")
        return self.folder / after["file"] if after else None


def load_fixture(name: str) -> Fixture:
    folder = fixtures_root() / name
    return Fixture(name, folder, json.loads((folder / "expected.json").read_text(encoding="utf-8")))


def copy_store(fixture: Fixture, target: Path) -> Path:
    """A writable copy of the fixture's ``store/`` at ``target``; returns it (the persistence root)."""
    shutil.copytree(fixture.folder / "store", target, copy_function=shutil.copyfile)
    for directory, _, _ in os.walk(target):
        os.chmod(directory, 0o700)
    return target


def standing_plan(events: Sequence[Mapping[str, Any]]) -> Any:
    """The ``todos`` projection: the last ``todo/write`` that no later ``turn/start`` cleared, else ``None``."""
    plan = None
    for event in events:
        if event["type"] == "todo/write":
            plan = event["data"]["todos"]
        elif event["type"] == "turn/start":
            plan = None
    return plan


def zstd_batch_sizes(raw: bytes) -> list[int]:
    """How many events each write batch of a zstd log holds: one batch per frame after the header frame."""
    from dsh_todo.harness.persistence.jsonl.chunk_rows import expand_row
    from dsh_todo.harness.persistence.jsonl.zstd import decode_frame, scan_frames
    from dsh_todo.jsonutil import loads

    sizes = []
    for start, end in scan_frames(raw).frames[1:]:
        records = map(loads, decode_frame(raw[start:end]).splitlines())
        sizes.append(sum(len(expand_row(r)) if r["type"].endswith("-chunks") else 1 for r in records))
    return sizes


def last_todo_write(events: Sequence[Mapping[str, Any]]) -> Any:
    writes = [event["data"]["todos"] for event in events if event["type"] == "todo/write"]
    return writes[-1] if writes else None
