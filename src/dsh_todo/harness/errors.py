"""Errors that carry structured info to the model-facing result.

Only :class:`HarnessError` subclasses add ``{name, code}`` to a ``tool/result`` (SPEC §2); any other exception is a
plain failure whose message alone reaches the model.
"""

from __future__ import annotations


class HarnessError(Exception):
    """An error the harness classifies: its ``name`` and ``code`` travel with the tool result."""

    name: str = "HarnessError"
    code: str = "HARNESS"

    def __init__(self, message: str, *, name: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        if name is not None:
            self.name = name
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def info(self) -> dict[str, str]:
        return {"name": self.name, "code": self.code}


class ToolArgsError(HarnessError):
    name = "ToolArgsError"
    code = "INVALID_ARGS"


class AbortError(HarnessError):
    name = "AbortError"
    code = "ABORTED"


class InvariantError(HarnessError):
    """An invariant companion refused an event; the message names the package."""

    name = "InvariantError"
    code = "INVARIANT"

    def __init__(self, package_name: str, text: str) -> None:
        super().__init__(f'invariant violated by "{package_name}": {text}')
        self.package_name = package_name


class ConfigError(Exception):
    """A plugin's config was rejected; the plugin is not mounted."""


class BootError(Exception):
    """A composition could not be booted; the message names the row."""
