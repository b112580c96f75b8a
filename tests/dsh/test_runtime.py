"""The helpers of the real-``dsh`` tests themselves: a missing ``dsh`` fails CI and skips elsewhere, saying why."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from tests.dsh.runtime import dsh_command


def test_a_missing_dsh_says_where_it_was_looked_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(sysconfig, "get_path", lambda _name: str(tmp_path))
    with pytest.raises(pytest.skip.Exception) as skipped:
        dsh_command()
    assert str(skipped.value).startswith(f"the dsh command is not installed in this environment ({tmp_path / 'dsh'}): "
                                         "deepseek-harness-runtime-bin==0.2.1rc2 is in the dev group for Linux x86-64")
