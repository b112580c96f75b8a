"""Reading session logs from the outside, as ``plan``, ``events``, ``sessions``, ``watch`` and the web page do.

One reader (:mod:`.reader`) gives every front door the same events, plan and verdict for the same log. It reads
through the persistence backends (a root of files in any mix of encodings, each file in one exact pass; or a
database, :mod:`.database`), never writes, and applies crash recovery in memory only. :mod:`.health` builds the
verdict and :mod:`.plan` the standing plan.
"""

from dsh_todo.logview.database import open_database
from dsh_todo.logview.files import find_log
from dsh_todo.logview.health import Health, Refusal
from dsh_todo.logview.plan import PLAN_EVENT_TYPES
from dsh_todo.logview.reader import (
    Backend,
    PlanView,
    SessionView,
    list_sessions,
    read_events,
    read_plan,
    read_session,
    resolve,
)

__all__ = [
    "PLAN_EVENT_TYPES",
    "Backend",
    "Health",
    "PlanView",
    "Refusal",
    "SessionView",
    "find_log",
    "list_sessions",
    "open_database",
    "read_events",
    "read_plan",
    "read_session",
    "resolve",
]
