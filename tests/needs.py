"""What a test needs from the machine: a package, a program, a server. Missing, it skips with the reason here and
fails with it in CI (``CI=true``), where ``.ci/run`` installs everything the suite needs, so a blip in an install is a
red run rather than a green one that tested less (decision 0050). Every test that stops for a missing tool stops
through here; ``tests/test_evidence.py`` keeps it so."""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (``CI`` set to anything but an empty string, ``0`` or ``false``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def unavailable(reason: str) -> NoReturn:
    """Stop the test (or the module being collected) for want of ``reason``'s tool: fail in CI, skip elsewhere."""
    if in_ci():
        pytest.fail(f"required in CI: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def module(name: str, reason: str | None = None) -> ModuleType:
    """``import name``, or :func:`unavailable` (``pytest.importorskip`` that fails in CI)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(reason or f"could not import {name!r}: {exc}")


def program(name: str, what: str | None = None) -> str:
    """The path of the command ``name`` on ``PATH``, or :func:`unavailable` saying what needs it."""
    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} is not on PATH" + (f": {what}" if what else ""))
    return found
