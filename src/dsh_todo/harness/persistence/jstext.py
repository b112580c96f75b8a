"""How JavaScript prints a value inside a template string, for error texts that must match DSH's.

DSH builds messages such as ``expected 39, got 40`` or ``log format v1`` with template literals, which print a
JSON value with ``String(value)`` rather than as JSON: ``null``, ``true``, ``1`` for ``1.0``, and ``undefined`` for
a missing field.
"""

from __future__ import annotations

import math
from typing import Any, Final

MISSING: Final = object()
"""Stands for JavaScript's ``undefined`` (a key that is absent)."""


def js_text(value: Any) -> str:
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
        return ",".join("" if item is None else js_text(item) for item in value)
    return "[object Object]"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)
