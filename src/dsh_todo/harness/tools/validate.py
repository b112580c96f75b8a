"""Argument validation against the compiled schema, with the reference's exact texts and walk order (SPEC §2.1).

Every violation is collected (not just the first) so the model can fix a call in one retry. Order: at an object,
missing required keys first, then the declared properties that are present (declared order), then undeclared keys
(the object's own order); an array's items in index order; a container of the wrong type reports only itself.

The schema is compiled once into nested closures (:func:`compile_validator`), so a call does not walk the schema's
dictionaries afresh.

A refused call must also learn whether its arguments are lossless JSON, which decides before any violation is said
(``LOSSLESS_ERROR``). :func:`compile_refusal` answers both in one walk: a type test of an exact JSON type proves what
it passes as it goes, and only what no test proves (a value of the wrong type, an undeclared key, a node without a
type, a float) gets the lossless walk, instead of a second walk of the whole arguments first
(docs/decisions/0031-every-path-of-a-call.md). The registry asks neither alone but the judge
(:func:`dsh_todo.harness.tools.speed.compile_judge`), generated code that says what the refusal says and resumes it
at the array item it refused (decision 0045).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsh_todo.harness.frozen import CheckedDict, CheckedList, FrozenDict, FrozenList, is_lossless
from dsh_todo.jsonutil import dumps

Check = Callable[[Any, str, list[str]], None]

_ARTICLE = {"object": "an object", "array": "an array", "string": "a string", "number": "a number",
            "integer": "an integer", "boolean": "a boolean", "null": "null"}


def _is_integer(value: Any) -> bool:
    return type(value) is int or (type(value) is float and value.is_integer())


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: type(v) is bool,
    "integer": _is_integer,
    "number": lambda v: type(v) is int or type(v) is float,
    "null": lambda v: v is None,
}


def _label(path: str) -> str:
    return path or "arguments"


class Lossy(Exception):
    """Raised by a proving walk (:func:`compile_refusal`) at the first value that is not lossless JSON."""


def _prove(value: Any) -> None:
    """Raise :class:`Lossy` unless ``value`` is lossless JSON (the walk found nothing else that proves it)."""
    if not is_lossless(value):
        raise Lossy


_EXACT_SCALARS = (str, int, bool, type(None))
_CONTAINERS = frozenset({dict, list, FrozenDict, FrozenList, CheckedDict, CheckedList})


def compile_validator(schema: dict[str, Any]) -> Callable[[Any], list[str]]:
    """``schema`` → a function returning every violation of a value (empty when valid)."""
    check = _compile(schema)

    def validate(value: Any) -> list[str]:
        out: list[str] = []
        check(value, "", out)
        return out

    return validate


def compile_refusal(schema: dict[str, Any]) -> Callable[[Any], list[str] | None]:
    """``schema`` → a function returning ``None`` when a value is not lossless JSON, else every violation (empty when
    valid): what :func:`~dsh_todo.harness.frozen.is_lossless` then :func:`compile_validator` answer, in one walk."""
    return refusal_with_walks(schema)[0]


Walk = Callable[[list[Any], str, Any, Any], list[str]]
"""A refused array's walk from a given item on, for the judge: ``walk(values, path, item, out)``."""


def refusal_with_walks(schema: dict[str, Any]) -> tuple[Callable[[Any], list[str] | None], dict[int, Walk]]:
    """:func:`compile_refusal`, and each array node's walk by the ``id`` of its ``items`` schema (the judge of
    :mod:`dsh_todo.harness.tools.speed` resumes them; the schema is alive while the judge is generated)."""
    walks: dict[int, Walk] = {}
    check = _compile(schema, proving=True, walks=walks)

    def refuse(value: Any) -> list[str] | None:
        out: list[str] = []
        try:
            check(value, "", out)
        except Lossy:
            return None
        return out

    return refuse, walks


def violations(schema: dict[str, Any], value: Any) -> list[str]:
    """One-off validation (compiles the schema each time; tools keep a compiled validator)."""
    return compile_validator(schema)(value)


