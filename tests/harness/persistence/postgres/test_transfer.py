"""``dsh-todo import`` / ``export``: JSONL ⇄ PostgreSQL, byte-faithful, against DSH's own logs and ours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from dsh_todo.cli import main as cli
from dsh_todo.harness import boot
from dsh_todo.harness.persistence import SessionExistsError
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.jsonl.chunk_rows import ROW_TYPES
from dsh_todo.harness.persistence.postgres import PgBackend
from dsh_todo.harness.persistence.transfer import Failed, Moved, export_root, import_root
from dsh_todo.jsonutil import dumps, loads
from dsh_todo.standard import composition
from tests.crafted import A_ID, B_ID, broken_json_middle, copy_fixture
from tests.harness.persistence.fixture_logs import FIXTURE_NAMES, copy_store, load_fixture

pytestmark = pytest.mark.skipif(not FIXTURE_NAMES, reason="DSH fixture logs (tests/fixtures) are absent")


def files(root: Path) -> dict[str, bytes]:
    """Every log under a root, by relative path (other files, such as projection checkpoints, are not logs)."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("session*.jsonl*"))}


def stored_rows(url: str, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(f'SELECT session_id, seq, batch, type, event FROM "{schema}".dsh_todo_events '
                            "ORDER BY session_id, seq").fetchall()


@pytest.mark.parametrize("name", FIXTURE_NAMES or ["absent"])
def test_dsh_fixtures_round_trip_byte_for_byte(name: str, tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    fixture = load_fixture(name)
    source = copy_store(fixture, tmp_path / "source")
    compression = "none" if fixture.compression == "none" else "zstd"
    store = PgBackend(pg_url, schema=pg_schema)
    try:
        [imported] = import_root(source, store) or [None]
        if not fixture.expected["load"]["ok"]:
            if imported is None:  # a header from a newer format is not even listed, as in JSONL's list()
                assert fixture.expected["load"]["error"]["message"].startswith(f'session "{fixture.session_id}"')
                return
            # Refused exactly as the JSONL backend's load refuses it (DSH's message), and nothing was imported.
            assert isinstance(imported, Failed), imported
            with pytest.raises(type(imported.error)) as refused:
                JsonlBackend(copy_store(fixture, tmp_path / "again"), compression).load(fixture.session_id)
            assert str(imported.error).replace(str(source), "<root>") == str(refused.value).replace(
                str(tmp_path / "again"), "<root>")
            assert store.locate(fixture.session_id) is None
            return
        assert isinstance(imported, Moved), imported
        assert imported.faithful
        assert files(source) == files(fixture.folder / "store")  # the source root is untouched

        # Events: exactly what DSH's load returned (closers of an interrupted turn included), as exact text.
        stored = store.read(fixture.session_id)
        assert [dumps(event) for event in stored.events] == [dumps(event) for event in fixture.expected["events"]]
        if "headerLine" in fixture.expected:
            with psycopg.connect(pg_url) as conn:
                row = conn.execute(f'SELECT header FROM "{pg_schema}".dsh_todo_sessions').fetchone()
            assert row is not None and row[0] == fixture.expected["headerLine"]
        if compression == "none" and not name.startswith("damaged/"):
            texts = {row[1]: row[4] for row in stored_rows(pg_url, pg_schema)}
            for line in fixture.log_file.read_bytes().splitlines()[1:]:  # every verbatim line is an event's text
                record = loads(line)
                if record["type"] not in ROW_TYPES:
                    assert texts[record["seq"]] == line.decode("utf-8")

        # Back out: the file DSH's load leaves behind, byte for byte.
        [exported] = export_root(store, tmp_path / "out", compression=compression)
        assert isinstance(exported, Moved), exported
        after = fixture.after_load_file()
        expected_root = after.parents[2] if after is not None else fixture.folder / "store"
        assert files(tmp_path / "out") == files(expected_root)
    finally:
        store.close()


@pytest.mark.parametrize("version", [4, 0])
def test_our_own_logs_round_trip_in_both_encodings(version: int, tmp_path: Path, pg_url: str,
                                                   pg_schema: str) -> None:
    """In both formats: v4 (what a new session is written in) and v0 (asked for), whose delta runs are packed."""
    for compression in ("none", "zstd"):
        root = tmp_path / compression
        ctx = boot(composition(root, compression=compression, batch_delay_ms=60_000))
        session = ctx.sessions.create(f"ours-{compression}", cwd="/home/dev/ours",
                                      **({"version": 0} if version == 0 else {}))
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        for index in range(7):  # a delta run split by a flush: packed per batch in v0, as DSH 0.1 does
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {
                "type": "text-delta", "index": 0, "text": f"part {index} "}})
            if index == 4:
                ctx.session_persistence.flush()
        session.append("todo/write", {"todos": [{"content": "ship it", "status": "in_progress"}]})
        call = session.append("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "todo_write",
                                            "arguments": {}})
        session.append("tool/result", {"turn": 1, "step": 1, "message": {"role": "tool", "content": []}},
                       surface_op="append", source_event_seqs=[2, 3, 4, call["seq"]])  # a run: a v4 range
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        ctx.dispose()
        [log] = root.glob("*/*/session*.jsonl*")
        assert log.name == {(4, "none"): "session.v4.jsonl", (4, "zstd"): "session.v4.jsonl.zstd",
                            (0, "none"): "session.jsonl", (0, "zstd"): "session.jsonl.zstd"}[version, compression]
        if compression == "none":
            text = log.read_bytes()
            assert (b'"type":"text-chunks"' in text) == (version == 0)
            assert (b'"sourceEventSeqs":[[2,4],' in text) == (version == 4)
        store = PgBackend(pg_url, schema=pg_schema)
        try:
            [moved] = import_root(root, store)
            assert isinstance(moved, Moved) and moved.faithful, moved
            [back] = export_root(store, tmp_path / f"{compression}-out", compression=compression,
                                     session_ids=[f"ours-{compression}"])
            assert isinstance(back, Moved)
        finally:
            store.close()
        assert files(tmp_path / f"{compression}-out") == files(root)


