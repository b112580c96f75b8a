"""The plan in a terminal: a checklist for people, one-line deltas for logs and pipes.

Headless runs are where plans usually vanish (USERS.md #3); :func:`plan_delta` gives them a single stable line per
change, and :func:`plan_lines` the checklist a person reads. Model-written text is printed as plain text, never as
rich markup.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from dsh_todo.harness.tool_results import answers
from dsh_todo.quoting import safe as safe  # the one rule for text in a message (re-exported for the commands)

GLYPHS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


STRIP_SEPARATOR = "\u2002·\u2002"
"""The web strip's separator (SPEC §9.1: en space, middle dot, en space); terminals use plain spaces."""


def progress_label(plan: Sequence[Mapping[str, Any]], separator: str = " · ") -> str:
    """Counts in the strip's order (completed, in progress, pending), zero counts left out."""
    done = sum(1 for item in plan if item.get("status") == "completed")
    active = sum(1 for item in plan if item.get("status") == "in_progress")
    pending = len(plan) - done - active
    parts = [f"{done} completed"] if done else []
    if active:
        parts.append(f"{active} in progress")
    if pending:
        parts.append(f"{pending} pending")
    return separator.join(parts)


def plan_lines(plan: Sequence[Mapping[str, Any]] | None) -> list[str]:
    if plan is None:
        return ["(no standing plan)"]
    if not plan:
        return ["(empty plan)"]
    lines = [f"To-dos: {progress_label(plan)}"]
    lines.extend(f"  {GLYPHS.get(str(item.get('status')), '[?]')} {safe(item.get('content'))}" for item in plan)
    return lines


def plan_delta(plan: Sequence[Mapping[str, Any]] | None) -> str:
    """One line per change, for non-interactive output."""
    if plan is None:
        return "plan: none"
    if not plan:
        return "plan: empty"
    active = [safe(item.get("content")) for item in plan if item.get("status") == "in_progress"]
    head = f"plan: {progress_label(plan)}"
    return f"{head} | now: {'; '.join(active)}" if active else head


class PlanPrinter:
    """Follows a context's sessions and prints the conversation, tool results and every plan change.

    On a terminal each change prints the checklist; elsewhere (pipes, CI logs) one :func:`plan_delta` line. It only
    listens: everything it prints comes from committed events and the ``todos`` projection.
    """

    def __init__(self, ctx: Any, out: Any = None, *, interactive: bool | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self.interactive = (bool(getattr(self.out, "isatty", lambda: False)()) if interactive is None
                            else interactive)
        ctx.sessions.listen(self._on_event)
        ctx.session_projections.on_change(self._on_plan)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _on_event(self, _session: Any, event: Mapping[str, Any]) -> None:
        kind, data = event["type"], event["data"]
        if kind == "turn/start":
            self.say(f"-- turn {data['turn']} --")
        elif kind == "turn/end":
            self.say(f"-- turn {data['turn']} ended: {data['reason']['kind']} --")
        elif kind == "user/message":
            self.say(f"user> {safe(_text(data.get('content')))}")
        elif kind == "assistant/message":
            text = _text(data["message"].get("content"))
            if text:
                self.say(f"model> {safe(text)}")
        elif kind == "tool/result":
            for answer in answers(data.get("message")):
                self.say(f"  {'!!' if answer.is_error else 'ok'} {safe(_text(answer.content))}")

    def _on_plan(self, _session: Any, key: str, value: Any, seq: int) -> None:
        if key != "todos":
            return
        if self.interactive:
            for line in plan_lines(value):
                self.say(f"  | {line}")
        else:
            self.say(f"  {plan_delta(value)} (seq {seq})")


def _text(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return ""
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")
