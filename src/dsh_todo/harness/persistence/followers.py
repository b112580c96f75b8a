"""Handing a follower its runs of events: one follower that fails never stops the feed for the others.

Shared by every backend's ``follow`` (a file read on from where it stopped, PostgreSQL's ``LISTEN``, memory).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dsh_todo.harness.persistence.contract import Callback, Event

log = logging.getLogger("dsh_todo.persistence")


def hand_over(callback: Callback, session_id: str, events: Sequence[Event]) -> None:
    """Give a follower its run of events. A follower that raises is logged; the feed goes on for the others."""
    try:
        callback(events)
    except Exception:
        log.warning("a follower of session %r failed on seq %d..%d", session_id, events[0]["seq"],
                    events[-1]["seq"], exc_info=True)


class Refusals:
    """What a follower was last refused with, said once: a log that stays refused is one warning, not one per look
    (a poll, a notification, an append)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.said: str | None = None

    def say(self, exc: Exception) -> None:
        if str(exc) != self.said:
            self.said = str(exc)
            log.warning("cannot follow session %r: %s", self.session_id, exc)

    def clear(self) -> None:
        self.said = None
