"""Argument validation against the compiled schema, with the reference's exact texts and walk order (SPEC §2.1).

Every violation is collected (not just the first) so the model can fix a call in one retry. Order: at an object,
missing required keys first, then the declared properties that are present (declared order), then undeclared keys
(the object's own order); an array's items in index order; a container of the wrong type reports only itself.

The schema is compiled once into nested closures (:func:`compile_validator`): validation sits on the hot path of
every tool call, and walking the schema dictionaries afresh for each item would cost more than the tool itself.
A refused call pays for it only where it is wrong: an array asks the generated acceptor (:func:`compile_acceptor`)
about each item first and walks only the items it refuses, so one bad status in ten items costs one item's walk,
not ten (the error path stayed within 1.5x of a valid call; docs/decisions/0008-untracked-log.md).

A refused call must also learn whether its arguments are lossless JSON, which decides before any violation is said
(``LOSSLESS_ERROR``). :func:`compile_refusal` answers both in that one walk: what the acceptor passed, or a type test
of an exact JSON type, is proven as it goes, and only what neither proves (a value of the wrong type, an undeclared
key, a node without a type) gets the lossless walk, instead of a second walk of the whole arguments first
(docs/decisions/0031-every-path-of-a-call.md). The registry asks neither the acceptor nor the refusal alone but
:func:`compile_judge`'s walk, the acceptor's code that resumes the refusal at the array item it refused.
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


class _Lossy(Exception):
    """Raised by a proving walk (:func:`compile_refusal`) at the first value that is not lossless JSON."""


def _prove(value: Any) -> None:
    """Raise :class:`_Lossy` unless ``value`` is lossless JSON (the walk found nothing else that proves it)."""
    if not is_lossless(value):
        raise _Lossy


_EXACT_SCALARS = (str, int, bool, type(None))
_CONTAINERS = frozenset({dict, list, FrozenDict, FrozenList, CheckedDict, CheckedList})
_EXACT_TYPES: dict[str, type] = {"string": str, "object": dict, "array": list, "boolean": bool, "integer": int,
                                 "null": type(None)}
"""The one exact type that passes each type test: a proving walk asks it before the test itself (a call)."""


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
    return _compile_refusal(schema, None)


Walk = Callable[[list[Any], str, Any, Any], list[str]]
"""A refused array's walk from its first refused item on, for the judge: ``walk(values, path, item, out)``."""


def _compile_refusal(schema: dict[str, Any], walks: dict[int, Walk] | None) -> Callable[[Any], list[str] | None]:
    """:func:`compile_refusal`; ``walks``, when given, gets each array node's walk by the ``id`` of its ``items``
    schema (the judge resumes them; the schema is alive while the judge is generated)."""
    check = _compile(schema, proving=True, walks=walks)

    def refuse(value: Any) -> list[str] | None:
        out: list[str] = []
        try:
            check(value, "", out)
        except _Lossy:
            return None
        return out

    return refuse


def violations(schema: dict[str, Any], value: Any) -> list[str]:
    """One-off validation (compiles the schema each time; tools keep a compiled validator)."""
    return compile_validator(schema)(value)


def _compile(schema: dict[str, Any], proving: bool = False, walks: dict[int, Walk] | None = None) -> Check:
    """The check of one node. ``proving``: it also raises :class:`_Lossy` unless the value is lossless JSON."""
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

    exact = _EXACT_TYPES.get(kind) if isinstance(kind, str) else None

    def proving_check(value: Any, path: str, out: list[str]) -> None:
        if type(value) is not exact and type_test is not None and not type_test(value):
            _prove(value)
            out.append(f'"{path or "arguments"}" must be {type_text}')
            return
        if body is not None:  # it proves the container's contents; the container itself is proven here
            if type(value) not in _CONTAINERS:
                raise _Lossy
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
    ordered = tuple((key, check, _settled_by(children[key])) for key, check in properties.items())

    def check_object(value: dict[str, Any], path: str, out: list[str]) -> None:
        prefix = f"{path}." if path else ""
        for key in required:
            if key not in value:
                out.append(f'missing required property "{prefix}{key}"')
        for key, child, settled in ordered:
            if key in value:
                item = value[key]
                if type(item) is not settled:  # else valid and lossless: no call to say nothing
                    child(item, prefix + key, out)
        if proving:  # what no child walks: every key must be a string and every undeclared value lossless
            if declared.issuperset(value):
                return
            for key, item in value.items():
                if key not in declared:
                    if type(key) is not str:
                        raise _Lossy
                    _prove(item)
        if closed and not declared.issuperset(value):
            for key in value:
                if key not in declared:
                    out.append(f'"{prefix}{key}" is not a declared property (additionalProperties: false)')

    return check_object


class _Never:
    """No value's type: the type a node that no exact type settles is "settled by"."""


