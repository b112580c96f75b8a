"""The one canonical JSON encoder of the project.

DSH writes its logs with JavaScript's ``JSON.stringify``: compact separators, non-ASCII written raw, and keys in
insertion order. Every byte we put on disk or on the wire goes through :func:`dumps` / :func:`dumps_bytes` so that
our output stays byte-identical to the reference's (and to stdlib ``json`` with compact separators). orjson does the
work on the hot path; the rare values it refuses (lone surrogates, integers beyond 64 bits) fall back to the standard
library, with lone surrogates escaped the way ``JSON.stringify`` escapes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

import orjson

MAX_DEPTH: Final = 1024
"""How deeply :func:`loads` nests: orjson's own limit. A valid ``todo_write`` call needs three levels; deeper text is
refused as not JSON rather than parsed by a recursive fallback that would exhaust Python's stack."""

MAX_VALUE_DEPTH: Final = 512
"""The deepest nesting accepted in a value taken whole from outside (an MCP message, a stored log line): deeper is
refused before anything recursive walks it (printing, folding, freezing), which Python's stack (1,000 frames) would
not carry much beyond this bound through the standard library."""

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _fallback(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _LONE_SURROGATE.sub(_escape_surrogate, text)


def dumps_bytes(value: Any) -> bytes:
    """Compact UTF-8 JSON, as ``JSON.stringify`` would write it."""
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return _fallback(value).encode("utf-8")


def dumps_lines(values: Iterable[Any]) -> bytes:
    """Each value as :func:`dumps_bytes` writes it, on its own ``\\n``-terminated line (empty for no values).

    One pass of orjson over the whole batch when it takes every value (a log batch, the hot path of durable
    appends); the values it refuses then go through :func:`dumps_bytes` one by one.
    """
    values = values if isinstance(values, list) else list(values)
    if not values:
        return b""
    try:
        return b"\n".join(map(orjson.dumps, values)) + b"\n"
    except (TypeError, orjson.JSONEncodeError):
        return b"\n".join(map(dumps_bytes, values)) + b"\n"


def dumps(value: Any) -> str:
    """Compact JSON text, as ``JSON.stringify`` would write it."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return _fallback(value)


def _no_constants(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


def loads(text: str | bytes) -> Any:
    """Parse strict JSON text; raises ``ValueError`` on bad input.

    orjson refuses escaped lone surrogates (``"\\ud800"``), which ``JSON.stringify`` can write; those rare texts go
    through the standard library, still refusing ``NaN`` and ``Infinity``.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):
            raise TooDeepError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        try:
            return json.loads(text, parse_constant=_no_constants)
        except RecursionError:  # a text orjson refused for another reason, nested deeper than the stack allows
            raise TooDeepError(f"JSON nested deeper than {MAX_DEPTH} levels") from None


class TooDeepError(ValueError):
    """JSON text nested deeper than :func:`loads` follows (:data:`MAX_DEPTH`)."""


def nests_deeper(value: Any, limit: int = MAX_VALUE_DEPTH) -> bool:
    """Whether ``value`` nests objects and arrays deeper than ``limit`` (iterative: no recursion on hostile input)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
