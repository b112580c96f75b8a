"""The session's own invariant companion (``@deepseek-ai/dsh-session/invariant``): core events stay turn-enclosed.

Separate from the invariant registry, as in DSH: mounting the registry alone enforces nothing. Only the rule the
todo tool depends on is implemented: a ``todo/write`` (and the other core execution events) must sit inside an
open turn, which catches a host that calls the tool directly with an agent that is not in a turn.
"""

from __future__ import annotations

import weakref

from dsh_todo.harness.context import Context
from dsh_todo.harness.event_types import Event
from dsh_todo.harness.invariants import INVARIANTS, InvariantViolation
from dsh_todo.harness.session import Session

name = "@deepseek-ai/dsh-session/invariant"
inject = ["invariants"]
PACKAGE = "@deepseek-ai/dsh-session"

TURN_ENCLOSED = frozenset({"todo/write", "tool/call", "tool/result", "step/start", "step/end", "assistant/message"})


class _TurnTracker:
    """Remembers, per session, whether a turn is open as of the last seq it looked at."""

    def __init__(self) -> None:
        self._open: weakref.WeakKeyDictionary[Session, tuple[int, bool]] = weakref.WeakKeyDictionary()

    def is_open(self, session: Session, before_seq: int) -> bool:
        seen, state = self._open.get(session, (0, False))
        if seen > before_seq:
            seen, state = 0, False
        for event in session.events[seen:before_seq]:
            if event["type"] == "turn/start":
                state = True
            elif event["type"] == "turn/end":
                state = False
        self._open[session] = (before_seq, state)
        return state

    def check(self, session: Session, event: Event) -> None:
        kind = event["type"]
        if kind in TURN_ENCLOSED and not self.is_open(session, event["seq"]):
            raise InvariantViolation(
                f"{kind} appended outside any open turn (core execution events must be turn-enclosed)")

    def check_history(self, session: Session) -> None:
        for event in session.events:
            self.check(session, event)


def apply(ctx: Context) -> None:
    tracker = _TurnTracker()
    ctx[INVARIANTS].register(PACKAGE, tracker.check, tracker.check_history)
