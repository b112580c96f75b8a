"""What every step of the v0-to-v4 upgrade shares: the vocabulary of the released formats, the error, and small
helpers that copy JSON objects the way JavaScript's object spread does (so key order comes out as DSH's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeGuard

from dsh_todo.harness.event_types import Record as Record
from dsh_todo.harness.persistence.seq_ranges import compact

SYSTEM_PROMPT_PLUGIN: Final = "@deepseek-ai/dsh-system-prompt"
"""The plugin v3 names as a system message's source; v4 calls that producer ``system-prompt``."""

V0_EVENT_TYPES: Final = frozenset({
    "agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
    "assistant/chunk", "assistant/message", "command/done", "command/run", "compaction/end", "compaction/prune",
    "compaction/start", "compaction/summary", "feedback/record", "goal/change", "hook/invoked", "hook/result",
    "llm/retry", "llm/retry-started", "model/selection", "permission/preset", "plan/mode", "request/context",
    "request/header", "sandbox/mode", "schedule/change", "session-log-deepseek/delivery-accepted",
    "session/end-seed", "session/title", "session/title-llm-request", "step/end", "step/start",
    "subagent/descriptor", "subagent/model-selection-policy", "team/member", "team/message/delivered",
    "team/message/queued", "team/task", "todo/write", "tool-workflow/agent-end", "tool-workflow/agent-start",
    "tool-workflow/run-end", "tool-workflow/run-start", "tool/call", "tool/code-dispatch",
    "tool/code-dispatch-start", "tool/result", "turn/end", "turn/start", "user/message",
    "web/deepseek-search-llm-request",
})
"""The event types released format v0 knows (after ``compact/*`` is renamed): DSH refuses any other, even one
marked ignorable."""

V3_EVENT_TYPES: Final = V0_EVENT_TYPES - {"assistant/chunk", "tool/code-dispatch", "tool/code-dispatch-start"} | {
    "assistant/attempt", "deliverables/presented", "feedback/message-delete", "feedback/message-put",
    "image/offload", "subagent/catalog", "system/message", "tool/ptc-dispatch", "tool/ptc-dispatch-start",
    "workspace/changes",
}
"""The first-party event types the released v3 reader understands; an ignorable event of another type becomes
``plugin:<type>`` in v4."""

SURFACE_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
"""Events that put a message on the conversation surface: each carries a ``surfaceOp``."""

CONTENT_TYPES: Final = frozenset({"text", "reasoning", "image", "file", "tool-call", "tool-result"})
"""Content block tags v3 defines; v4 namespaces any other as ``plugin:<tag>``."""

RENAMED_PRODUCERS: Final = {
    "compact": "compact-checkpoint",
    "tools-code-mode": "ptc-mode",
    "tools-ptc": "ptc-mode",
    "dsh-compaction-basic": "compact-basic",
    SYSTEM_PROMPT_PLUGIN: "runtime-context",
}
SAME_NAME_PRODUCERS: Final = frozenset({
    "agent-instructions", "session-reference", "team-message", "goal", "skill-invocation", "skill-catalog",
    "coordinator", "subagent-report", "subagent-settled", "webhook", "agent-message", "model-selection",
    "plan-mode", "time-context", "tmux-context", "user-approval", "repeat-tool-reminder", "tool-cordis",
    "cordis-host-runner", "tool-goal", "tool-jobs", "hooks-codex", "hooks-claude-code", "schedule",
    "dsh-session-title-llm",
})

class UpgradeError(ValueError):
    """A log DSH 0.2.1 would refuse to migrate; the message says why in one line."""

def data_of(event: Mapping[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    if not isinstance(data, dict):
        raise UpgradeError(f"{event.get('type')} {event.get('seq')} data must be an object")
    return data


def is_record(value: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)


def assign(mapping: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """``{...mapping, key: value}``: an existing key keeps its place, a new one goes last (JavaScript's spread)."""
    result = dict(mapping)
    result.update(changes)
    return result


def omit(mapping: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if key not in keys}


def decoded(event: Mapping[str, Any]) -> Record:
    """A shallow copy, its ``sourceEventSeqs`` ranges (``[start, end]`` members) spelled out as DSH's decoder does."""
    result = dict(event)
    sources = result.get("sourceEventSeqs")
    if isinstance(sources, list) and any(isinstance(member, list) for member in sources):
        seqs: list[Any] = []
        for member in sources:
            if isinstance(member, list):
                if len(member) != 2 or not all(isinstance(value, int) for value in member) or member[1] < member[0]:
                    raise UpgradeError("sourceEventSeqs range must be a [start, end] pair")
                seqs.extend(range(member[0], member[1] + 1))
            else:
                seqs.append(member)
        result["sourceEventSeqs"] = seqs
    return result


def encoded(event: Record) -> Record:
    """The event as DSH's v4 encoder writes it: three or more consecutive ``sourceEventSeqs`` as one range (the
    stored form :func:`~dsh_todo.harness.persistence.seq_ranges.compact` gives; a list not strictly increasing stays
    as it is)."""
    sources = event.get("sourceEventSeqs")
    if not isinstance(sources, list):
        return event
    return assign(event, sourceEventSeqs=compact(sources))
