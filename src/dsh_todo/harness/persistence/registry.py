"""Where the storage backends are registered: the entry point group ``dsh_todo.backends``, one entry per backend
(its short name and its plugin module), so another distribution adds one without touching this package.

A backend is one folder and this one registration (decision 0042). Its plugin module, besides the plugin's ``name``,
``inject``, ``Config`` and ``apply``, says how the contract tests make a throwaway store of it: ``scratch(place,
fixture, variant)`` returns the persistence row's config for a batch window, ``VARIANTS`` the configurations to run
(JSONL: raw and zstd) and ``NEEDS`` the test fixtures a store needs (PostgreSQL: a server). Nothing is imported
until it is asked for by name, so listing the backends never loads psycopg.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from types import ModuleType
from typing import Final

GROUP: Final = "dsh_todo.backends"


@cache
def backends() -> dict[str, str]:
    """Every registered backend's short name and plugin module, in name order, nothing imported (reading every
    installed distribution's metadata once)."""
    return {ep.name: ep.value for ep in sorted(entry_points(group=GROUP), key=lambda ep: ep.name)}


def backend_plugin(short_name: str) -> ModuleType:
    """The plugin module of the backend registered as ``short_name`` (``KeyError`` when none is)."""
    return import_module(backends()[short_name])
