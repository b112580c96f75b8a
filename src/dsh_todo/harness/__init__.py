"""The seams ``todo_write`` runs on, each a plugin addressable by its DSH package name."""

from dsh_todo.harness.agent import Agent
from dsh_todo.harness.context import Context, Disposer, PluginHandle
from dsh_todo.harness.loader import boot
from dsh_todo.harness.session import Session, SessionStore

__all__ = ["Agent", "Context", "Disposer", "PluginHandle", "Session", "SessionStore", "boot"]
