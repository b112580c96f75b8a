"""Booting a composition: rows of ``{id, name, config}`` mounted in order (DSH's ``cordis.yml`` loader).

Names resolve through the entry-point group ``dsh_todo.plugins`` (so other distributions can add plugins) or as a
dotted module path (``pkg.module`` or ``pkg.module:attr``); a row built in code may carry its ``plugin`` object
instead, as the standard composition's rows do (:func:`dsh_todo.standard.open_runtime`). One step past DSH's
postmortem 0001: a plugin module that exports ``default`` next to ``name``/``inject``/``apply`` is *refused*,
loudly, instead of being unwrapped into a bare function that silently loses its ``inject`` and then runs with no
services.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_todo.harness.context import Context
from dsh_todo.harness.errors import BootError, DshTodoError
from dsh_todo.harness.plugin_shape import accepts_config as accepts_config
from dsh_todo.harness.plugin_shape import check_plugin_shape
from dsh_todo.harness.plugin_shape import parse_config as parse_config

ENTRY_POINT_GROUP = "dsh_todo.plugins"

Row = Mapping[str, Any]

def resolve(plugin_name: str) -> object:
    """A plugin object for a DSH package name (entry point) or a dotted Python path."""
    from importlib.metadata import entry_points  # scanning every installed distribution: only for names

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == plugin_name:
            return ep.load()
    module_path, _, attr = plugin_name.partition(":")
    if not module_path or not all(part.isidentifier() for part in module_path.split(".")):
        raise BootError(f'unknown plugin "{plugin_name}": no entry point in group {ENTRY_POINT_GROUP!r} has that '
                        "name, and it is not a dotted module path")
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise BootError(f'unknown plugin "{plugin_name}": {exc}') from None
    return getattr(module, attr) if attr else module


def read_composition(composition: str | Path | Sequence[Row]) -> list[Row]:
    if isinstance(composition, (str, Path)):
        from dsh_todo.harness.composition_file import read_file  # YAML: only for a file

        return read_file(Path(composition))
    return list(composition)


def boot(composition: str | Path | Sequence[Row], ctx: Context | None = None) -> Context:
    """Mount every row in order on a (new) root context; any failure names its row and unwinds what was mounted."""
    root = ctx if ctx is not None else Context()
    handles = []
    try:
        for index, row in enumerate(read_composition(composition)):
            if not isinstance(row, Mapping) or not isinstance(row.get("name"), str):
                raise BootError(f"composition row {index} needs a string 'name'",
                                row=row if isinstance(row, Mapping) else None)
            row_id = str(row.get("id", row["name"]))
            where = f'composition row "{row_id}" ({row["name"]})'
            if row.get("disabled"):
                continue
            loaded: object | None = row.get("plugin")  # stays None when the plugin cannot even be resolved
            try:
                if loaded is None:
                    loaded = resolve(row["name"])
                plugin = check_plugin_shape(loaded)
                handles.append(root.plugin(plugin, row.get("config")))
            except DshTodoError as exc:  # a deliberate error's message is already for people
                raise BootError(f"{where}: {exc}", row=row, plugin=loaded) from exc
            except Exception as exc:
                raise BootError(f"{where}: {type(exc).__name__}: {exc}", row=row, plugin=loaded) from exc
    except BaseException:
        for handle in reversed(handles):
            handle.dispose()
        raise
    return root
