"""A service's key: its name, typed by the service it names.

The plugin tree (:mod:`dsh_todo.harness.context`) keeps services by name and knows none of them. Each service module
declares its key beside its class (``TOOLS: ServiceKey[ToolRegistry] = ServiceKey("tools")``), so ``ctx[TOOLS]`` is a
``ToolRegistry`` to mypy while the context imports no service module, and the module graph runs one way: from a
service to the context, never back (decision 0044). The key lives in a module of its own, below everything, because
the persistence contract declares one and a ``dsh-todo plan`` process, which reads that contract, must not load the
plugin tree.

Strings still name services wherever people write them (``inject = ["tools"]``, ``ctx.get("sessions")``,
``ctx.tools``); a key is for code that wants the type.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")


class ServiceKey(Generic[T]):
    """The name a plugin provides a service under (``ctx.provide(KEY, service)``) and others get it by
    (``ctx[KEY]``, ``ctx.get(KEY)``). Not a ``str``: a string argument would then match the untyped ``str`` forms of
    those methods too, and ``ctx.provide(TOOLS, something_else)`` would pass mypy."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


def name_of(key: str | ServiceKey[Any]) -> str:
    """The service name a key or a plain name stands for."""
    return key if isinstance(key, str) else key.name
