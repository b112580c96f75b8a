"""What a plugin is: the :class:`Plugin` shape, the check that refuses anything else, and how its config is read.

Both the plugin tree (:meth:`dsh_todo.harness.context.Context.plugin`, which mounts one) and the loader (which
resolves one from a composition row) need these; living here, below both, they let the loader import the context
and never the other way round (the two imported each other, the context's half inside ``Context.plugin``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, cast

from dsh_todo.harness.errors import BootError, ConfigError


class Plugin(Protocol):
    """What ``ctx.plugin`` mounts: a module or object with a string ``name`` and a callable ``apply(ctx)`` or
    ``apply(ctx, config)``. ``inject`` (service names) and ``Config`` (with ``parse``) are optional, so they are read
    with ``getattr`` and not part of the type. Both members are read-only, so a plugin module whose ``name`` is
    ``Final`` satisfies it structurally; :func:`check_plugin_shape` checks the same at run
    time for callers that are not type-checked."""

    @property
    def name(self) -> str: ...

    @property
    def apply(self) -> Callable[..., object]: ...


def check_plugin_shape(plugin: object) -> Plugin:
    """Refuse anything that is not a namespace plugin (a bare callable, a module with a ``default`` export); return
    what passed, typed as the :class:`~dsh_todo.harness.context.Plugin` it is."""
    if hasattr(plugin, "default"):
        raise BootError(
            f"plugin {getattr(plugin, 'name', plugin)!r} exports 'default' next to its name/inject/apply; a loader "
            "that unwraps it would mount the default alone and drop 'inject', so it would run with no services. "
            "Remove the 'default' export.")
    if not callable(getattr(plugin, "apply", None)):
        raise BootError(f"{plugin!r} is not a plugin: it has no callable 'apply'")
    if not isinstance(getattr(plugin, "name", None), str):
        raise BootError(f"{plugin!r} is not a plugin: it has no string 'name'")
    needs = getattr(plugin, "inject", [])
    if not isinstance(needs, (list, tuple)) or not all(isinstance(n, str) for n in needs):
        raise BootError(f"plugin {getattr(plugin, 'name', plugin)!r} has an 'inject' that is not a list of service "
                        "names")
    return cast(Plugin, plugin)


def parse_config(plugin: object, config: Any) -> Any:
    """Validate a row's config with the plugin's ``Config.parse``; plugins without ``Config`` take none."""
    schema = getattr(plugin, "Config", None)
    if schema is None:
        if config not in (None, {}):
            raise ConfigError(f"plugin {getattr(plugin, 'name', plugin)!r} takes no config")
        return None
    parse: Callable[[Any], Any] = schema.parse
    return parse(config)


def accepts_config(apply: Callable[..., Any]) -> bool:
    """Whether ``apply`` takes ``(ctx, config)`` rather than ``(ctx)``."""
    try:
        params = [p for p in inspect.signature(apply).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return True
    return len(params) >= 2
