"""Why a session log could not be read, loaded or written (the classes live in :mod:`dsh_todo.harness.errors`).

The messages are interface facts: DSH users and its tests match them byte for byte, so every text raised here is
built exactly as DSH builds it (with ``<root>`` being the absolute persistence root wherever a path appears).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_todo.harness.errors import (
    CorruptSessionLogError as CorruptSessionLogError,
)
from dsh_todo.harness.errors import (
    RootEncodingError as RootEncodingError,
)
from dsh_todo.harness.errors import (
    SessionExistsError as SessionExistsError,
)
from dsh_todo.harness.errors import (
    SessionFormatUnsupportedError as SessionFormatUnsupportedError,
)
from dsh_todo.harness.errors import (
    SessionIdError as SessionIdError,
)
from dsh_todo.harness.errors import (
    SessionLockedError as SessionLockedError,
)
from dsh_todo.harness.errors import (
    SessionLogChangedError as SessionLogChangedError,
)
from dsh_todo.harness.errors import (
    SessionLogError as SessionLogError,
)
from dsh_todo.harness.errors import (
    SessionNotFoundError as SessionNotFoundError,
)
from dsh_todo.harness.errors import (
    SessionWriteError as SessionWriteError,
)
from dsh_todo.harness.event_types import KNOWN_SESSION_EVENT_TYPES
from dsh_todo.jscompat import js_text


def refuse_unknown_types(session_id: str, events: Sequence[Mapping[str, Any]], location: Path | str) -> None:
    """Refuse a log holding an event type this harness does not know and that is not marked ``ignorable`` (SPEC
    §5.1, DSH's coordinator text). Such a log was written by a newer harness; interpreting it anyway could misread
    state the new type carries."""
    known = KNOWN_SESSION_EVENT_TYPES
    for event in events:
        kind = event.get("type")
        if not (isinstance(kind, str) and kind in known) and event.get("ignorable") is not True:
            raise SessionFormatUnsupportedError(
                f'session "{session_id}" contains event type "{js_text(kind)}" (seq {js_text(event.get("seq"))}) '
                "unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely "
                f"written by a newer harness (raw log: {location})", location)


def not_stored(session_id: str, where: str) -> SessionNotFoundError:
    """``where`` the log was looked for: ``in <location>`` (a database, memory) or ``under <root>`` (files)."""
    return SessionNotFoundError(f'session "{session_id}" has no stored log {where}')


def log_exists(session_id: str, where: str) -> SessionExistsError:
    """``where`` the log is: ``in <location>``, or ``on disk``."""
    return SessionExistsError(f'session "{session_id}" already has a log {where}; load it to go on with it, or pick '
                              "another id")


def locked(session_id: str, holder: str, lock: object, holder_pid: int | None) -> SessionLockedError:
    """``holder`` says who holds the writer lock (``process <pid>``...), ``lock`` what the lock is."""
    return SessionLockedError(f'session "{session_id}" is already open for writing by {holder} (lock: {lock}); '
                              "a session log takes one writer at a time", holder_pid=holder_pid)


def writer_closed(session_id: str) -> RuntimeError:
    return RuntimeError(f'the writer of session "{session_id}" is closed')


def seq_mismatch(session_id: str, expected: int, got: object, index: int | None) -> ValueError:
    """``index``: where in the batch, when the writer takes one batch at a time (PostgreSQL's takes several)."""
    at = "" if index is None else f" at index {index}"
    return ValueError(f'append seq mismatch for "{session_id}": expected {expected}{at}, got {got!r}')


def log_changed(session_id: str, path: Path, what: str) -> SessionLogChangedError:
    """``what`` the writer found instead of its file: ``size N, expected M``, ``it is another file``, ``it is
    gone``."""
    return SessionLogChangedError(f"session {session_id}: its log {path} was changed by another process ({what}); "
                                  "nothing more is written to it")
