"""Why a session log could not be read, loaded or written.

The messages are interface facts: DSH users and its tests match them byte for byte, so every text raised here is
built exactly as DSH builds it (with ``<root>`` being the absolute persistence root wherever a path appears).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class SessionLogError(Exception):
    """Base class for everything this package raises about a stored session."""


class CorruptSessionLogError(SessionLogError):
    """The bytes on disk break the format in a way recovery may not paper over (DSH raises a plain ``Error``).

    A refused log is left untouched: nothing is truncated or appended.
    """


class SessionFormatUnsupportedError(SessionLogError):
    """The log is valid but was written by another harness generation (newer format, or an unknown event type).

    Kept apart from corruption so a user is told to upgrade, never that their log is damaged. ``location`` is the
    raw log the refusal is about; the message ends with ``(raw log: <path>)`` once that is known.
    """

    def __init__(self, message: str, location: Path | str | None = None) -> None:
        super().__init__(message)
        self.location = location


class SessionNotFoundError(SessionLogError, LookupError):
    """No stored log exists for the requested session id."""


class SessionIdError(SessionLogError, ValueError):
    """The session id cannot name a session where it would be stored (too long for a file name, say)."""


class SessionExistsError(SessionLogError):
    """A new session would collide with a log already on disk (load or resume it instead)."""


class SessionLockedError(SessionLogError):
    """Another writer (process or store) holds the session's single-writer lock."""

    def __init__(self, message: str, *, holder_pid: int | None) -> None:
        super().__init__(message)
        self.holder_pid = holder_pid


class SessionWriteError(SessionLogError):
    """A batch could not be made durable; it stays queued and the next flush retries it."""


def refuse_unknown_types(session_id: str, events: Sequence[Mapping[str, Any]], location: Path | str) -> None:
    """Refuse a log holding an event type this harness does not know and that is not marked ``ignorable`` (SPEC
    §5.1, DSH's coordinator text). Such a log was written by a newer harness; interpreting it anyway could misread
    state the new type carries."""
    from dsh_todo.harness.persistence.jstext import js_text
    from dsh_todo.harness.session import KNOWN_SESSION_EVENT_TYPES

    known = KNOWN_SESSION_EVENT_TYPES
    for event in events:
        kind = event.get("type")
        if kind not in known and event.get("ignorable") is not True:
            raise SessionFormatUnsupportedError(
                f'session "{session_id}" contains event type "{js_text(kind)}" (seq {js_text(event.get("seq"))}) '
                "unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely "
                f"written by a newer harness (raw log: {location})", location)
