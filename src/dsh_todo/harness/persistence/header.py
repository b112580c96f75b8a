"""The first line of every log: the session header, ``{"type":"session","version":4,...}``.

The header is immutable metadata written once, at materialization. Its key order is part of the format and absent
optional fields are left out, never written as ``null``. Two versions are read: DSH 0.1's v0 writes ``type, version,
id, createdAt, cwd?, parentSession?, seedLength?, origin?, delegationDepth, agentPreset?``; DSH 0.2's v4 (what new
logs are written in) writes ``type, version, id, createdAt, cwd?, parentSession?, isSeeded, origin?,
delegationDepth, agentPreset?``.

The version is checked *before* the rest of the structure: a log from a newer harness may not satisfy today's
structural checks at all, and its user must read "upgrade the harness", never "corrupt".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dsh_todo.harness.event_types import LOG_FORMAT_VERSION
from dsh_todo.harness.persistence.errors import CorruptSessionLogError, SessionFormatUnsupportedError
from dsh_todo.jscompat import MISSING, js_text
from dsh_todo.jsonutil import loads

SESSION_FORMAT_VERSION: Final = LOG_FORMAT_VERSION
"""The format new logs are written in (DSH 0.2's); :data:`READ_VERSIONS` says which are read."""
READ_VERSIONS: Final = frozenset({0, 4})
MAX_SAFE_INTEGER: Final = 2**53 - 1

_BEFORE_DEPTH: Final = ("cwd", "parentSession", "seedLength", "isSeeded", "origin")
"""The optional keys before ``delegationDepth``, in the order both versions write them (v0 alone has
``seedLength``, v4 alone ``isSeeded``)."""
_RETIRED_KEYS: Final = ("sandboxMode", "approvalPolicy")

Meta = dict[str, Any]
"""Decoded header metadata: the header line, in its key order, without its ``type`` tag."""


def is_safe_count(value: object) -> bool:
    """A JSON integer JavaScript holds exactly and that is not negative (``Number.isSafeInteger(v) && v >= 0``)."""
    if type(value) is int:
        return 0 <= value <= MAX_SAFE_INTEGER
    if type(value) is float:
        return value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER
    return False


def is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def version_refusal(session_id: str, version: object) -> str:
    """DSH's direction-aware refusal text for a log in another format generation (without the path suffix)."""
    shown = js_text(version)
    if is_number(version) and version > SESSION_FORMAT_VERSION:  # type: ignore[operator]
        return (f'session "{session_id}" uses log format v{shown}, but this harness reads only '
                f"v{SESSION_FORMAT_VERSION}: the log was written by a newer harness — upgrade the harness to open it")
    return (f'session "{session_id}" uses log format v{shown}, older than the supported v{SESSION_FORMAT_VERSION}, '
            "and this build ships no upgrade path for it")


def header_line(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The header record to write for ``meta`` (a session's id plus its header fields, ``version`` choosing the
    format, v4 when absent), in DSH's key order for that version."""
    version = meta.get("version", SESSION_FORMAT_VERSION)
    line: dict[str, Any] = {
        "type": "session",
        "version": version,
        "id": meta["id"],
        "createdAt": meta["createdAt"],
    }
    if version == 0:
        line.update((key, meta[key]) for key in _BEFORE_DEPTH if key != "isSeeded" and meta.get(key) is not None)
    else:
        line.update((key, meta[key]) for key in ("cwd", "parentSession") if meta.get(key) is not None)
        line["isSeeded"] = bool(meta.get("isSeeded", False))
        if meta.get("origin") is not None:
            line["origin"] = meta["origin"]
    line["delegationDepth"] = meta.get("delegationDepth", 0) or 0
    if meta.get("agentPreset") is not None:
        line["agentPreset"] = meta["agentPreset"]
    return line


def log_identity(header: Mapping[str, Any]) -> dict[str, Any]:
    """``{createdAt, cwd?}`` of a log header (or of a session's header fields): what a projection checkpoint records
    to say whose it is (SPEC §6.2), in a file beside the log or a database row alike."""
    identity: dict[str, Any] = {"createdAt": header.get("createdAt")}
    if header.get("cwd") is not None:
        identity["cwd"] = header["cwd"]
    return identity


def check_meta(meta: Mapping[str, Any]) -> None:
    """Refuse metadata that would write a header DSH cannot read back (raises ``ValueError``)."""
    session_id = meta.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("session metadata id must be a non-empty string")
    version = meta.get("version", SESSION_FORMAT_VERSION)
    if type(version) is not int or version not in READ_VERSIONS:
        raise ValueError("session metadata version must be 0 or 4")
    if not is_safe_count(meta.get("createdAt")):
        raise ValueError("session metadata createdAt must be a non-negative safe integer")
    if not is_safe_count(meta.get("delegationDepth", 0) or 0):
        raise ValueError("session metadata delegationDepth must be a non-negative safe integer")
    cwd = meta.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise ValueError("session metadata cwd must be a non-empty string when present")
    origin = meta.get("origin")
    if origin is not None and origin != "subagent":
        raise ValueError('session metadata origin must be "subagent" when present')
    for key in _RETIRED_KEYS:
        if key in meta:
            raise ValueError("session header uses retired policy baseline fields")


def _is_header(value: Mapping[str, Any]) -> bool:
    return (value.get("type") == "session"
            and is_number(value.get("version"))
            and (value["version"] == 0 or type(value.get("isSeeded")) is bool)
            and isinstance(value.get("id"), str)
            and is_safe_count(value.get("createdAt"))
            and is_safe_count(value.get("delegationDepth"))
            and value.get("origin", "subagent") == "subagent"
            and isinstance(value.get("agentPreset", ""), str)
            and isinstance(value.get("cwd", "x"), str))


def decode_header(value: object) -> Meta:
    """Metadata from a parsed first line; refuses other format versions, then anything that is not a header."""
    if not isinstance(value, dict):
        raise CorruptSessionLogError("corrupt session log: first line is not a session header")
    version = value.get("version", MISSING)
    if value.get("type") == "session" and is_number(version) and version not in READ_VERSIONS:
        raise SessionFormatUnsupportedError(version_refusal(js_text(value.get("id", MISSING)), version))
    if not _is_header(value):
        raise CorruptSessionLogError("corrupt session log: first line is not a session header")
    if any(key in value for key in _RETIRED_KEYS):
        raise CorruptSessionLogError("session header uses retired policy baseline fields")
    meta: Meta = {"version": value["version"], "id": value["id"], "createdAt": value["createdAt"]}
    meta.update((key, value[key]) for key in _BEFORE_DEPTH if key in value)
    meta["delegationDepth"] = value["delegationDepth"]
    if "agentPreset" in value:
        meta["agentPreset"] = value["agentPreset"]
    return meta


def parse_header_record(record: bytes) -> Meta:
    """Metadata from the first record of a log, given with its terminating newline."""
    if not record or record[-1:] != b"\n" or record.find(b"\n") != len(record) - 1:
        raise CorruptSessionLogError("empty or header-less session log")
    try:
        value = loads(record[:-1])
    except ValueError:
        raise CorruptSessionLogError("corrupt session log: header line is not valid JSON") from None
    return decode_header(value)
