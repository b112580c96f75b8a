"""Helpers for testing code that uses ``todo_write``: the harness in memory, a scripted model, a throwaway database.

The pieces our own suite uses, public so that a user's tests do not re-derive them (the role
``mcp.shared.memory`` plays for the MCP SDK):

* :func:`memory_context` — the standard runtime (tools, sessions, projections, the todo tool) with nothing
  persisted, disposed on exit; :func:`memory_composition` is its rows, for ``boot`` or a YAML file;
  :func:`memory_log_composition` is the same runtime persisted, its logs kept in memory (the registered ``memory``
  backend, held to the same contract as files and PostgreSQL); :func:`backend_composition` persists through any
  registered backend;
* :class:`ScriptedModel` and :func:`reply` / :func:`todo_call` to script it, :func:`scripted_turn` to play one turn
  of the real agent loop with it;
* :func:`stop` — stop a server started as a subprocess (SIGINT, then kill); :func:`memory_kb` and
  :func:`open_fds` — what it holds, for soak tests; :func:`rpc_result` — the result of an MCP
  streamable-HTTP answer, JSON or SSE;
* :func:`start_cluster` — a throwaway local PostgreSQL cluster (:class:`Cluster`, ``.url``), or
  :class:`ClusterUnavailable` saying why not here; :func:`database_composition` boots the standard runtime on it,
  in a schema of its own.

Importing this module imports neither pytest nor psycopg.
"""

from dsh_todo.harness.llm import ModelReply, ScriptedModel, ToolCallRequest
from dsh_todo.testing.compositions import (
    backend_composition,
    database_composition,
    memory_composition,
    memory_context,
    memory_log_composition,
)
from dsh_todo.testing.postgres import Cluster, ClusterUnavailable, start_cluster
from dsh_todo.testing.processes import memory_kb, open_fds, stop
from dsh_todo.testing.rpc import rpc_result
from dsh_todo.testing.script import reply, scripted_turn, todo_call

__all__ = [
    "Cluster",
    "ClusterUnavailable",
    "ModelReply",
    "ScriptedModel",
    "ToolCallRequest",
    "backend_composition",
    "database_composition",
    "memory_composition",
    "memory_context",
    "memory_kb",
    "memory_log_composition",
    "open_fds",
    "reply",
    "rpc_result",
    "scripted_turn",
    "start_cluster",
    "stop",
    "todo_call",
]
