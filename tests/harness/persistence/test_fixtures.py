"""Every DSH fixture log loads, recovers or is refused exactly as DSH's own loader did (its ``expected.json``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence import CorruptSessionLogError, SessionFormatUnsupportedError, SessionLogError
from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.harness.persistence.upgrade import UpgradeError, upgrade_to_v4
from dsh_todo.jsonutil import dumps
from tests.harness.persistence.fixture_logs import (
    Fixture,
    last_todo_write,
    load_fixture,
    now_error,
    standing_plan,
)

ERROR_NAMES = {CorruptSessionLogError: "Error", SessionFormatUnsupportedError: "SessionFormatUnsupportedError"}


def _error_record(exc: SessionLogError, root: Path) -> dict[str, Any]:
    record: dict[str, Any] = {"name": ERROR_NAMES[type(exc)], "message": str(exc).replace(str(root), "<root>")}
    if exc.__cause__ is not None:
        record["cause"] = str(exc.__cause__)
    return record


def _store(fixture: Fixture, root: Path) -> JsonlBackend:
    """A backend that loads a v0 log as DSH 0.1.1 did (recovery committed to the v0 file itself): what these
    fixtures recorded, and what a v0 log DSH 0.2 would not migrate still gets. Carrying v0 forward to v4 (the default)
    is :func:`test_load_carries_v0_forward_beside_the_untouched_v0_file`'s."""
    store = JsonlBackend(root, fixture.compression)  # type: ignore[arg-type]
    store.carry_forward = False
    return store


def test_load_matches_dsh(fixture_copy: tuple[Fixture, Path]) -> None:
    fixture, root = fixture_copy
    expected = fixture.expected
    store = _store(fixture, root)
    log_file = root / Path(expected["file"]).relative_to("store")
    before = log_file.read_bytes()
    if not expected["load"]["ok"]:
        with pytest.raises(SessionLogError) as caught:
            store.load(fixture.session_id)
        assert _error_record(caught.value, root) == now_error(expected["load"]["error"])
        assert log_file.read_bytes() == before, "a refused log must be left untouched"
        assert sorted(p.name for p in log_file.parent.iterdir()) == [log_file.name], "no lock file left behind"
        return

    loaded = store.load(fixture.session_id)
    assert dumps(loaded.events) == dumps(expected["events"])
    assert dumps(loaded.meta) == dumps(expected["load"]["meta"])
    assert len(loaded.events) == expected["load"]["eventCount"]
    assert standing_plan(loaded.events) == expected["todos"]
    assert last_todo_write(loaded.events) == expected["lastTodoWrite"]
    assert loaded.rewrote == expected["load"]["rewroteFile"]
    assert len(loaded.closers) == expected["load"].get("closersAppended", 0)
    if not loaded.rewrote:
        assert log_file.read_bytes() == before


def test_damaged_recovery_is_byte_exact(recoverable_copy: tuple[Fixture, Path]) -> None:
    fixture, root = recoverable_copy
    expected = fixture.expected
    store = _store(fixture, root)
    log_file = root / Path(expected["file"]).relative_to("store")
    before = log_file.read_bytes()
    loaded = store.load(fixture.session_id)

    assert loaded.kept == expected["load"]["keptEventCount"]
    assert [closer["type"] for closer in loaded.closers] == expected["load"]["closerTypes"]
    assert dumps(loaded.closers) == dumps(expected["closers"])

    after = log_file.read_bytes()
    expected_after = fixture.after_load_file()
    if expected_after is not None:
        assert after == expected_after.read_bytes()
        assert hashlib.sha256(after).hexdigest() == expected["fileAfterLoad"]["sha256"]
        details = expected["fileAfterLoad"]
        if "appendedText" in details:
            cut = details["truncatedTo"]
            assert after[:cut] == before[:cut]
            assert after[cut:].decode("utf-8") == details["appendedText"]
    else:
        assert after == before

    again = store.load(fixture.session_id)
    assert dumps(again.events) == dumps(loaded.events)
    assert again.rewrote is False and again.closers == []
    assert log_file.read_bytes() == after
    assert expected["secondLoad"] == {"eventCount": len(again.events), "identicalEvents": True, "fileUnchanged": True}


