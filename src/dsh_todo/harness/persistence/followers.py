"""Handing a follower its runs of events: one follower that fails never stops the feed for the others.

Every backend's ``follow`` (a file read on from where it stopped, PostgreSQL's ``LISTEN``, memory) is a
:class:`Follower` taking its one step: read after the last seq handed over, refuse as a reader refuses, hand over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

from dsh_todo.harness.persistence.contract import Callback, Record
from dsh_todo.harness.persistence.errors import SessionLogError, refuse_unknown_types

log = logging.getLogger("dsh_todo.persistence")


class Follower:
    """One follower of one session; ``after_seq`` is the last seq it was handed. A backend's follower says how it
    looks (:meth:`look`, with :meth:`step`) and how it stops (:meth:`close`)."""

    def __init__(self, session_id: str, after_seq: int, callback: Callback) -> None:
        self.session_id, self.after_seq, self.callback = session_id, after_seq, callback
        self.closed = False
        self.said: str | None = None
        """The refusal last said: a log that stays refused is one warning, not one per look (a poll, a
        notification, an append)."""

    def look(self, *, raising: bool = False) -> None:
        """Deliver what is stored after ``after_seq`` (``raising`` on the first look)."""
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True

    def start(self) -> Self:
        """The first look, on the caller's thread: a refusal is raised to it, and the follower closed again."""
        try:
            self.look(raising=True)
        except BaseException:
            self.close()
            raise
        return self

    def step(self, read: Callable[[str, int], Sequence[Record]], location: Path | str, *, raising: bool) -> None:
        """Hand over what ``read(session_id, after_seq)`` finds, refused as a reader refuses it: the first look
        (``raising``) raises the refusal, a later one says it once and hands nothing over."""
        try:
            events = read(self.session_id, self.after_seq)
            refuse_unknown_types(self.session_id, events, location)
        except SessionLogError as exc:
            if raising:
                raise
            if str(exc) != self.said:
                self.said = str(exc)
                log.warning("cannot follow session %r: %s", self.session_id, exc)
        else:
            self.said = None
            if events:
                self.after_seq = events[-1]["seq"]
                try:
                    self.callback(events)
                except Exception:  # logged: the feed goes on for the other followers
                    log.warning("a follower of session %r failed on seq %d..%d", self.session_id, events[0]["seq"],
                                events[-1]["seq"], exc_info=True)
