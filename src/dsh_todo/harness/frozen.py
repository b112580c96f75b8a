"""Lossless JSON copies that nobody can change afterwards.

DSH deep-copies and deep-freezes every appended payload (SPEC §5.3): the caller may keep mutating its own objects,
and a reader can never change the log under everybody else. :func:`lossless_copy` makes that copy in one walk,
refusing what JSON cannot carry losslessly (NaN, infinities, ``-0``, non-string keys, other types). The frozen
containers are ``dict`` / ``list`` subclasses so that they compare equal to plain JSON values and serialize with the
canonical encoder unchanged.

Every container this module builds is taken off the cyclic garbage collector's books (:func:`untracked`): a logged
event lives as long as its session, and a tracked one is walked again by every full collection, which made a call
cost half as much again once a long-running agent held 20,000 events (docs/decisions/0008-untracked-log.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from dsh_todo.harness.errors import NotLosslessJSON as NotLosslessJSON
from dsh_todo.jsonutil import MAX_VALUE_DEPTH, nests_deeper

MAX_DATA_DEPTH = MAX_VALUE_DEPTH - 1
"""How deeply a logged payload may nest: one level less than a log line may (:data:`MAX_VALUE_DEPTH`, the reader's
bound), since the line's envelope holds it. Deeper data is refused, so no append can make a log unreadable."""


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError("session events are immutable")


_Container = TypeVar("_Container", bound="FrozenDict | FrozenList")


def _load_untrack() -> Callable[[Any], None]:
    """CPython's ``PyObject_GC_UnTrack`` through ctypes (imported on first use, not at start-up); elsewhere a no-op."""
    try:
        import ctypes

        untrack: Callable[[Any], None] = ctypes.PYFUNCTYPE(None, ctypes.py_object)(
            ("PyObject_GC_UnTrack", ctypes.pythonapi))
    except (ImportError, AttributeError, OSError):  # no ctypes, or not CPython: the collector keeps tracking
        def untrack(_: Any) -> None:
            return None
    return untrack


def _first_untrack(container: Any) -> None:
    global _untrack
    _untrack = _load_untrack()
    _untrack(container)


_untrack: Callable[[Any], None] = _first_untrack


def untracked(container: _Container) -> _Container:
    """``container`` (finished: nothing is added to it afterwards), no longer tracked by the cyclic collector.

    Safe because a frozen container cannot be part of a cycle: it is built bottom-up from JSON values and frozen
    children and can never be changed to point back at itself, so reference counting alone frees it. An untracked
    container costs a full collection nothing, however many the logs hold. Adding to a dict afterwards (only
    ``dict.__setitem__`` can) may track it again, so untrack last.
    """
    _untrack(container)
    return container


