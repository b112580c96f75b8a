"""What every registration returns: the one callable that takes it back (:mod:`dsh_todo.harness.context` collects
them per plugin scope).

A module of its own, importing nothing, so a registry a reader composes on its own (the log reader's projections)
does not load the plugin tree.
"""

from __future__ import annotations

from collections.abc import Callable


class Disposer:
    """A callable that undoes one registration; calling it twice is harmless."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], object] | None) -> None:
        self._fn = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()

    @property
    def active(self) -> bool:
        return self._fn is not None
