"""Fixtures for the coding-agent CLI tests: each CLI's command, installed on first use (see :mod:`.install`)."""

from __future__ import annotations

from pathlib import Path

from tests import needs
from tests.carriers.mcp.agents.install import binary


def cli(name: str) -> Path:
    """One CLI's command; the test stops with the reason when it cannot be installed here (:mod:`tests.needs`)."""
    found = binary(name)
    if isinstance(found, str):
        needs.unavailable(found)
    return found