class FrozenDict(dict[str, Any]):
    """A JSON object that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A JSON array that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))

    __hash__ = None  # still unhashable, like every list


def frozen_object(**fields: Any) -> FrozenDict:
    """A frozen JSON object of ``fields`` as they are: for a writer that builds its own data from strings, integers,
    booleans, ``None`` and frozen containers (the turn writer's events), so the append shares it instead of copying
    a plain dict. Nothing is checked: anything else (a plain list, a float) must go through :func:`lossless_copy`."""
    out = FrozenDict(fields)
    _untrack(out)
    return out


def _describe(path: str) -> str:
    return path or "value"


class _Bad(Exception):
    pass


def _bad() -> NoReturn:
    raise _Bad


def _snap(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is FrozenDict or kind is FrozenList:  # made by this module from checked JSON: share, never copy
        return value
    if kind is dict:
        out: Any = FrozenDict({(key if type(key) is str else _bad()): _snap(item) for key, item in value.items()})
    elif kind is list or kind is tuple:
        out = FrozenList([_snap(item) for item in value])
    elif kind is float:
        if value != value or value in (_INF, -_INF) or (value == 0.0 and math.copysign(1.0, value) < 0):
            _bad()
        return value
    else:
        raise _Bad
    _untrack(out)
    return out


_INF = float("inf")


def lossless_copy(value: Any, path: str = "") -> Any:
    """A frozen deep copy of a JSON value; raises :class:`NotLosslessJSON` naming the first bad place.

    Frozen containers are shared, not copied: they can only have come from here (or from a parsed log), so they are
    already checked and nobody can change them.
    """
    try:
        return _snap(value)
    except _Bad:
        pass
    except RecursionError:  # a few hundred levels: too deep for the recursive walk's two frames a level
        return _deep_copy(value, path)
    return _explain(value, path)


def _deep_copy(value: Any, path: str) -> Any:
    """The copy of a value too deep for :func:`_snap`: refused beyond :data:`MAX_DATA_DEPTH`, else made without
    recursion (containers filled through ``dict``/``list``'s own methods, then untracked once complete)."""
    if nests_deeper(value, MAX_DATA_DEPTH):
        raise NotLosslessJSON(f"{_describe(path)} nests deeper than {MAX_DATA_DEPTH} levels, more than a session "
                              "log line can hold")
    holder = FrozenList()
    list.append(holder, None)
    built: list[Any] = []
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        item, parent, slot = stack.pop()
        kind = type(item)
        out: Any
        if kind is dict:
            out = FrozenDict()
            for key, child in item.items():
                if type(key) is not str:
                    raise NotLosslessJSON(f"{_describe(path)} has a non-string key {key!r} (deep inside)")
                dict.__setitem__(out, key, None)
                stack.append((child, out, key))
            built.append(out)
        elif kind is list or kind is tuple:
            out = FrozenList()
            for index, child in enumerate(item):
                list.append(out, None)
                stack.append((child, out, index))
            built.append(out)
        elif (kind is float and not math.isfinite(item)) or (kind is float and item == 0.0 and (
                math.copysign(1.0, item) < 0)):
            raise NotLosslessJSON(f"{_describe(path)} holds {item!r} (deep inside), which JSON cannot carry losslessly")
        elif kind in (str, int, bool, float, FrozenDict, FrozenList) or item is None:
            out = item
        else:
            raise NotLosslessJSON(f"{_describe(path)} holds a {kind.__name__} (deep inside), not a JSON value")
        if type(parent) is FrozenDict:
            dict.__setitem__(parent, slot, out)
        else:
            list.__setitem__(parent, slot, out)
    for container in built:
        _untrack(container)
    return holder[0]


def is_lossless(value: Any) -> bool:
    """Whether ``value`` is JSON that round-trips unchanged (no copy is made).

    Iterative, not recursive: a client's arguments may nest hundreds of levels, and a recursive walk (two frames a
    level) hit Python's recursion limit near 330, so the registry raised instead of answering.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict or kind is FrozenDict:
            for key, child in item.items():
                if type(key) is not str:
                    return False
                stack.append(child)
        elif kind is list or kind is FrozenList:
            stack.extend(item)
        elif kind is float:
            if not math.isfinite(item) or (item == 0.0 and math.copysign(1.0, item) < 0):
                return False
        else:
            return False
    return True


def _explain(value: Any, path: str) -> Any:
    """The slow walk, taken only for bad input: it finds and names the first place that is not lossless."""
    kind = type(value)
    if kind is str or kind is int or value is None or kind is bool:
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotLosslessJSON(f"{_describe(path)} has a non-string key {key!r}")
            out[key] = _explain(item, f"{path}.{key}" if path else key)
        return untracked(FrozenDict(out))
    if isinstance(value, (list, tuple)):
        return untracked(FrozenList([_explain(item, f"{path}[{i}]") for i, item in enumerate(value)]))
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
    raise NotLosslessJSON(f"{_describe(path)} is a {type(value).__name__}, not a JSON value")


def freeze_trusted(value: Any) -> Any:
    """Freeze a value already known to be plain JSON (read from a log) without re-checking it."""
    kind = type(value)
    if kind is dict:
        return untracked(FrozenDict({k: freeze_trusted(v) for k, v in value.items()}))
    if kind is list:
        return untracked(FrozenList([freeze_trusted(v) for v in value]))
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy (for callers that want to edit what they read)."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
