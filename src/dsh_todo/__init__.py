"""dsh-todo: DeepSeek Harness's ``todo_write`` tool and its session logs, in Python.

Where to start: :func:`dsh_todo.harness.boot` mounts a composition, :func:`dsh_todo.standard.open_runtime` the
standard one; :func:`dsh_todo.adapters.bind_todo` gives a framework agent the tool; :mod:`dsh_todo.testing` is for
your tests. This package itself exports only ``__version__``: importing any part of ``dsh_todo`` (the
standard-library-only ``dsh_todo.tool_todo.rules`` included) loads nothing else.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
"""The distribution's version: pyproject.toml reads it from here (hatch), so reading it costs no metadata scan."""