def test_sessions_written_to_postgres_export_and_come_back_identical(
        boot_pg: Any, tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    ctx = boot_pg(batch_delay_ms=60_000)
    session = ctx.sessions.create("from-pg", cwd="/srv")
    for turn in (1, 2):
        session.append("turn/start", {"turn": turn})
        session.append("todo/write", {"todos": [{"content": f"turn {turn}", "status": "pending"}]})
        ctx.session_persistence.flush()
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        ctx.session_persistence.flush()
    ctx.sessions.close("from-pg")
    before = stored_rows(pg_url, pg_schema)
    assert [row[2] for row in before] == [0, 0, 2, 3, 3, 5]

    assert cli(["export", str(tmp_path / "out"), "--database", pg_url, "--schema", pg_schema]) == 0
    exported = JsonlBackend(tmp_path / "out").read("from-pg")
    assert [dumps(event) for event in exported.events] == [dumps(event) for event in session.events]
    assert exported.meta["cwd"] == "/srv"
    # Exporting again would overwrite: refused, and the run says so.
    with pytest.raises(SessionExistsError):
        JsonlBackend(tmp_path / "out").create({"id": "from-pg", "createdAt": 1, "cwd": "/srv"})
    assert cli(["export", str(tmp_path / "out"), "--database", pg_url, "--schema", pg_schema]) == 1

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{pg_schema}".dsh_todo_sessions')
    assert cli(["import", str(tmp_path / "out"), "--database", pg_url, "--schema", pg_schema]) == 0
    assert stored_rows(pg_url, pg_schema) == before  # seqs, batches, types and text, all as they were
    # Importing the same logs again finds them there, identical: skipped (tests/…/test_import_again.py).
    assert cli(["import", str(tmp_path / "out"), "--database", pg_url, "--schema", pg_schema]) == 0


def test_import_of_a_root_with_a_corrupt_log_imports_the_rest(
        tmp_path: Path, pg_url: str, pg_schema: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A root holding one good and one corrupt log: the good one is imported, the corrupt one is named in one line
    with the reader's reason and leaves nothing in the database, and the command exits 1.

    Repro: the failure line said ``corrupt session log: unparsable committed event at line 24`` without saying
    which of the root's sessions it was about."""
    root = tmp_path / "root"
    copy_fixture("a-one-turn/none", root)
    broken_json_middle(root)
    assert cli(["import", str(root), "--database", pg_url, "--schema", pg_schema]) == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0] == f"dsh-todo import: {B_ID}: corrupt session log: unparsable committed event at line 24"
    assert lines[1] == "1 sessions imported, 1 failed"
    assert A_ID in out
    imported = {row[0] for row in stored_rows(pg_url, pg_schema)}
    assert imported == {A_ID}


def test_transfer_commands_need_a_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("DSH_TODO_DATABASE_URL", raising=False)
    assert cli(["import", str(tmp_path)]) == 2
    assert "no database: pass --database URL or set $DSH_TODO_DATABASE_URL" in capsys.readouterr().err
