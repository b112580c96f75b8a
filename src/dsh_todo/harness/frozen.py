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
_INF = float("inf")


def _leave_tracked(_: Any) -> None:
    return None


def _free_threaded() -> bool:
    """Whether this is a free-threaded build (PEP 703, ``python3.13t``), whatever the GIL's state at the moment."""
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _load_untrack() -> Callable[[Any], None]:
    """CPython's ``PyObject_GC_UnTrack`` through ctypes (imported on first use, not at start-up); elsewhere a no-op.

    Given the object (a ``py_object`` argument), not its address: ``id(obj)`` as a ``c_void_p`` converted faster in
    a bare process (0.15 against 0.40 µs a call on 3.11), but ``id()`` raises the ``builtins.id`` audit event, and in
    OpenHands' process (an audit hook, by the look of it) it cost ~0.2 µs more than the conversion it saved
    (decision 0031).

    A no-op on a free-threaded build too: its collector finds objects by walking the allocator's heaps rather than
    a list of tracked ones, so there is less to save, and the tracked flag is a bit in each object's header that
    CPython does not promise may be cleared from outside while other threads can reach the object; under the GIL
    untracking is a plain unlinking (docs/decisions/0008-untracked-log.md, *Amended: free-threaded builds*)."""
    if _free_threaded():
        return _leave_tracked
    try:
        import ctypes

        untrack: Callable[[Any], None] = ctypes.PYFUNCTYPE(None, ctypes.py_object)(
            ("PyObject_GC_UnTrack", ctypes.pythonapi))
    except (ImportError, AttributeError, OSError):  # no ctypes, or not CPython: the collector keeps tracking
        return _leave_tracked
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
        return untracked(FrozenDict(fields))
    out = CheckedDict(fields)
    out.depth = depth
    _untrack(out)
    return out


def frozen_array(items: list[Any] | tuple[Any, ...]) -> FrozenList:
    """A frozen JSON array of ``items``, checked as :func:`frozen_object` checks: a :class:`CheckedList` when
    proven, else an unchecked :class:`FrozenList` the append will check."""
    out = CheckedList(items)  # first: what is checked is what is kept
    depth = _nesting(out)
    if not depth:
        return untracked(FrozenList(out))
    out.depth = depth
    _untrack(out)
    return out


class LeafTable(dict[Any, FrozenDict]):
    """Leaf objects (checked, holding no container) by key, each built once and shared by every array of them.

    Only a checked leaf can be put in (``table[key] = frozen_object(...)`` of JSON scalars, or :meth:`array`'s own
    build; other ways in are refused), so an array of its values is proven without looking at them (:meth:`array`).
    The todo tool keeps its items here: a model resends its list on every call, and most items come back unchanged.

    Bounded: it holds at most ``kept`` leaves (then it starts afresh), and a leaf with a string longer than
    ``longest`` is built each time, never remembered, so the table stays a few MB whatever a model sends.
    """

    __slots__ = ("kept", "longest")

    def __init__(self, kept: int = 4096, longest: int = 1024) -> None:
        super().__init__()
        self.kept = kept
        self.longest = longest

    def __setitem__(self, key: Any, leaf: FrozenDict) -> None:
        if type(leaf) is not CheckedDict or leaf.depth != 1:
            raise TypeError("a leaf table holds checked leaf objects only (frozen_object of JSON scalars)")
        dict.__setitem__(self, key, leaf)

    setdefault = update = __ior__ = _refuse

    def array(self, items: list[Any] | tuple[Any, ...], key: Callable[[Any], Any],
              make: Callable[[Any], dict[str, Any]]) -> FrozenList:
        """The frozen array of the leaves at ``key(item)`` for each of ``items``: proven at once when the table holds
        every key (its values, looked up in C), else built with the fields ``make(key)`` gives (a plain ``dict``) for
        each key it lacks, and remembered within the table's bounds."""
        known = self.get
        out = CheckedList(map(known, map(key, items)))
        if not all(out):  # a key it lacks (or an empty leaf, which the general check takes as well)
            return self._fill(items, key, make)
        out.depth = 2 if out else 1
        _untrack(out)
        return out

    def _fill(self, items: list[Any] | tuple[Any, ...], key: Callable[[Any], Any],
              make: Callable[[Any], dict[str, Any]]) -> FrozenList:
        """:meth:`array` for a list with new leaves: each checked, built and remembered in this one frame
        (:func:`frozen_object`'s check inlined; a list the model rewrote pays it for every item, decision 0031)."""
        known, longest = self.get, self.longest
        leaves: list[Any] = []
        proven = True
        for sent in map(key, items):
            leaf = known(sent)
            if leaf is None:
                fields = make(sent)
                remember = True
                for value in fields.values():
                    kind = type(value)
                    if kind is str:
                        if len(value) > longest:
                            remember = False
                    elif kind is not int and kind is not bool and value is not None and (
                            kind is not float or not _lossless_float(value)):
                        leaf = untracked(FrozenDict(fields))
                        proven = False
                        break
                else:
                    leaf = CheckedDict(fields)
                    leaf.depth = 1
                    _untrack(leaf)
                    if remember:
                        if len(self) >= self.kept:
                            self.clear()
                        dict.__setitem__(self, sent, leaf)
            leaves.append(leaf)
        if not proven:  # a field that is no JSON scalar: checked as any array, so the append checks the list
            return frozen_array(leaves)
        out = CheckedList(leaves)  # every leaf checked: the table's, or built just above
        out.depth = 2 if out else 1
        _untrack(out)
        return out


def _seal(out: CheckedDict | CheckedList, values: Any) -> Any:
    """``out`` (just built by the copy from checked values) given its depth and untracked; raises :class:`_Deep`
    when it would nest deeper than a log line allows (a shared checked container took it over)."""
    depth = 0
    for value in values:
        kind = type(value)
        if (kind is CheckedDict or kind is CheckedList) and value.depth > depth:
            depth = value.depth
    if depth >= MAX_DATA_DEPTH:
        raise _Deep
    out.depth = depth + 1
    _untrack(out)
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
