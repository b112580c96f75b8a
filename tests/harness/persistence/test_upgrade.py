"""Carrying a v0 log forward to format v4: byte for byte what DSH 0.2.1's own export makes of the same log.

``tests/fixtures/dsh-v4-upgrade`` holds, for every DSH 0.1.1 fixture log DSH can export and for logs our own front
doors wrote (a refused call, a resumed session, an aborted turn, a crashed turn before and after our recovery, the
demo) and for DSH logs edited into the legacy shapes the migration rewrites, the zip DSH served from
``GET /api/session.export``; for a log DSH refuses, its refusal. Each log is read the
way our backend reads it (zstd decoded, packed chunk rows expanded) and upgraded; the header line and one line per
event, dumped by the canonical encoder, must be the exported file exactly.
"""

from __future__ import annotations

import copy
import zipfile
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness.persistence.jsonl.reading import scan_log
from dsh_todo.harness.persistence.upgrade import UpgradeError, upgrade_to_v4
from dsh_todo.jsonutil import dumps_lines
from tests.conftest import FIXTURES_DIR

UPGRADE = FIXTURES_DIR / "dsh-v4-upgrade"
DSH_LOGS = FIXTURES_DIR / "dsh-sessions"


def _cases(kind: str) -> list[str]:
    """Fixture folders (relative to ``UPGRADE``) that hold ``export.zip`` or ``refusal.txt``."""
    return sorted(str(path.parent.relative_to(UPGRADE)) for path in UPGRADE.rglob(kind))


EXPORTED = _cases("export.zip")
REFUSED = _cases("refusal.txt")


def _log(case: str) -> Path:
    """The v0 log a case was exported from: DSH's fixture of the same name, or the case's own store."""
    store = DSH_LOGS / case.removeprefix("dsh-sessions/") / "store" if case.startswith("dsh-sessions/") \
        else UPGRADE / case / "store"
    (log,) = store.glob("*/*/session.jsonl*")
    return log


def _read(case: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    found = scan_log(_log(case))
    assert found.events is not None
    return found.meta, list(found.events)


def _export(case: str) -> bytes:
    with zipfile.ZipFile(UPGRADE / case / "export.zip") as archive:
        assert archive.namelist() == ["session.v4.jsonl"]
        return archive.read("session.v4.jsonl")


def test_the_fixture_set_is_complete() -> None:
    """Every DSH fixture DSH exports is here, and every case of ours; losing a folder must fail, not skip."""
    assert len(EXPORTED) == 34
    assert [case for case in EXPORTED if case.startswith("crafted/")] == [
        "crafted/error-reasons/none", "crafted/legacy/none"]
    assert [case for case in EXPORTED if case.startswith("ours/")] == [
        f"ours/{name}/{encoding}" for name in ("aborted", "demo", "interrupted-crashed", "interrupted-resumed",
                                               "refused", "resumed") for encoding in ("none", "zstd")]
    assert REFUSED == ["crafted/unknown-content/none", "dsh-sessions/damaged/raw-unknown-ignorable", "ours/mcp/none",
                       "ours/mcp/zstd"]


@pytest.mark.parametrize("case", EXPORTED)
def test_the_upgrade_is_dsh_export_byte_for_byte(case: str) -> None:
    meta, events = _read(case)
    header, upgraded = upgrade_to_v4(meta, events)
    assert dumps_lines([header, *upgraded]) == _export(case)


@pytest.mark.parametrize("case", REFUSED)
def test_a_log_dsh_refuses_is_refused_with_its_reason(case: str) -> None:
    """DSH 0.2.1 will not carry these forward, and says why in the words pinned here: our MCP server logs
    ``tool/call`` with no ``assistant/message`` advertising the call; an ignorable event of an unknown type and a
    content block of an unknown kind are refused too."""
    meta, events = _read(case)
    with pytest.raises(UpgradeError) as refused:
        upgrade_to_v4(meta, events)
    assert str(refused.value) + "\n" == (UPGRADE / case / "refusal.txt").read_text(encoding="utf-8")


def test_nothing_given_is_changed() -> None:
    meta, events = _read("dsh-sessions/a-one-turn/none")
    before = copy.deepcopy((meta, events))
    upgrade_to_v4(meta, events)
    assert (meta, events) == before


def test_the_header_record_or_the_readers_metadata_give_the_same_result() -> None:
    meta, events = _read("ours/resumed/none")
    assert "type" not in meta
    assert upgrade_to_v4({"type": "session", **meta}, events) == upgrade_to_v4(meta, events)


def test_v4_header_key_order_with_every_optional_field() -> None:
    meta = {"type": "session", "version": 0, "id": "s", "createdAt": 5, "cwd": "/p", "parentSession": "p",
            "origin": "subagent", "delegationDepth": 1, "agentPreset": "code"}
    header, events = upgrade_to_v4(meta, [])
    assert events == []
    assert dumps_lines([header]) == (b'{"type":"session","version":4,"id":"s","createdAt":5,"cwd":"/p",'
                                     b'"parentSession":"p","isSeeded":false,"origin":"subagent","delegationDepth":1,'
                                     b'"agentPreset":"ptc"}\n')


@pytest.mark.parametrize(("meta", "reason"), [
    ({"version": 4, "id": "s", "createdAt": 1, "delegationDepth": 0},
     "expected a format v0 session header, got version 4"),
    ({"version": 0, "id": "s", "createdAt": 1, "seedLength": 3, "delegationDepth": 0},
     "seeded sessions (seedLength) are not carried forward to format v4"),
])
def test_only_unseeded_v0_logs_are_upgraded(meta: dict[str, Any], reason: str) -> None:
    with pytest.raises(UpgradeError) as refused:
        upgrade_to_v4(meta, [])
    assert str(refused.value) == reason
