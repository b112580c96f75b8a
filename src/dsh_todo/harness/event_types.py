"""Which session event types this harness knows: the one list every reader and writer checks a log against.

A module of its own, with no imports, so a reader of logs (``dsh-todo plan``) can refuse an unknown type without
loading the live session machinery (:mod:`dsh_todo.harness.session` re-exports both sets).
"""

from __future__ import annotations

SURFACE_EVENT_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
"""The events a person sees as the conversation (the web page's history pages through these)."""

KNOWN_SESSION_EVENT_TYPES = frozenset({
    "agent/inbox/spliced",
    "assistant/chunk",
    "assistant/message",
    "feedback/record",
    "request/context",
    "request/header",
    "session/end-seed",
    "step/end",
    "step/start",
    "todo/write",
    "tool/call",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
})
"""Event types this harness understands; a log with another type lacking ``ignorable`` is refused on load."""
