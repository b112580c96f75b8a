"""Which session event types this harness knows: the one list every reader and writer checks a log against.

A module of its own, importing only the standard library, so a reader of logs (``dsh-todo plan``) can refuse an
unknown type without loading the live session machinery (:mod:`dsh_todo.harness.session` re-exports both sets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Event = Mapping[str, Any]
"""A session event as every reader sees it: ``{"type", "seq", "time", "data", ...}``, never changed in place (the
project's one name for it; code that builds an event before it is logged holds a plain ``dict``)."""

Record = dict[str, Any]
"""An event as its log line's JSON object: what a backend reads back and hands on, and what the v0 → v4 upgrade
copies and rewrites. A plain ``dict`` (decoded, not frozen); once logged in a session it is an :data:`Event`."""

LOG_FORMAT_VERSION = 4
"""The session-log format new logs are written in: DSH 0.2's v4 (v0, DSH 0.1's, is read and carried forward)."""

SURFACE_EVENT_TYPES = frozenset({"system/message", "developer/message", "user/message", "assistant/message",
                                 "tool/result"})
"""The surface-eligible events (DSH 0.2's set): the messages a model and a person see; they carry ``surfaceOp``."""

_V0_TYPES = frozenset({
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
"""The types DSH 0.1.1 knows (format v0)."""

_V4_TYPES = frozenset({
    "agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
    "assistant/attempt", "assistant/message", "command/done", "command/run", "compaction/end", "compaction/prune",
    "compaction/start", "compaction/summary", "deliverables/presented", "developer/message",
    "feedback/message-delete", "feedback/message-put", "feedback/record", "goal/change", "hook/invoked",
    "hook/result", "image/offload", "job/registered", "job/settled", "llm/retry", "llm/retry-started",
    "model/selection", "permission/preset", "plan/mode", "request/context", "request/header", "sandbox/mode",
    "schedule/change", "session-log-deepseek/delivery-accepted", "session/end-seed", "session/title",
    "session/title-llm-request", "step/end", "step/start", "subagent/catalog", "subagent/descriptor",
    "subagent/model-selection-policy", "system/message", "team/member", "team/message/delivered",
    "team/message/queued", "team/task", "todo/write", "tool-workflow/agent-end", "tool-workflow/agent-start",
    "tool-workflow/run-end", "tool-workflow/run-start", "tool/call", "tool/ptc-dispatch",
    "tool/ptc-dispatch-start", "tool/result", "turn/end", "turn/start", "user/message",
    "web/deepseek-search-llm-request", "working-directory/change", "workspace/changes",
})
"""The 62 types DSH 0.2.1 knows (format v4), as its generated catalogue lists them."""

KNOWN_SESSION_EVENT_TYPES = _V0_TYPES | _V4_TYPES
"""Event types this harness understands, in either format; a log with another type lacking ``ignorable`` is
refused on load (the interpretation of each is DSH's; this harness folds only the plan and the turn bounds)."""
