"""The bounds a log read keeps on hostile input: the longest line, the zstd window, the deepest nesting.

Memory is bounded by one piece plus the line being assembled (:mod:`.reading`); these keep that line, and what a
frame may ask the decoder to hold, finite whatever the file says. Beyond them a line is refused as corrupt, never
half-read: DSH has no such bounds, and no log it writes comes near them.
"""

from __future__ import annotations

import os
from typing import Final

from dsh_todo.harness.errors import CorruptSessionLogError
from dsh_todo.jsonutil import MAX_VALUE_DEPTH

MAX_LINE_ENV: Final = "DSH_TODO_MAX_LINE"
"""The environment variable that sets the longest line (in bytes) a reader accepts."""

DEFAULT_MAX_LINE: Final = 64 << 20
"""64 MiB: far beyond any event a harness writes (a tool result is the largest), small enough for any machine."""

MAX_WINDOW: Final = 32 << 20
"""The largest zstd window a frame may require (DSH writes level 3 frames: a 2 MiB window at most)."""

__all__ = ["DEFAULT_MAX_LINE", "MAX_LINE_ENV", "MAX_VALUE_DEPTH", "MAX_WINDOW", "max_line", "too_deep", "too_long"]


def max_line() -> int:
    """``$DSH_TODO_MAX_LINE`` if set (a positive number of bytes), else :data:`DEFAULT_MAX_LINE`."""
    text = os.environ.get(MAX_LINE_ENV)
    if not text:
        return DEFAULT_MAX_LINE
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{MAX_LINE_ENV} must be a positive number of bytes, not {text!r}")
    return value


def too_long(line: int | str, limit: int) -> CorruptSessionLogError:
    """``line``: a line number (after the header), or what else is too long (``"the header"``)."""
    what = f"line {line}" if isinstance(line, int) else line
    return CorruptSessionLogError(
        f"corrupt session log: {what} is longer than {limit} bytes (the reader's maximum line length; set "
        f"{MAX_LINE_ENV} to read longer lines)")


def too_deep(line: int) -> CorruptSessionLogError:
    return CorruptSessionLogError(
        f"corrupt session log: event at line {line} nests deeper than {MAX_VALUE_DEPTH} levels (this reader's bound)")
