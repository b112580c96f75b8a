"""What the model reads: the description and the parameter schema (SPEC §1.3, §3.1).

Only the in_progress clause changes with ``allowParallelInProgress``: it is the one instruction the policy changes,
and keeping the rest byte-identical keeps the provider's prefix cache warm across deployments. Every string here
is a constant; ``dsh-todo schema`` prints the result and its DeepSeek-V4 token count.
"""

from __future__ import annotations

from typing import Any, Final

from dsh_todo.tool_todo.rules import STATUSES

TOOL_NAME: Final = "todo_write"

HEAD: Final = (
    "Send your whole task list; it REPLACES the previous one (no partial updates or per-item edits). "
    "Use it to plan multi-step work and show progress: one todo per concrete step, written before you start. "
)
PARALLEL: Final = (
    "Mark every task in active work in_progress: several at once when work truly runs in parallel "
    "(concurrent subagents, background commands), one for sequential work; while work remains, at least one is. "
)
SINGLE: Final = "Keep AT MOST ONE todo in_progress; while work remains, exactly one is. "
TAIL: Final = (
    "Mark a todo completed as soon as it is done (no batching); none stays in_progress only once all work is "
    "complete. Skip the list for trivial single-step tasks. pending = not started, in_progress = underway, "
    "completed = done."
)

TODOS_DESCRIPTION: Final = "The complete list; replaces any previous one."
CONTENT_DESCRIPTION: Final = "The task: one short imperative line."
STATUS_DESCRIPTION: Final = "Its state."


def describe(allow_parallel: bool) -> str:
    return HEAD + (PARALLEL if allow_parallel else SINGLE) + TAIL


PARAMETERS: Final[dict[str, Any]] = {
    "todos": {
        "type": "array",
        "required": True,
        "description": TODOS_DESCRIPTION,
        "items": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "content": {"type": "string", "required": True, "description": CONTENT_DESCRIPTION},
                "status": {"type": "string", "required": True, "description": STATUS_DESCRIPTION,
                           "enum": list(STATUSES)},
            },
        },
    },
}

OUTPUT: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "todos": {
            "type": "array",
            "required": True,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "content": {"type": "string", "required": True},
                    "status": {"type": "string", "required": True, "enum": list(STATUSES)},
                },
            },
        },
        "counts": {
            "type": "object",
            "required": True,
            "additionalProperties": False,
            "properties": {
                "pending": {"type": "integer", "required": True},
                "inProgress": {"type": "integer", "required": True},
                "completed": {"type": "integer", "required": True},
            },
        },
    },
}
