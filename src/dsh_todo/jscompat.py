"""JavaScript's text rules, where an interface fact depends on them: one module, standard library only.

The reference is TypeScript, and three of its behaviours leak into exact texts: ``String.prototype.trim`` (which
characters a todo's content loses, SPEC §13.1), ``JSON.stringify`` of a string inside error messages (§13.2), and
``String(value)`` inside template literals (DSH's log errors print ``expected 39, got 40`` or ``undefined``).
"""

from __future__ import annotations

import math
from typing import Any, Final

from dsh_todo.jsonutil import dumps

JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""What JavaScript's ``String.prototype.trim`` removes. ``str.strip()`` differs (SPEC §13.1): it also strips
U+001C–U+001F and U+0085, and keeps U+FEFF, so the reference's canonical text can only be reproduced with this set."""


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def js_string(text: str) -> str:
    """``JSON.stringify`` of one string, as it appears inside DSH's error messages."""
    return dumps(text)


MISSING: Final = object()
"""Stands for JavaScript's ``undefined`` (a key that is absent)."""


def js_text(value: Any) -> str:
    """``String(value)``: how a JavaScript template literal prints a JSON value."""
    if value is MISSING:
        return "undefined"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _array_text(value)
    return "[object Object]"


def _array_text(value: list[Any]) -> str:
    """``String(array)``: its items' texts joined by commas, ``null`` as nothing, nested arrays alike; walked with a
    stack, not recursion, as a log line may nest as deep as the reader allows (512) and a type or seq printed in a
    refusal must not end in ``RecursionError``."""
    out: list[str] = []
    stack: list[tuple[list[Any], int]] = [(value, 0)]
    while stack:
        items, index = stack.pop()
        if index == len(items):
            continue
        if index:
            out.append(",")
        stack.append((items, index + 1))
        item = items[index]
        if isinstance(item, list):
            stack.append((item, 0))
        elif item is not None:
            out.append(js_text(item))
    return "".join(out)


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)
