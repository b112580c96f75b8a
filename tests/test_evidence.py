"""Evidence that cannot quietly shrink (decision 0050): a test stops for a missing tool only through
:mod:`tests.needs`, which fails in CI and skips elsewhere; every other skip in the suite is listed here with why it is
not about an install."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import needs

TESTS = Path(__file__).resolve().parent

NOT_ABOUT_AN_INSTALL = {
    "tests/carriers/test_connection_slots.py": "the machine's hard open-file limit",
    "tests/harness/persistence/test_checkpoints.py": "a generated log that does not load (logic, not the machine)",
    "tests/harness/persistence/test_lock.py": "mounting a tmpfs needs a capability; /proc/locks is Linux's",
    "tests/harness/persistence/postgres/test_transfer.py": "the fixture logs are part of the repository",
    "tests/carriers/mcp/clients/test_langchain.py": "langchain-mcp-adapters requires mcp<2: it cannot be "
                                                    "installed beside our mcp 2 pin at all",
    "tests/cli/test_demo_lines.py": "runs only in the project's own .venv (the 3.13 run has its own)",
}
"""Files that may skip for a reason other than a missing tool, and that reason."""

SKIPS = re.compile(r"pytest\.skip\(|pytest\.importorskip\(|pytest\.mark\.skipif\(|\.skipif\(")


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("1", pytest.fail.Exception),
                                             ("", pytest.skip.Exception), ("false", pytest.skip.Exception),
                                             (None, pytest.skip.Exception)])
def test_a_missing_tool_fails_in_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch, ci: str | None,
                                                         outcome: type[BaseException]) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="the reason"):
        needs.unavailable("the reason")
    with pytest.raises(outcome, match="no_such_module_here"):
        needs.module("no_such_module_here")
    with pytest.raises(outcome, match="no-such-program-here is not on PATH"):
        needs.program("no-such-program-here")


def test_every_other_skip_is_listed_with_its_reason() -> None:
    skipping = set()
    for path in TESTS.rglob("*.py"):
        relative = path.relative_to(TESTS.parent).as_posix()
        if path.name in ("needs.py", "test_evidence.py"):
            continue
        if SKIPS.search(path.read_text(encoding="utf-8")):
            skipping.add(relative)
    assert skipping - NOT_ABOUT_AN_INSTALL.keys() == set(), "stop for a missing tool through tests.needs"
    assert NOT_ABOUT_AN_INSTALL.keys() - skipping == set(), "a listed file no longer skips: drop it from the list"
