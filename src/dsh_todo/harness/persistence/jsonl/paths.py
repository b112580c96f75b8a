"""Where a session's log lives: ``<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session[.vN].jsonl[.zstd]``.

The file name carries the log's format version as DSH 0.2 names its generations: ``session.jsonl`` for format v0
(DSH 0.1), ``session.v4.jsonl`` for format v4 (DSH 0.2), each with ``.zstd`` when compressed. A directory DSH
migrated holds both generations of one encoding; the newest is the session's log, the older one history.

A session id is an unvalidated string, so it is escaped into one safe path segment: only ``[A-Za-z0-9._-]`` survive
literally, ``.`` and ``..`` are escaped whole, and the escape works per UTF-16 code unit as DSH's JavaScript does,
so both harnesses agree on every directory name. The project key is the lossy, human-navigable cousin: separators
collapse to ``-`` and the result is cut to 251 characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from dsh_todo.harness.persistence.errors import CorruptSessionLogError, SessionIdError
from dsh_todo.jscompat import js_text

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


FORMAT_VERSIONS: Final = (4, 0)
"""The log format versions this harness reads, newest first; new logs are written in the first."""


def log_file_name(compression: Compression, version: int = FORMAT_VERSIONS[0]) -> str:
    """A log's file name: ``session.jsonl`` for format v0 (no version tag, as DSH names it), ``session.vN.jsonl``
    for a later one, with ``.zstd`` when compressed."""
    stem = "session" if version == 0 else f"session.v{version}"
    return f"{stem}.jsonl.zstd" if compression == "zstd" else f"{stem}.jsonl"


LOG_NAMES: Final[dict[str, Compression]] = {
    log_file_name(compression, version): compression for version in FORMAT_VERSIONS for compression in ("zstd", "none")}
"""A session directory's log file names (newest format first) and the encoding each one means."""

LOG_VERSIONS: Final[dict[str, int]] = {
    log_file_name(compression, version): version for version in FORMAT_VERSIONS for compression in ("zstd", "none")}
"""The format version each log file name stands for."""


def compression_of(path: Path) -> Compression:
    """A log's encoding, from its file name (``session[.v4].jsonl.zstd`` or ``session[.v4].jsonl``)."""
    try:
        return LOG_NAMES[path.name]
    except KeyError:
        raise ValueError(f"{path} is not a session log (expected session.v4.jsonl[.zstd] or "
                         "session.jsonl[.zstd])") from None


def version_of(path: Path) -> int:
    """A log's format version, from its file name."""
    return LOG_VERSIONS[path.name]


def check_version(path: Path, meta: Mapping[str, Any]) -> None:
    """Refuse a log whose file name and header name different format versions (DSH's rule: the name is the
    generation)."""
    named = LOG_VERSIONS.get(path.name)
    if named is not None and meta.get("version") != named:
        raise CorruptSessionLogError(f"corrupt session log: session generation filename identifies v{named}, but its "
                                     f"header identifies v{js_text(meta.get('version'))}")


def project_dir(root: Path, cwd: str | None) -> Path:
    return root / (NO_CWD_DIR if cwd is None else project_key(cwd))


def session_dir(root: Path, cwd: str | None, session_id: str) -> Path:
    return project_dir(root, cwd) / session_segment(session_id)


def log_path(root: Path, cwd: str | None, session_id: str, compression: Compression,
             version: int = FORMAT_VERSIONS[0]) -> Path:
    return session_dir(root, cwd, session_id) / log_file_name(compression, version)
