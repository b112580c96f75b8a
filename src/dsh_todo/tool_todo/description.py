"""What the model reads: the description and the parameter schema (SPEC §1.3, §3.1).

Only the in_progress clause changes with ``allowParallelInProgress``: it is the one instruction the policy changes,
and keeping the rest byte-identical keeps the provider's prefix cache warm across deployments. Every string here
is a constant; ``dsh-todo schema`` prints the result and its DeepSeek-V4 token counts.

Every token here is paid on every request of every turn in which the tool is visible, so the text says what a
model needs to use the tool correctly and nothing that nags (no reminder to keep the list up to date, no closing
verification step: both cost tokens and turns without helping, decision 0034). Each fact is said once, where it is
read: the whole-list replacement in the head (and the array's own description), the status meanings on the enum.
"""

from __future__ import annotations

from typing import Any, Final

from dsh_todo.tool_todo.rules import STATUSES

TOOL_NAME: Final = "todo_write"

HEAD: Final = (
    "Plan multi-step work up front, one todo per concrete step; skip it for trivial tasks. "
    "Each call replaces the whole list. "
)
PARALLEL: Final = "Mark active todos in_progress, several only when work runs in parallel. "
SINGLE: Final = "Keep exactly one todo in_progress while work remains. "
TAIL: Final = "Mark each todo completed once done."

TODOS_DESCRIPTION: Final = "The whole list."
CONTENT_DESCRIPTION: Final = "One concrete step."
STATUS_DESCRIPTION: Final = "not started | underway | done"


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
