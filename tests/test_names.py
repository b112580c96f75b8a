"""One name per concept (decision 0012, amended by 0050): no public signature shadows a builtin, and a session event
has one type name, :data:`dsh_todo.harness.event_types.Event`."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "dsh_todo"

FRAMEWORK_SIGNATURES = {
    ("adapters/langchain.py", "invoke", "input"),
    ("adapters/langchain.py", "ainvoke", "input"),
    ("adapters/pydantic_ai.py", "validate_json", "input"),
    ("adapters/pydantic_ai.py", "validate_python", "input"),
    ("adapters/pydantic_ai.py", "todo_write_capability", "id"),
    ("adapters/pydantic_ai.py", "todo_write_toolset", "id"),
}
"""Parameters a framework names for us (LangChain's ``Runnable.invoke(input)``, pydantic's validator protocol,
pydantic-ai's toolset ``id``): a caller passes them by that name, so they keep it."""


def public_parameters() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                arguments = node.args
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                    found.append((path.relative_to(SRC).as_posix(), node.name, arg.arg))
    return found


def test_no_public_signature_shadows_a_builtin() -> None:
    shadowing = {(where, function, name) for where, function, name in public_parameters()
                 if name in vars(builtins) and name not in ("self", "cls")}
    assert shadowing - FRAMEWORK_SIGNATURES == set()
    assert shadowing >= FRAMEWORK_SIGNATURES, "a framework parameter left: drop it from the list"


def test_an_event_has_one_type_name_and_a_decoded_line_another() -> None:
    """Repro: after ``event_types.Event`` was added, ``persistence/contract.py`` and ``logview/reader.py`` still
    defined ``Event = dict[str, Any]`` and ``jsonl/batches.py`` and ``persistence/transfer.py`` their own
    ``Event = Mapping[str, Any]``: five aliases of two types under one name."""
    defined = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            defined += [(path.relative_to(SRC).as_posix(), target.id) for target in targets
                        if isinstance(target, ast.Name) and target.id in ("Event", "Record")]
    assert defined == [("harness/event_types.py", "Event"), ("harness/event_types.py", "Record")]
