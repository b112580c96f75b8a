"""Lossless JSON copies that nobody can change afterwards.

DSH deep-copies and deep-freezes every appended payload (SPEC §5.3): the caller may keep mutating its own objects,
and a reader can never change the log under everybody else. :func:`lossless_copy` makes that copy in one walk,
refusing what JSON cannot carry losslessly (NaN, infinities, ``-0``, non-string keys, other types). The frozen
containers are ``dict`` / ``list`` subclasses so that they compare equal to plain JSON values and serialize with the
canonical encoder unchanged.

Frozen is not checked. Anyone can build a :class:`FrozenDict` of anything (a set, a NaN), so the append trusts only
:class:`CheckedDict` and :class:`CheckedList`, which this module's checked constructors alone make: the copy
(:func:`lossless_copy`) and :func:`frozen_object`/:func:`frozen_array`, which mark what they built checked only when
every value is a JSON value the log's writer can encode, nested at most :data:`MAX_DATA_DEPTH` levels (each checked
container knows its ``depth``). Whatever they cannot prove stays an unchecked frozen container, which the append
checks and copies like plain data (docs/decisions/0001-events-frozen-subclasses.md).

The containers stay on the cyclic garbage collector's books like any other: taking them off (decision 0008) no
longer held any goal once a session keeps a bounded window of its events (decision 0037), so it went (decision
0045).
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

from dsh_todo.harness.errors import NotLosslessJSON as NotLosslessJSON
from dsh_todo.jsonutil import MAX_VALUE_DEPTH, nests_deeper

MAX_DATA_DEPTH = MAX_VALUE_DEPTH - 1
"""How deeply a logged payload may nest: one level less than a log line may (:data:`MAX_VALUE_DEPTH`, the reader's
bound), since the line's envelope holds it. Deeper data is refused, so no append can make a log unreadable."""


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError("session events are immutable")


_INF = float("inf")


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


class CheckedDict(FrozenDict):
    """A frozen JSON object proven encodable: only this module's checked constructors make one, and the append
    shares it without a copy. ``depth`` is how deeply it nests (1: it holds no container)."""

    __slots__ = ("depth",)
    depth: int


class CheckedList(FrozenList):
    """A frozen JSON array proven encodable, as :class:`CheckedDict`."""

    __slots__ = ("depth",)
    depth: int


def _lossless_float(value: float) -> bool:
    """Whether JSON carries ``value`` losslessly: finite, and not ``-0.0``."""
    return value == value and value not in (_INF, -_INF) and not (value == 0.0 and math.copysign(1.0, value) < 0)


def is_json_scalar(value: Any) -> bool:
    """Whether ``value`` is a JSON scalar the log's writer encodes as it is: a ``str``, ``int``, ``bool`` or ``None``
    of that exact type (a subclass may encode as something else), or a lossless ``float``."""
    kind = type(value)
    return kind is str or kind is int or kind is bool or value is None or (kind is float and _lossless_float(value))


def _nesting(values: Any) -> int:
    """How deeply a container holding ``values`` nests, or 0 when one of them is not proven JSON (neither a lossless
    scalar nor a checked container: exact types only, as a subclass may encode as something else) or it would nest
    deeper than :data:`MAX_DATA_DEPTH`."""
    depth = 0
    for value in values:
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            continue
        if kind is CheckedDict or kind is CheckedList:
            if value.depth > depth:
                depth = value.depth
        elif kind is not float or not _lossless_float(value):
            return 0
    return depth + 1 if depth < MAX_DATA_DEPTH else 0


def frozen_object(**fields: Any) -> FrozenDict:
    """A frozen JSON object of ``fields`` as they are (no copy): the constructor for a writer that builds its own
    data (the turn writer's events, the todo tool's items), so the append can share it instead of copying a plain
    dict. It is checked, one level deep: a :class:`CheckedDict` when every field is a lossless JSON scalar or a
    checked container and it nests no deeper than a log line allows; otherwise an unchecked :class:`FrozenDict`,
    which the append checks and copies, refusing what JSON cannot carry in its own words."""
    depth = _nesting(fields.values())
    if not depth:
        return FrozenDict(fields)
    out = CheckedDict(fields)
    out.depth = depth
    return out


def frozen_array(items: list[Any] | tuple[Any, ...]) -> FrozenList:
    """A frozen JSON array of ``items``, checked as :func:`frozen_object` checks: a :class:`CheckedList` when
    proven, else an unchecked :class:`FrozenList` the append will check."""
    out = CheckedList(items)  # first: what is checked is what is kept
    depth = _nesting(out)
    if not depth:
        return FrozenList(out)
    out.depth = depth
    return out