def _settled_by(schema: dict[str, Any]) -> type:
    """The exact type whose every value the node's check passes without a word, lossless (a plain string for a
    ``string`` node without ``enum`` or ``const``): its parent skips the call for such a value (a refused item's
    other fields, decision 0031). :class:`_Never` when there is none."""
    kind = schema.get("type")
    if kind in ("string", "boolean", "integer", "null") and "enum" not in schema and "const" not in schema:
        return _EXACT_TYPES[kind]
    return _Never


def _compile_array(items_schema: dict[str, Any], proving: bool = False, walks: dict[int, Walk] | None = None) -> Check:
    item_check = _compile(items_schema, proving, walks)
    first_refused = compile_first_refused(items_schema)

    if walks is not None:
        def walk(value: list[Any], path: str, item: Any, out: Any) -> list[str]:
            """The refusal's walk of ``value`` from ``item`` on (the first item the judge refused; every item before
            it passed the acceptor, so it is proven and has nothing to say), appended to ``out`` (a list, or the
            judge's ``()`` when nothing was said yet)."""
            problems: list[str] = out if type(out) is list else []
            index = 0
            for each in value:  # the first item that is this very object: the one the judge refused
                if each is item:
                    break
                index += 1
            while index >= 0:
                item_check(value[index], f"{path}[{index}]", problems)
                index = first_refused(value, index + 1)
            return problems

        walks[id(items_schema)] = walk

    def check_array(value: list[Any], path: str, out: list[str]) -> None:
        # The generated acceptor passes good items without a path or a call each (what it accepts is lossless:
        # exact JSON types only), and names the next one it refuses.
        index = first_refused(value, 0)
        while index >= 0:
            item_check(value[index], f"{path}[{index}]", out)
            index = first_refused(value, index + 1)

    return check_array


def _compile_value_checks(schema: dict[str, Any]) -> Check | None:
    checks: list[Check] = []
    if "enum" in schema:
        allowed = list(schema["enum"])
        text = dumps(allowed)

        scalars = frozenset((type(a), a) for a in allowed if type(a) in _EXACT_SCALARS)
        """The allowed scalars with their exact types: one set lookup answers for a scalar (a refused status)."""

        def check_enum(value: Any, path: str, out: list[str]) -> None:
            if type(value) in _EXACT_SCALARS:
                if (type(value), value) in scalars:
                    return
            elif any(value == a and type(value) is type(a) for a in allowed):
                return
            out.append(f'"{path or "arguments"}" must be one of {text}')

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