def _compile(schema: dict[str, Any], proving: bool = False, walks: dict[int, Walk] | None = None) -> Check:
    """The check of one node. ``proving``: it also raises :class:`Lossy` unless the value is lossless JSON."""
    kind = schema.get("type")
    type_test = _TYPE_TESTS.get(kind) if isinstance(kind, str) else None
    type_text = _ARTICLE.get(kind, str(kind)) if isinstance(kind, str) else ""
    body: Check | None = None
    if kind == "object":
        body = _compile_object(schema, proving, walks)
    elif kind == "array" and "items" in schema:
        body = _compile_array(schema["items"], proving, walks)
    value_checks = _compile_value_checks(schema)

    if not proving:
        def check(value: Any, path: str, out: list[str]) -> None:
            if type_test is not None and not type_test(value):
                out.append(f'"{_label(path)}" must be {type_text}')
                return
            if body is not None:
                body(value, path, out)
            if value_checks is not None:
                value_checks(value, path, out)

        return check

    def proving_check(value: Any, path: str, out: list[str]) -> None:
        if type_test is not None and not type_test(value):
            _prove(value)
            out.append(f'"{_label(path)}" must be {type_text}')
            return
        if body is not None:  # it proves the container's contents; the container itself is proven here
            if type(value) not in _CONTAINERS:
                raise Lossy
            body(value, path, out)
        elif type(value) not in _EXACT_SCALARS:  # a float, a subclass, a container nobody walks: the slow proof
            _prove(value)
        if value_checks is not None:
            value_checks(value, path, out)

    return proving_check


def _compile_object(schema: dict[str, Any], proving: bool = False, walks: dict[int, Walk] | None = None) -> Check:
    children: dict[str, Any] = schema.get("properties", {})
    properties = {key: _compile(child, proving, walks) for key, child in children.items()}
    required = tuple(schema.get("required", ()))
    closed = schema.get("additionalProperties") is False
    declared = frozenset(properties)

    def check_object(value: dict[str, Any], path: str, out: list[str]) -> None:
        prefix = f"{path}." if path else ""
        for key in required:
            if key not in value:
                out.append(f'missing required property "{prefix}{key}"')
        for key, child in properties.items():
            if key in value:
                child(value[key], prefix + key, out)
        if proving:  # what no child walks: every key must be a string and every undeclared value lossless
            if declared.issuperset(value):
                return
            for key, item in value.items():
                if key not in declared:
                    if type(key) is not str:
                        raise Lossy
                    _prove(item)
        if closed and not declared.issuperset(value):
            for key in value:
                if key not in declared:
                    out.append(f'"{prefix}{key}" is not a declared property (additionalProperties: false)')

    return check_object


def _compile_array(items_schema: dict[str, Any], proving: bool = False, walks: dict[int, Walk] | None = None) -> Check:
    item_check = _compile(items_schema, proving, walks)

    def check_array(value: list[Any], path: str, out: list[str]) -> None:
        for index, item in enumerate(value):
            item_check(item, f"{path}[{index}]", out)

    if walks is not None:
        def walk(value: list[Any], path: str, item: Any, out: Any) -> list[str]:
            """The walk of ``value`` from ``item`` on (the first item the judge refused: every item before it passed
            its acceptor, so it is proven and has nothing to say), appended to ``out`` (a list, or the judge's
            ``()`` when nothing was said yet)."""
            problems: list[str] = out if type(out) is list else []
            found = False
            for index, each in enumerate(value):
                found = found or each is item
                if found:
                    item_check(each, f"{path}[{index}]", problems)
            return problems

        walks[id(items_schema)] = walk

    return check_array


def _compile_value_checks(schema: dict[str, Any]) -> Check | None:
    checks: list[Check] = []
    if "enum" in schema:
        allowed = list(schema["enum"])
        text = dumps(allowed)

        def check_enum(value: Any, path: str, out: list[str]) -> None:
            for each in allowed:
                if value == each and type(value) is type(each):  # exact: True is not 1, 2.0 is not 2
                    return
            out.append(f'"{_label(path)}" must be one of {text}')

        checks.append(check_enum)
    if "const" in schema:
        const = schema["const"]
        const_text = dumps(const)

        def check_const(value: Any, path: str, out: list[str]) -> None:
            if not (value == const and type(value) is type(const)):
                out.append(f'"{_label(path)}" must equal {const_text}')

        checks.append(check_const)
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]

    def check_all(value: Any, path: str, out: list[str]) -> None:
        for one in checks:
            one(value, path, out)

    return check_all