def _seal(out: CheckedDict | CheckedList, values: Any) -> Any:
    """``out`` (just built by the copy from checked values) given its depth; raises :class:`_Deep`
    when it would nest deeper than a log line allows (a shared checked container took it over)."""
    depth = 0
    for value in values:
        kind = type(value)
        if (kind is CheckedDict or kind is CheckedList) and value.depth > depth:
            depth = value.depth
    if depth >= MAX_DATA_DEPTH:
        raise _Deep
    out.depth = depth + 1
    return out


def _describe(path: str) -> str:
    return path or "value"


class _Bad(Exception):
    pass


class _Deep(Exception):
    """The copy would nest deeper than :data:`MAX_DATA_DEPTH`."""


def _bad() -> NoReturn:
    raise _Bad


def _snap(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is CheckedDict or kind is CheckedList:  # proven by a checked constructor: share, never copy
        return value
    if kind is dict or kind is FrozenDict:  # (a frozen container nobody checked is copied like a plain one)
        out: Any = CheckedDict({(key if type(key) is str else _bad()): _snap(item) for key, item in value.items()})
        return _seal(out, out.values())
    if kind is list or kind is tuple or kind is FrozenList:
        out = CheckedList([_snap(item) for item in value])
        return _seal(out, out)
    if kind is float:
        return value if _lossless_float(value) else _bad()
    raise _Bad


def lossless_copy(value: Any, path: str = "") -> Any:
    """A frozen deep copy of a JSON value; raises :class:`NotLosslessJSON` naming the first bad place.

    Checked containers are shared, not copied: only a checked constructor makes one, so they are proven JSON and
    nobody can change them. Any other frozen container is copied like plain data.
    """
    try:
        return _snap(value)
    except _Bad:
        pass
    except (RecursionError, _Deep):  # a few hundred levels: too deep for the recursive walk's two frames a level
        return _deep_copy(value, path)
    return _explain(value, path)


def _deep_copy(value: Any, path: str) -> Any:
    """The copy of a value too deep for :func:`_snap`: refused beyond :data:`MAX_DATA_DEPTH`, else made without
    recursion (containers filled through ``dict``/``list``'s own methods, then sealed once complete)."""
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
        if kind is dict or kind is FrozenDict:
            out = CheckedDict()
            for key, child in item.items():
                if type(key) is not str:
                    raise NotLosslessJSON(f"{_describe(path)} has a non-string key {key!r} (deep inside)")
                dict.__setitem__(out, key, None)
                stack.append((child, out, key))
            built.append(out)
        elif kind is list or kind is tuple or kind is FrozenList:
            out = CheckedList()
            for index, child in enumerate(item):
                list.append(out, None)
                stack.append((child, out, index))
            built.append(out)
        elif (kind is float and not math.isfinite(item)) or (kind is float and item == 0.0 and (
                math.copysign(1.0, item) < 0)):
            raise NotLosslessJSON(f"{_describe(path)} holds {item!r} (deep inside), which JSON cannot carry losslessly")
        elif kind in (str, int, bool, float, CheckedDict, CheckedList) or item is None:
            out = item
        else:
            raise NotLosslessJSON(f"{_describe(path)} holds a {kind.__name__} (deep inside), not a JSON value")
        if isinstance(parent, dict):
            dict.__setitem__(parent, slot, out)
        else:
            list.__setitem__(parent, slot, out)
    for container in reversed(built):  # children were made after their parents: each is sealed before its parent
        _seal(container, container.values() if type(container) is CheckedDict else container)
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
        elif kind is not CheckedDict and kind is not CheckedList:  # (those were proven when they were made)
            return False
    return True


def _explain(value: Any, path: str) -> Any:
    """The slow walk, taken only for bad input: it finds and names the first place that is not lossless."""
    kind = type(value)
    if kind is str or kind is int or value is None or kind is bool:
        return value
    if kind is CheckedDict or kind is CheckedList:
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotLosslessJSON(f"{_describe(path)} has a non-string key {key!r}")
            out[key] = _explain(item, f"{path}.{key}" if path else key)
        return _sealed(CheckedDict(out), path)
    if isinstance(value, (list, tuple)):
        return _sealed(CheckedList([_explain(item, f"{path}[{i}]") for i, item in enumerate(value)]), path)
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


def _sealed(out: CheckedDict | CheckedList, path: str) -> Any:
    try:
        return _seal(out, out.values() if type(out) is CheckedDict else out)
    except _Deep:
        raise NotLosslessJSON(f"{_describe(path)} nests deeper than {MAX_DATA_DEPTH} levels, more than a session "
                              "log line can hold") from None


def freeze_trusted(value: Any) -> Any:
    """Freeze a value already known to be plain JSON (read from a log) without re-checking it.

    The containers are frozen, not checked (their depth is not counted): data taken from them into a new append
    is copied, not shared."""
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
