"""The shared format-v4 fixtures (``tests/fixtures/dsh-sessions-v4``: two turns written by ``dsh`` 0.2.1-rc.2, zstd
and raw) read by ``dsh-todo``: the plan after each turn is the one DSH computed (``expected.json``), and the
listing takes each session as ``ok``. No ``dsh`` runs here."""

from __future__ import annotations

import json

import pytest

from tests.conftest import fixtures_dir
from tests.dsh import ours

V4 = fixtures_dir() / "dsh-sessions-v4" / "two-turns"


@pytest.mark.parametrize("encoding", ["zstd", "none"])
@pytest.mark.parametrize(("store", "after"), [("after-turn1/store", "afterTurn1"), ("store", "afterTurn2")])
def test_plan_and_listing_are_dsh_own(encoding: str, store: str, after: str) -> None:
    expected = json.loads((V4 / encoding / "expected.json").read_text(encoding="utf-8"))
    root = V4 / encoding / store
    assert ours.listing(root) == {expected["sessionId"]: "ok"}
    assert ours.plan(root, expected["sessionId"]) == expected[after]["todos"]
