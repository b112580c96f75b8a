"""dsh-todo: DeepSeek Harness's ``todo_write`` tool and its session logs, in Python.

Where to start: :func:`dsh_todo.harness.boot` mounts a composition, :func:`dsh_todo.runtime.open_runtime` the
standard one; :func:`dsh_todo.adapters.bind_todo` gives a framework agent the tool; :mod:`dsh_todo.testing` is for
your tests. This package itself exports only ``__version__``, and computes it on first use: importing any part of
``dsh_todo`` (the standard-library-only ``dsh_todo.tool_todo.rules`` included) loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["__version__"]

if TYPE_CHECKING:
    __version__: str


def __getattr__(name: str) -> str:
    # Reading the installed distribution's metadata costs tens of milliseconds; only callers who ask pay for it.
    if name == "__version__":
        from importlib import metadata

        try:
            return metadata.version("dsh-todo")
        except metadata.PackageNotFoundError:
            return "0+unknown"
    raise AttributeError(f"module 'dsh_todo' has no attribute {name!r}")
