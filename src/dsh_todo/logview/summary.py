"""What a listing row says about a session beyond its plan: its title, when it was last written, how its last turn
ended.

The reader's plan pass (:func:`~dsh_todo.logview.reader.list_sessions`) keeps only what the plan and the verdict need,
so these come from a second look through the same pass (the backend's exact scan, keeping no events): a
:class:`SummaryFold` sees every event in order and keeps three values, never the events. A session's listing row
asks for it only when the reader did not refuse the log; a log that fails here (it changed into something the
reader now refuses) simply has no summary, and the listing's own verdict stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from dsh_todo.harness.errors import DshTodoError

if TYPE_CHECKING:
    from dsh_todo.logview.reader import Backend

TITLE_CHARS: Final = 200
"""A title is cut to this many characters (the page ellipsizes it further to its width)."""


class Summary(NamedTuple):
    """``title``: the first user message's text, whitespace collapsed and trimmed (``None``: no user message yet);
    ``last_time``: the ``time`` of the last event (``None``: no event); ``turn_end``: the ``reason.kind`` of the last
    ``turn/end`` (``None``: none yet); ``turn_open``: a ``turn/start`` came after it (the turn is running, or its
    writer is gone and recovery would close it as interrupted); ``waiting``: the open turn waits on the person, as
    DSH 0.2 records it: an ``approval/asked`` with no ``approval/decided`` of its ``id`` yet, or an
    ``ask_user_question`` call with no result yet."""

    title: str | None
    last_time: int | None
    turn_end: str | None
    turn_open: bool
    waiting: bool = False


QUESTION_TOOL: Final = "ask_user_question"
"""DSH 0.2's tool that asks the person a question (the turn waits for the answer)."""


def message_text(data: Any) -> str:
    """The text blocks of a ``user/message``'s ``content``, joined (how the page shows a user message)."""
    content = data.get("content") if isinstance(data, Mapping) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(block["text"] for block in content
                   if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str))


def title_of(text: str) -> str | None:
    """``text`` on one line, trimmed and bounded; ``None`` when nothing is left."""
    title = " ".join(text.split())
    if not title:
        return None
    return title if len(title) <= TITLE_CHARS else title[:TITLE_CHARS - 1] + "…"


class SummaryFold:
    """Folds runs of events into a :class:`Summary` (an observer for the backend's scan)."""

    def __init__(self) -> None:
        self.title: str | None = None
        self.last_time: int | None = None
        self.turn_end: str | None = None
        self.turn_open = False
        self.asked: set[Any] = set()
        """Approvals asked and not yet decided, and questions not yet answered (their ids), in the open turn."""

    def see(self, events: Sequence[Mapping[str, Any]], _types: Sequence[Any] | None = None) -> None:
        for event in events:
            kind = event.get("type")
            if kind == "user/message":
                if self.title is None:
                    self.title = title_of(message_text(event.get("data")))
            elif kind == "turn/start":
                self.turn_open = True
                self.asked.clear()
            elif kind in ("approval/asked", "approval/decided", "tool/call", "tool/result"):
                self._ask(kind, event.get("data"))
            elif kind == "turn/end":
                self.turn_open = False
                self.asked.clear()
                data = event.get("data")
                reason = data.get("reason") if isinstance(data, Mapping) else None
                end = reason.get("kind") if isinstance(reason, Mapping) else None
                self.turn_end = end if isinstance(end, str) else "unknown"
        if events:
            time = events[-1].get("time")
            if type(time) is int:
                self.last_time = time

    def _ask(self, kind: str, data: Any) -> None:
        if not isinstance(data, Mapping):
            return
        if kind == "approval/asked":
            self.asked.add(("approval", data.get("id")))
        elif kind == "approval/decided":
            self.asked.discard(("approval", data.get("id")))
        elif kind == "tool/call":
            if data.get("name") == QUESTION_TOOL:
                self.asked.add(("call", data.get("callId")))
        else:
            message = data.get("message")
            if isinstance(message, Mapping):
                call_id = message.get("toolCallId")
                if call_id is None and isinstance(message.get("content"), list):  # format v0's tool-result block
                    call_id = next((block.get("toolCallId") for block in message["content"]
                                    if isinstance(block, Mapping) and block.get("type") == "tool-result"), None)
                self.asked.discard(("call", call_id))

    def summary(self) -> Summary:
        return Summary(self.title, self.last_time, self.turn_end, self.turn_open, self.turn_open and bool(self.asked))


def summarize(backend: Backend, session_id: str, path: Path | None) -> Summary | None:
    """The summary of one stored session a listing found (once) under ``backend``, read through it (``None`` when
    the log cannot be read now: it changed into something the reader refuses, or a database went away)."""
    fold = SummaryFold()
    try:
        # Only a session the listing found once is summarized (a refused row never is), so the scan need not look
        # for its id again.
        backend.scan(session_id, fold.see, where=path, listed=True)
    except (DshTodoError, OSError):
        return None
    return fold.summary()