def test_raw_read_and_non_mutating_read(damaged_copy: tuple[Fixture, Path]) -> None:
    """``read_stored`` is DSH's backend read (with its torn marker); ``read`` is ``readFrom(id, 0)``; neither writes."""
    fixture, root = damaged_copy
    expected = fixture.expected
    store = _store(fixture, root)
    log_file = root / Path(expected["file"]).relative_to("store")
    before = log_file.read_bytes()

    prefix = expected["storedPrefix"]
    if "error" in prefix:
        with pytest.raises(SessionLogError) as caught:
            store.read_stored(fixture.session_id)
        assert _error_record(caught.value, root) == now_error(prefix["error"])
    else:
        stored = store.read_stored(fixture.session_id)
        assert len(stored.events) == prefix["eventCount"]
        assert stored.events[-1]["seq"] == prefix["lastSeq"]
        marker = prefix["tornMarker"]
        if marker is None:
            assert stored.torn is None
        else:
            assert stored.torn is not None
            assert stored.torn.truncate_to == marker["truncateTo"]
            recovered = stored.torn.recovered
            assert len(recovered) == marker["recoveredEventCount"]
            assert (recovered[0]["seq"] if recovered else None) == marker["recoveredFirstSeq"]
            assert (recovered[-1]["seq"] if recovered else None) == marker["recoveredLastSeq"]

    read_from0 = expected["readFrom0"]
    if "error" in read_from0:
        with pytest.raises(SessionLogError) as caught:
            store.read(fixture.session_id)
        assert _error_record(caught.value, root) == now_error(read_from0["error"])
    else:
        assert len(store.read(fixture.session_id).events) == read_from0["eventCount"]
    assert log_file.read_bytes() == before


def test_intact_fixture_reads_in_place(intact_name: str) -> None:
    """Reading never writes, so the read-only originals can be read directly; header and counts match."""
    fixture = load_fixture(intact_name)
    store = JsonlBackend(fixture.folder / "store", fixture.compression)  # type: ignore[arg-type]
    stored = store.read(fixture.session_id)
    assert stored.torn is None
    assert stored.path == fixture.log_file
    assert dumps({"type": "session", **stored.meta}) == fixture.expected["headerLine"]
    assert len(stored.events) == fixture.expected["writer"]["eventCount"]
    assert standing_plan(stored.events) == fixture.expected["writer"]["todosAtEnd"]
    [listed] = store.stored_sessions()
    assert (listed.id, listed.cwd, listed.path) == (fixture.session_id, fixture.expected["cwd"], fixture.log_file)


@pytest.mark.parametrize(("version", "name", "words"), [
    (5, "session.jsonl", "uses log format v5, but this harness reads only v4: the log was written by a newer harness "
                         "— upgrade the harness to open it"),
    (5, "session.v4.jsonl", "uses log format v5, but this harness reads only v4: the log was written by a newer "
                            "harness — upgrade the harness to open it"),
    (3, "session.v4.jsonl", "uses log format v3, older than the supported v4, and this build ships no upgrade path "
                            "for it"),
])
def test_a_log_of_a_version_no_harness_reads_is_refused_by_its_version(version: int, name: str, words: str,
                                                                       tmp_path: Path) -> None:
    """The version refusal wins over the file name's generation: a log from a newer harness is "upgrade"."""
    fixture = load_fixture("b-three-turns/none")
    root = tmp_path / "store"
    log = root / Path(fixture.expected["file"]).relative_to("store")
    log.parent.mkdir(parents=True)
    header, rest = fixture.log_file.read_bytes().split(b"\n", 1)
    (log.parent / name).write_bytes(header.replace(b'"version":0,', b'"version":%d,' % version, 1) + b"\n" + rest)
    with pytest.raises(SessionFormatUnsupportedError) as caught:
        JsonlBackend(root, "none").load(fixture.session_id)
    assert str(caught.value) == f'session "{fixture.session_id}" {words} (raw log: {log.parent / name})'


def test_load_carries_v0_forward_beside_the_untouched_v0_file(fixture_copy: tuple[Fixture, Path]) -> None:
    """The default load of a DSH 0.1.1 log DSH 0.2 migrates: the v4 generation is written beside the v0 file (left as
    it was), it holds the upgrade of what recovery kept (DSH 0.2's migration, :mod:`...upgrade`) and the v4 closers,
    and its standing plan is DSH's."""
    fixture, root = fixture_copy
    expected = fixture.expected
    if not expected["load"]["ok"]:
        return
    log_file = root / Path(expected["file"]).relative_to("store")
    before = log_file.read_bytes()
    stored = JsonlBackend(root, fixture.compression).read_stored(fixture.session_id)  # type: ignore[arg-type]
    try:
        _, upgraded = upgrade_to_v4(stored.meta, stored.events)
    except UpgradeError:
        return  # DSH 0.2 refuses to migrate it: it goes on in v0, as _store's tests show
    loaded = JsonlBackend(root, fixture.compression).load(fixture.session_id)  # type: ignore[arg-type]
    assert log_file.read_bytes() == before
    assert loaded.meta["version"] == 4 and loaded.path == log_file.with_name(
        log_file.name.replace("session.jsonl", "session.v4.jsonl"))
    assert dumps(loaded.events[:len(upgraded)]) == dumps(upgraded)
    assert [closer["type"] for closer in loaded.closers] == expected["load"].get("closerTypes", [])
    assert standing_plan(loaded.events) == expected["todos"]
