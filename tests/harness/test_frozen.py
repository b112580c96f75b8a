"""The lossless copy, the checked constructors, and the todo tool's leaf table (decisions 0001, 0045)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from dsh_todo.harness import Session
from dsh_todo.harness.frozen import (
    MAX_DATA_DEPTH,
    CheckedDict,
    CheckedList,
    FrozenDict,
    FrozenList,
    NotLosslessJSON,
    freeze_trusted,
    frozen_array,
    frozen_object,
    lossless_copy,
)
from dsh_todo.harness.tools.speed import LeafTable


def test_a_log_is_freed_by_reference_counting_alone() -> None:
    """A frozen event is built bottom-up and can never point back at itself, so it is in no cycle: a session's log
    (the session held by nobody else) is freed without the collector."""
    tracemalloc.start()
    gc.disable()
    try:
        before = tracemalloc.get_traced_memory()[0]
        session = Session("s")  # no store: a store and its sessions point at each other
        for n in range(200):
            session.append("step/start", {"turn": 1, "step": n, "detail": [{"k": "v" * 100}] * 10})
        grown = tracemalloc.get_traced_memory()[0]
        del session
        after = tracemalloc.get_traced_memory()[0]
    finally:
        gc.enable()
        tracemalloc.stop()
    assert grown - before > 200 * 10 * 64
    assert after - before < (grown - before) / 20


def test_the_copy_still_refuses_what_json_cannot_carry() -> None:
    for bad, text in [({"x": [float("nan")]}, "data.x[0] is nan, which JSON cannot carry losslessly"),
                      ({"x": -0.0}, "data.x is -0.0, which JSON cannot carry losslessly"),
                      ({1: "a"}, "data has a non-string key 1"),
                      ({"x": {1, 2}}, "data.x is a set, not a JSON value")]:
        with pytest.raises(NotLosslessJSON) as caught:
            lossless_copy(bad, "data")
        assert str(caught.value) == text


def test_the_copy_shares_frozen_containers_and_freezes_the_rest() -> None:
    shared = lossless_copy([{"a": 1}])
    copied = lossless_copy({"shared": shared, "fresh": ({"b": 2},)})
    assert copied["shared"] is shared
    assert type(copied["fresh"]) is CheckedList and type(copied["fresh"][0]) is CheckedDict
    with pytest.raises(TypeError):
        copied["fresh"].append(1)
    assert copied == {"shared": [{"a": 1}], "fresh": [{"b": 2}]}


def test_only_what_the_checked_constructors_prove_is_marked_checked() -> None:
    """``frozen_object``/``frozen_array`` mark what they build checked (the append shares it) only when every value
    is a lossless scalar of its exact type or a checked container; anything else is frozen but unchecked."""
    item = frozen_object(content="a", status="pending", n=1, x=2.5, ok=True, none=None)
    assert type(item) is CheckedDict and item.depth == 1
    todos = frozen_array([item, item])
    assert type(todos) is CheckedList and todos.depth == 2
    wrapped: Any = frozen_object(todos=todos)
    mixed: Any = frozen_array([1, todos, "s"])
    assert wrapped.depth == 3 and mixed.depth == 3
    assert type(frozen_array([])) is CheckedList and type(frozen_object()) is CheckedDict

    class Text(str):
        pass

    for bad in [{1}, float("nan"), -0.0, object(), [1], {"a": 1}, Text("a"), FrozenDict(a=1), FrozenList([1])]:
        assert type(frozen_object(value=bad)) is FrozenDict
        assert type(frozen_array([item, bad])) is FrozenList
    assert type(freeze_trusted({"a": [1]})) is FrozenDict  # read from a log: frozen, not counted
    with pytest.raises(TypeError, match="immutable"):
        frozen_object(a=1)["b"] = 2


def test_a_checked_container_knows_its_depth_and_none_exceeds_a_log_lines() -> None:
    value: Any = frozen_object(v=1)
    for _ in range(MAX_DATA_DEPTH - 1):
        value = frozen_object(v=value)
    assert type(value) is CheckedDict and value.depth == MAX_DATA_DEPTH
    assert type(frozen_object(v=value)) is FrozenDict and type(frozen_array([value])) is FrozenList
    with pytest.raises(NotLosslessJSON, match=f"data nests deeper than {MAX_DATA_DEPTH} levels"):
        lossless_copy([value], "data")
    copied = lossless_copy({"v": [[1]]})
    assert (copied.depth, copied["v"].depth, copied["v"][0].depth) == (3, 2, 1)


def test_a_leaf_table_takes_only_checked_leaves_and_its_arrays_are_proven() -> None:
    """The todo tool's items: an array of a leaf table's values is checked without a look at them, because nothing
    but a checked leaf (``frozen_object`` of JSON scalars) can be put in."""
    table = LeafTable()
    table["a"] = frozen_object(content="a", status="pending")
    for bad in [FrozenDict(content="a"), frozen_object(content={1}), frozen_object(nested=frozen_object(a=1)), {}]:
        with pytest.raises(TypeError, match="checked leaf objects only"):
            table["b"] = bad  # type: ignore[assignment]
    with pytest.raises(TypeError):
        table.update(b=FrozenDict(content="b"))
    with pytest.raises(TypeError):
        table.setdefault("b", FrozenDict(content="b"))
    made: list[str] = []

    def make(key: str) -> dict[str, Any]:
        made.append(key)
        return {"content": key} if key != "bad" else {"content": {1}}

    def same(key: str) -> str:
        return key

    known = table.array(["a", "a"], same, make)
    assert type(known) is CheckedList and known.depth == 2 and known[0] is known[1] is table["a"] and made == []
    fresh = table.array(["a", "c"], same, make)
    assert type(fresh) is CheckedList and fresh.depth == 2
    assert fresh == [{"content": "a", "status": "pending"}, {"content": "c"}] and fresh[1] is table["c"]
    unproven = table.array(["a", "bad"], same, make)
    assert type(unproven) is FrozenList and type(unproven[1]) is FrozenDict and made == ["c", "bad"]
    assert "bad" not in table
    assert table.array(["c"], same, make)[0] is fresh[1] and made == ["c", "bad"]


def test_a_leaf_table_builds_new_leaves_checked_frozen_and_within_its_bounds() -> None:
    """A list with new items (decision 0031): each new leaf is checked as ``frozen_object`` checks, frozen, and
    remembered only within the table's bounds."""
    table = LeafTable(kept=3, longest=4)

    def make(key: Any) -> dict[str, Any]:
        return {"text": key[0], "n": key[1]}

    def pair(item: Any) -> Any:
        return item

    out = table.array([("ab", 1), ("abcde", 2.5), ("c", None), ("d", True)], pair, make)
    assert type(out) is CheckedList and out.depth == 2
    assert out == [{"text": "ab", "n": 1}, {"text": "abcde", "n": 2.5}, {"text": "c", "n": None},
                   {"text": "d", "n": True}]
    assert all(type(leaf) is CheckedDict and leaf.depth == 1 for leaf in out)
    assert ("abcde", 2.5) not in table  # a string longer than ``longest``: built, never remembered
    assert len(table) == 3
    table.array([("e", 0)], pair, make)  # full: it starts afresh
    assert list(table) == [("e", 0)]
    with pytest.raises(TypeError, match="immutable"):
        out[0]["text"] = "x"
    for bad in [float("nan"), -0.0, float("inf"), [1], object()]:
        refused = table.array(["f"], str, lambda key, bad=bad: {"text": key, "n": bad})
        assert type(refused) is FrozenList and type(refused[0]) is FrozenDict and "f" not in table
