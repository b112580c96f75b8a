"""The plan in a terminal: a checklist for people, one-line deltas for logs and pipes.

Headless runs are where plans usually vanish (USERS.md #3); :func:`plan_delta` gives them a single stable line per
change, and :func:`plan_lines` the checklist a person reads. Model-written text is printed as plain text, never as
rich markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GLYPHS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def progress_label(plan: Sequence[Mapping[str, Any]]) -> str:
    """Counts in the strip's order (completed, in progress, pending), zero counts left out."""
    done = sum(1 for item in plan if item.get("status") == "completed")
    active = sum(1 for item in plan if item.get("status") == "in_progress")
    pending = len(plan) - done - active
    parts = [f"{done} completed"] if done else []
    if active:
        parts.append(f"{active} in progress")
    if pending:
        parts.append(f"{pending} pending")
    return " · ".join(parts)


def plan_lines(plan: Sequence[Mapping[str, Any]] | None) -> list[str]:
    if plan is None:
        return ["(no standing plan)"]
    if not plan:
        return ["(empty plan)"]
    lines = [f"To-dos: {progress_label(plan)}"]
    lines.extend(f"  {GLYPHS.get(str(item.get('status')), '[?]')} {item.get('content')}" for item in plan)
    return lines


def plan_delta(plan: Sequence[Mapping[str, Any]] | None) -> str:
    """One line per change, for non-interactive output."""
    if plan is None:
        return "plan: none"
    if not plan:
        return "plan: empty"
    active = [str(item.get("content")) for item in plan if item.get("status") == "in_progress"]
    head = f"plan: {progress_label(plan)}"
    return f"{head} | now: {'; '.join(active)}" if active else head
