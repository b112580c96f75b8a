"""Lossless JSON snapshots that nobody can change afterwards.

DSH deep-copies and deep-freezes every appended payload (SPEC §5.3): the caller may keep mutating its own objects,
and a reader can never change the log under everybody else. :func:`snapshot` makes that copy in one walk, refusing
what JSON cannot carry losslessly (NaN, infinities, ``-0``, non-string keys, other types). The frozen containers are
``dict`` / ``list`` subclasses so that they compare equal to plain JSON values and serialize with the canonical
encoder unchanged.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError("session events are immutable")


class FrozenDict(dict[str, Any]):
    """A JSON object that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A JSON array that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))

    def __hash__(self) -> int:  # lists are unhashable; keep it that way
        raise TypeError("unhashable type: 'FrozenList'")


class NotLosslessJSON(ValueError):
    """The value cannot round-trip through JSON unchanged."""


def _describe(path: str) -> str:
    return path or "value"


def snapshot(value: Any, path: str = "") -> Any:
    """A frozen deep copy of a JSON value; raises :class:`NotLosslessJSON` naming the first bad place."""
    kind = type(value)
    if kind is str or kind is int or value is None or kind is bool:
        return value
    if kind is dict or kind is FrozenDict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotLosslessJSON(f"{_describe(path)} has a non-string key {key!r}")
            out[key] = snapshot(item, f"{path}.{key}" if path else key)
        return FrozenDict(out)
    if kind is list or kind is FrozenList or kind is tuple:
        return FrozenList([snapshot(item, f"{path}[{i}]") for i, item in enumerate(value)])
    if kind is float:
        if not math.isfinite(value) or (value == 0.0 and math.copysign(1.0, value) < 0):
            raise NotLosslessJSON(f"{_describe(path)} is {value!r}, which JSON cannot carry losslessly")
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, dict):
        return snapshot(dict(value), path)
    if isinstance(value, list):
        return snapshot(list(value), path)
    raise NotLosslessJSON(f"{_describe(path)} is a {type(value).__name__}, not a JSON value")


def freeze_trusted(value: Any) -> Any:
    """Freeze a value already known to be plain JSON (read from a log) without re-checking it."""
    kind = type(value)
    if kind is dict:
        return FrozenDict({k: freeze_trusted(v) for k, v in value.items()})
    if kind is list:
        return FrozenList([freeze_trusted(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy (for callers that want to edit what they read)."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