def compile_acceptor(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """``schema`` → a fast yes/no predicate, generated as one Python function with the checks inlined.

    The registry asks it first: a valid call (the common case) costs one straight-line function instead of a
    closure per node, and only a refused call pays for :func:`compile_validator`'s full violation list. It answers
    ``False`` whenever it is unsure (a number that may not be lossless, a str subclass): the slow path decides.
    """
    accept: Callable[[Any], bool] = _generate(schema, "accept")
    return accept


def compile_first_refused(items_schema: dict[str, Any]) -> Callable[[list[Any], int], int]:
    """``items_schema`` → ``first(values, start)``: the index of the first of ``values[start:]`` the acceptor of
    ``items_schema`` would refuse, or -1. The same generated checks as :func:`compile_acceptor`, in one loop: a
    refused array asks once per refused item, not once per item (decision 0031)."""
    first: Callable[[list[Any], int], int] = _generate(items_schema, "first")
    return first


def compile_judge(schema: dict[str, Any]) -> Callable[[Any], list[str] | tuple[()] | None]:
    """``schema`` → the acceptor and the refusal in one walk: ``()`` for a value the acceptor passes, else what
    :func:`compile_refusal` says (``None``: not lossless JSON; else every violation, maybe none)."""
    return compile_refusal_and_judge(schema)[1]


def compile_refusal_and_judge(schema: dict[str, Any]) -> tuple[Callable[[Any], list[str] | None],
                                                               Callable[[Any], list[str] | tuple[()] | None]]:
    """``schema`` → :func:`compile_refusal` and :func:`compile_judge`, the judge resuming the refusal's own walks.

    The registry asks the judge instead of the acceptor then the refusal, so a refused call walks its arguments
    once more only from its first refused array item, not twice from the start (decision 0031). It is the
    acceptor's generated code with each ``return False`` replaced: inside an array's loop, the refusal's walk of
    that array resumes at the item refused (found by identity: every item before it passed the acceptor, so it is
    proven and has nothing to say) and the judge goes on after the array; anywhere else, and in a loop within a
    loop, the refusal runs from the start. Valid arguments cost what the acceptor costs."""
    walks: dict[int, Walk] = {}
    refuse = _compile_refusal(schema, walks)
    judge: Callable[[Any], list[str] | tuple[()] | None] = _generate(schema, "judge", refuse, walks)
    return refuse, judge


def _generate(schema: dict[str, Any], mode: str, refuse: Callable[[Any], list[str] | None] | None = None,
              walks: dict[int, Walk] | None = None) -> Any:
    """The acceptor (``mode`` "accept"), the first-refused loop ("first") or the judge ("judge", escaping to
    ``refuse`` and resuming ``walks``) of ``schema``, as one generated Python function."""
    lines: list[str] = ["def accept(v0):"]
    names: dict[str, Any] = {}
    counter = [0]
    first, judge = mode == "first", mode == "judge"
    escape = "return REFUSE(v0)" if judge else "return False"
    """A failure the judge cannot resume after: the refusal from the start (always right, only slower)."""

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def emit(node: dict[str, Any], var: str, indent: str, fail: str, path: str | None) -> None:
        """``fail``: the statement a failure runs; ``path``: the node's path where it is known before the walk,
        ``None`` inside an array's loop."""
        def child_path(key: str) -> str | None:
            return None if path is None else (f"{path}." if path else "") + key

        kind = node.get("type")
        if kind == "object":
            properties: dict[str, Any] = node.get("properties", {})
            declared = fresh("D")
            names[declared] = frozenset(properties)
            closed = node.get("additionalProperties") is False
            exact = closed and set(node.get("required", ())) == set(properties)
            if exact:  # exactly these keys: the length here, and each .get() below fails its type test if missing
                lines.append(f"{indent}if type({var}) is not dict or len({var}) != {len(properties)}: {fail}")
            else:
                lines.append(f"{indent}if type({var}) is not dict: {fail}")
                for key in node.get("required", ()):
                    lines.append(f"{indent}if {key!r} not in {var}: {fail}")
                if closed:
                    lines.append(f"{indent}if not {declared}.issuperset({var}): {fail}")
            if not closed:  # undeclared values of an open object are not checked below: they must still be lossless
                lines.append(f"{indent}for k, x in {var}.items():")
                lines.append(f"{indent}    if k not in {declared} and (type(k) is not str or not LOSSLESS(x)): "
                             + ("return index" if first else escape))  # a loop of its own: no break out of it
            required = set(node.get("required", ()))
            for key, child in properties.items():
                item = fresh("v")
                if exact:  # MISSING is no JSON value: the child's first test refuses it
                    lines.append(f"{indent}{item} = {var}.get({key!r}, MISSING)")
                    emit(child, item, indent, fail, child_path(key))
                elif key in required:  # presence already checked above
                    lines.append(f"{indent}{item} = {var}[{key!r}]")
                    emit(child, item, indent, fail, child_path(key))
                else:
                    lines.append(f"{indent}{item} = {var}.get({key!r}, MISSING)")
                    lines.append(f"{indent}if {item} is not MISSING:")
                    lines.append(f"{indent}    pass")
                    emit(child, item, indent + "    ", fail, child_path(key))
        elif kind == "array":
            lines.append(f"{indent}if type({var}) is not list: {fail}")
            if "items" in node:
                item = fresh("v")
                inner = fail
                if judge:
                    if path is None:  # a loop within a loop: its path is only known at run time
                        inner = escape
                    else:
                        resume = fresh("R")
                        assert walks is not None
                        names[resume] = walks[id(node["items"])]
                        inner = f"out = {resume}({var}, {path!r}, {item}, out); break"
                lines.append(f"{indent}for {item} in {var}:")
                lines.append(f"{indent}    pass")
                emit(node["items"], item, indent + "    ", inner, None)
        elif kind in ("string", "boolean", "null", "integer"):
            test = {"string": "type({v}) is not str", "boolean": "type({v}) is not bool",
                    "null": "{v} is not None", "integer": "type({v}) is not int"}[kind]
            lines.append(f"{indent}if {test.format(v=var)}: {fail}")
        else:  # numbers, annotation-only nodes, anything else: let the full validator and lossless walk decide
            lines.append(f"{indent}{fail}")
            return
        if "enum" in node:
            allowed = fresh("E")
            hashable = all(isinstance(a, (str, int, bool)) or a is None for a in node["enum"])
            if hashable and kind in ("string", "integer", "boolean", "null"):
                names[allowed] = frozenset(node["enum"])
                lines.append(f"{indent}if {var} not in {allowed}: {fail}")
            else:
                lines.append(f"{indent}{fail}")
        if "const" in node:
            lines.append(f"{indent}{fail}")

    if first:  # each refusal returns the item's index; an accepted item goes on to the next
        lines[0] = "def accept(values, start):"
        lines.append("    for index in range(start, len(values)):")
        lines.append("        v0 = values[index]")
        emit(schema, "v0", "        ", "return index", None)
        lines.append("    return -1")
    elif judge:  # what the acceptor passes is (); a resumed walk's problems are in out
        lines.append("    out = ()")
        lines.append("    try:")
        lines.append("        pass")
        emit(schema, "v0", "        ", escape, "")
        lines.append("    except LOSSY:")
        lines.append("        return None")
        lines.append("    return out")
    else:
        emit(schema, "v0", "    ", "return False", "")
        lines.append("    return True")
    namespace: dict[str, Any] = {"MISSING": object(), "LOSSLESS": is_lossless, "LOSSY": _Lossy, **names}
    if judge:
        namespace["REFUSE"] = refuse
    exec(compile("\n".join(lines), "<schema acceptor>", "exec"), namespace)
    return namespace["accept"]
