"""The value-schema DSL and its compilation to JSON Schema in the reference's key order (SPEC §3.2).

Tool authors describe parameters as a map of property name to value schema, marking required ones with
``required: True``; compilation lifts those marks into the parent's ``required`` list and emits every node's keys in
one fixed order, so the schema a model sees is a byte-identical constant on every request (prefix caching).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_todo.harness.errors import SchemaAuthorError as SchemaAuthorError

JsonSchema = dict[str, Any]

SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")
ANNOTATIONS = ("description", "title", "default", "examples")
_ALLOWED: dict[str, frozenset[str]] = {
    "object": frozenset({"type", *ANNOTATIONS, "additionalProperties", "properties", "required"}),
    "array": frozenset({"type", *ANNOTATIONS, "items", "required"}),
    "scalar": frozenset({"type", *ANNOTATIONS, "enum", "const", "required"}),
    "json": frozenset({"type", *ANNOTATIONS, "required"}),
}




def compile_parameters(spec: Mapping[str, Mapping[str, Any]]) -> JsonSchema:
    """A parameter map → the root object schema (open: no ``additionalProperties``)."""
    properties, required = _compile_properties(spec, "schema")
    root: JsonSchema = {"type": "object", "properties": properties}
    if required:
        root["required"] = required
    return root


def compile_value(spec: Mapping[str, Any], where: str = "schema") -> JsonSchema:
    """One value schema → JSON Schema. ``required`` marks are only meaningful inside a properties map."""
    if "required" in spec:
        raise SchemaAuthorError(f"{where}.required is only allowed on a property")
    return _compile_node(spec, where)


def _compile_properties(spec: Mapping[str, Mapping[str, Any]], where: str) -> tuple[JsonSchema, list[str]]:
    properties: JsonSchema = {}
    required: list[str] = []
    for key, node in spec.items():
        mark = node.get("required", None)
        if "required" in node and mark is not True:
            raise SchemaAuthorError(f"{where}.{key}.required must be true when present")
        if mark is True:
            required.append(key)
        properties[key] = _compile_node({k: v for k, v in node.items() if k != "required"}, f"{where}.{key}")
    return properties, required


def _annotations(spec: Mapping[str, Any]) -> JsonSchema:
    return {key: spec[key] for key in ANNOTATIONS if key in spec}


def _check_vocabulary(spec: Mapping[str, Any], kind: str, where: str) -> None:
    for key in spec:
        if key not in _ALLOWED[kind]:
            raise SchemaAuthorError(f"{where}.{key} is not supported by the value schema DSL")


def _compile_node(spec: Mapping[str, Any], where: str) -> JsonSchema:
    kind = spec.get("type")
    if kind == "object":
        _check_vocabulary(spec, "object", where)
        extra = spec.get("additionalProperties")
        if extra is not True and extra is not False:
            raise SchemaAuthorError(f"{where}.additionalProperties must be given as true or false")
        properties, required = _compile_properties(spec.get("properties", {}), f"{where}.properties")
        node: JsonSchema = {"type": "object", **_annotations(spec), "additionalProperties": extra,
                            "properties": properties}
        if required:
            node["required"] = required
        return node
    if kind == "array":
        _check_vocabulary(spec, "array", where)
        if "items" not in spec:
            raise SchemaAuthorError(f"{where}.items is required on an array")
        return {"type": "array", **_annotations(spec), "items": compile_value(spec["items"], f"{where}.items")}
    if kind in SCALAR_TYPES:
        _check_vocabulary(spec, "scalar", where)
        node = {"type": kind, **_annotations(spec)}
        if "enum" in spec:
            node["enum"] = list(spec["enum"])
        if "const" in spec:
            node["const"] = spec["const"]
        return node
    if kind == "json":
        _check_vocabulary(spec, "json", where)
        return _annotations(spec)
    raise SchemaAuthorError(f"{where}.type {kind!r} is not supported by the value schema DSL")
