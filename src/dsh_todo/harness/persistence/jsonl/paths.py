"""Where a session's log lives: ``<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl[.zstd]``.

A session id is an unvalidated string, so it is escaped into one safe path segment: only ``[A-Za-z0-9._-]`` survive
literally, ``.`` and ``..`` are escaped whole, and the escape works per UTF-16 code unit as DSH's JavaScript does,
so both harnesses agree on every directory name. The project key is the lossy, human-navigable cousin: separators
collapse to ``-`` and the result is cut to 251 characters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from dsh_todo.harness.persistence.errors import SessionIdError

Compression = Literal["zstd", "none"]

NAME_MAX: Final = 255
"""The longest file name (in bytes) the file systems we run on accept."""
NO_CWD_DIR: Final = "_no-cwd"
PROJECT_KEY_LIMIT: Final = 251
LOCK_NAME: Final = "session.lock"

_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS: Final = frozenset("/\\:")


def _escape(char: str) -> str:
    """``~XXXX`` per UTF-16 code unit (upper-case hex), as JavaScript's ``charCodeAt`` sees the character."""
    code = ord(char)
    if code <= 0xFFFF:
        return f"~{code:04X}"
    code -= 0x10000
    return f"~{0xD800 + (code >> 10):04X}~{0xDC00 + (code & 0x3FF):04X}"


def encode_segment(raw: str) -> str:
    """One safe, injective path segment for ``raw`` (a session id). Raises ``ValueError`` on an empty string."""
    if not raw:
        raise ValueError("cannot encode an empty path segment")
    if raw == ".":
        return "~002E"
    if raw == "..":
        return "~002E~002E"
    return "".join(char if char in _SAFE else _escape(char) for char in raw)


def decode_segment(name: str) -> str:
    """The id an encoded directory name stands for (the inverse of :func:`encode_segment`), or the name itself when
    :func:`encode_segment` would not have written it."""
    units: list[int] = []
    index = 0
    while index < len(name):
        if name[index] == "~":
            digits = name[index + 1:index + 5]
            if len(digits) != 4 or digits.strip("0123456789ABCDEF"):
                return name
            units.append(int(digits, 16))
            index += 5
        elif ord(name[index]) < 0x80:
            units.append(ord(name[index]))
            index += 1
        else:
            return name
    decoded = b"".join(unit.to_bytes(2, "little") for unit in units).decode("utf-16-le", "surrogatepass")
    return decoded if decoded and encode_segment(decoded) == name else name


def session_segment(session_id: str) -> str:
    """:func:`encode_segment` of a session id, refused (:class:`SessionIdError`) when it cannot be a directory
    name: empty, or longer than :data:`NAME_MAX` bytes once encoded (DSH could not write such a session either)."""
    if not session_id:
        raise SessionIdError("session id is empty")
    segment = encode_segment(session_id)
    size = len(segment.encode("utf-8"))
    if size > NAME_MAX:
        raise SessionIdError(f"session id is too long: its directory name would be {size} bytes, and a file name "
                             f"holds at most {NAME_MAX}")
    return segment


def project_key(cwd: str) -> str:
    """The ``--…--`` project directory name for ``cwd``. Raises ``ValueError`` on an empty path."""
    if not cwd:
        raise ValueError("cannot encode an empty project path")
    parts: list[str] = []
    in_separator_run = False
    for char in cwd:
        if char in _SEPARATORS:
            if not in_separator_run:
                parts.append("-")
            in_separator_run = True
            continue
        in_separator_run = False
        parts.append(char if char in _SAFE else _escape(char))
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:PROJECT_KEY_LIMIT]}--"


def log_file_name(compression: Compression) -> str:
    return "session.jsonl.zstd" if compression == "zstd" else "session.jsonl"


LOG_NAMES: Final[dict[str, Compression]] = {"session.jsonl.zstd": "zstd", "session.jsonl": "none"}
"""A session directory's log file names and the encoding each one means."""


def compression_of(path: Path) -> Compression:
    """A log's encoding, from its file name (``session.jsonl.zstd`` or ``session.jsonl``)."""
    try:
        return LOG_NAMES[path.name]
    except KeyError:
        raise ValueError(f"{path} is not a session log (expected session.jsonl or session.jsonl.zstd)") from None


def project_dir(root: Path, cwd: str | None) -> Path:
    return root / (NO_CWD_DIR if cwd is None else project_key(cwd))


def session_dir(root: Path, cwd: str | None, session_id: str) -> Path:
    return project_dir(root, cwd) / session_segment(session_id)


def log_path(root: Path, cwd: str | None, session_id: str, compression: Compression) -> Path:
    return session_dir(root, cwd, session_id) / log_file_name(compression)
