"""Package exports loaded on first use (PEP 562): the one ``__getattr__`` a package ``__init__`` installs.

Importing any module of a package runs its ``__init__`` first; one that imported everything it exports made every
reader pay for every writer (``dsh-todo plan`` loaded the persistence service, write-behind and locks to catch one
error class). A package whose ``__init__`` only names where each export lives costs nothing until one is used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: an exported name is read from its home module (``homes``: name →
    module under ``package``) on first use and kept in the package, so the second use is a plain attribute."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return load
