"""How a front door prints text it did not choose (a root, a path, a session id, model-written text): one rule.

- In a **message**, :func:`safe`: controls are shown as escapes, never obeyed, so a newline in a root cannot cut a
  one-line message in two, and an escape sequence cannot restyle the terminal.
- In a **command** a person pastes, :func:`shell_word` (any text) or :func:`shell_path` (a directory): one POSIX
  shell word on one line, read back by ``sh`` as exactly the text, running nothing. ``shlex.quote`` gives it for
  printable text; text with a control character (a newline) becomes ``"$(printf '…')"`` with octal escapes, since a
  quoted newline would split the line and ``sh`` (dash) has no ``$'…'``.

A standard-library module of its own, beneath every layer: ``Storage.describe`` (read by ``dsh-todo plan``) uses it
as the servers do.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Final

_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                             "\ud800-\udfff]")
"""Characters a terminal would obey or cannot print: C0/C1 controls (escape sequences, newlines), line separators,
bidirectional overrides (which can make text read as something else), and lone surrogates (valid JSON escapes the
tool accepts, as the reference does, and undecodable bytes of a file name, but not encodable as UTF-8)."""

_PRINTF_SPECIAL: Final = frozenset("'\\%")
"""Characters written escaped in a ``printf`` format inside single quotes."""


def safe(text: object) -> str:
    """``text`` for a message: controls shown as escapes (``\\x0a``, ``\\u202e``), not obeyed; lone surrogates
    escaped, so printing never fails."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", str(text))


def shell_word(text: str) -> str:
    """``text`` as one POSIX shell word on one line (see the module's docstring). The one text no such word can hold
    is one ending in a newline, which ``$(…)`` drops: it gets ``shlex.quote``'s exact, two-line word (a directory
    gets a one-line word from :func:`shell_path`)."""
    if not _CONTROL.search(text) or text.endswith("\n"):
        return shlex.quote(text)
    parts: list[str] = []
    for char in text:
        if _CONTROL.match(char) or char in _PRINTF_SPECIAL:
            parts.extend(f"\\{byte:03o}" for byte in _bytes_of(char))
        else:
            parts.append(char)
    return "\"$(printf '" + "".join(parts) + "')\""


def shell_path(path: str | os.PathLike[str]) -> str:
    """A directory's path as one shell word on one line: :func:`shell_word`, with a final slash after a final newline
    (the same directory, and a word that keeps the newline)."""
    text = os.fspath(path)
    return shell_word(text + "/" if text.endswith("\n") else text)


def _bytes_of(char: str) -> bytes:
    """The bytes ``char`` stands for: a file name's undecodable byte for its surrogate escape."""
    try:
        return char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return char.encode("utf-8", "surrogatepass")
