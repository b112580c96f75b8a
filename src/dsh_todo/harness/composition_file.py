"""A composition written as YAML (DSH's ``cordis.yml``): rows of ``{id, name, config}``, or a mapping with ``plugins``.

Its own module so that booting rows built in code (every front door) never imports the YAML parser.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from dsh_todo.harness.errors import BootError

_BOOL_TAG = "tag:yaml.org,2002:bool"


class _CompositionLoader(yaml.SafeLoader):
    """YAML 1.2 booleans, as DSH's loader (js-yaml) reads ``cordis.yml``: only ``true``/``false``.

    PyYAML follows YAML 1.1, where ``no``/``yes``/``on``/``off`` are booleans; a composition that says
    ``allowParallelInProgress: no`` would then boot as ``false`` here while DSH refuses it as a string.
    """


_CompositionLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_CompositionLoader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                         list("tTfF"))


def read_file(path: Path) -> list[Any]:
    try:
        loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=_CompositionLoader)
    except (OSError, yaml.YAMLError) as exc:
        raise BootError(f"cannot read composition {path}: {exc}") from None
    if isinstance(loaded, dict) and "plugins" in loaded:
        loaded = loaded["plugins"]
    if not isinstance(loaded, list):
        raise BootError(f"composition {path} must be a list of rows (or a mapping with 'plugins')")
    return loaded
