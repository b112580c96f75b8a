"""Reading session logs from the outside, as ``plan``, ``events``, ``sessions``, ``watch`` and the web page do.

One reader (:mod:`.reader`) gives every front door the same events, plan and verdict for the same log; it reads a
root of files in any mix of encodings (:mod:`.files`, one pass per file in :mod:`.scan`) or a database
(:mod:`.database`), never writes, and applies crash recovery in memory only. :mod:`.health` builds the verdict and
:mod:`.plan` the standing plan.
"""

from dsh_todo.logview.database import StoreBackend, open_database
from dsh_todo.logview.files import LOG_NAMES, FileBackend, find_log, writer_alive
from dsh_todo.logview.health import Health, Refusal
from dsh_todo.logview.plan import PLAN_EVENT_TYPES
from dsh_todo.logview.reader import Backend, PlanView, SessionView, list_sessions, read_plan, read_session, resolve

__all__ = [
    "LOG_NAMES",
    "PLAN_EVENT_TYPES",
    "Backend",
    "FileBackend",
    "Health",
    "PlanView",
    "Refusal",
    "SessionView",
    "StoreBackend",
    "find_log",
    "list_sessions",
    "open_database",
    "read_plan",
    "read_session",
    "resolve",
    "writer_alive",
]
