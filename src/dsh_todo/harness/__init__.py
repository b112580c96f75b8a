"""The seams ``todo_write`` runs on, each a plugin addressable by its DSH package name.

Exported here is what booting and driving a composition needs: :func:`boot`, the :class:`Context` it returns (and
what mounting a :class:`Plugin` gives back), :class:`Session` and :class:`Agent`, the two errors a bad composition
raises, and :class:`DshTodoError`, the root of every error dsh-todo raises on purpose (the tree is drawn in
:mod:`dsh_todo.harness.errors`). The seams themselves are subpackages and modules (``tools``, ``llm``,
``persistence``, ``projections``, ``invariants``, ``agent_loop``, ``turns``), each with its own surface.

This face is for code outside dsh-todo (its names are the ones the design keeps stable); dsh-todo's own modules
import each name from its home module, so the import graph shows what depends on what (``tests/test_import_graph.py``
holds that nothing in ``src`` imports through this face). The errors and the disposer (which every reader loads
anyway) are imported plainly. The live harness (``Context``, ``Session``, ``Agent``, the loader, the plugin shape) is
not: importing any seam (``harness.errors``, ``harness.projections``, the persistence reader) runs this file first,
and a ``dsh-todo plan`` process must not load the plugin tree, live sessions, ``logging`` or plugin discovery to read
one log (decision 0014; ``tests/cli/test_startup.py``). Those seven names are read from their home modules on first
use (PEP 562): the one package face outside the persistence package that still does so (decision 0030).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dsh_todo.harness.disposer import Disposer
from dsh_todo.harness.errors import BootError, ConfigError, DshTodoError

if TYPE_CHECKING:
    from dsh_todo.harness.agent import Agent
    from dsh_todo.harness.context import Context, PluginHandle
    from dsh_todo.harness.loader import boot
    from dsh_todo.harness.plugin_shape import Plugin
    from dsh_todo.harness.session import Session, SessionStore

__all__ = ["Agent", "BootError", "ConfigError", "Context", "Disposer", "DshTodoError", "Plugin", "PluginHandle",
           "Session", "SessionStore", "boot"]

_LIVE = {"Agent": "agent", "Context": "context", "Plugin": "plugin_shape", "PluginHandle": "context", "boot": "loader",
         "Session": "session", "SessionStore": "session"}
"""The live harness's names → their home modules under this package."""


def __getattr__(name: str) -> Any:
    home = _LIVE.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
