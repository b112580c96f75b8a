"""The seams ``todo_write`` runs on, each a plugin addressable by its DSH package name.

Exported here is what booting and driving a composition needs: :func:`boot`, the :class:`Context` it returns (and
what mounting a :class:`Plugin` gives back), :class:`Session` and :class:`Agent`, the two errors a bad composition
raises, and :class:`DshTodoError`, the root of every error dsh-todo raises on purpose (the tree is drawn in
:mod:`dsh_todo.harness.errors`). The seams themselves are subpackages and modules (``tools``, ``llm``,
``persistence``, ``projections``, ``invariants``, ``agent_loop``, ``turns``), each with its own surface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_todo.harness.lazy import lazy_exports

if TYPE_CHECKING:
    from dsh_todo.harness.agent import Agent
    from dsh_todo.harness.context import Context, Disposer, Plugin, PluginHandle
    from dsh_todo.harness.errors import BootError, ConfigError, DshTodoError
    from dsh_todo.harness.loader import boot
    from dsh_todo.harness.session import Session, SessionStore

__all__ = ["Agent", "BootError", "ConfigError", "Context", "Disposer", "DshTodoError", "Plugin", "PluginHandle",
           "Session", "SessionStore", "boot"]

_HOMES = {"Agent": "agent", "Context": "context", "Disposer": "context", "Plugin": "context",
          "PluginHandle": "context", "BootError": "errors", "ConfigError": "errors", "DshTodoError": "errors",
          "boot": "loader", "Session": "session", "SessionStore": "session"}


# Importing a seam (``harness.errors``, ``harness.persistence``) runs this file first: it must not import the loader
# and its plugin discovery (``importlib.metadata``, YAML), which a ``dsh-todo plan`` process never needs.
__getattr__ = lazy_exports(__name__, _HOMES)
