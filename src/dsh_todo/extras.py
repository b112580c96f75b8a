"""The optional extras: what each one is for and which top-level modules it provides, and the one error that names
the install when one is missing (issue 23).

A front door checks its extra before it imports anything from it (:func:`require`), so a person without the extra
reads ``the MCP server needs the `mcp` extra: pip install 'dsh-todo[mcp]'`` instead of Python's ``No module named
'mcp_types'``. The check locates the modules without importing them: a server that wants to answer its first request
fast (decision 0013) pays nothing for it.
"""

from __future__ import annotations

import importlib.util
from typing import Final

from dsh_todo.harness.errors import MissingExtraError

EXTRAS: Final = {
    "openai": ("a model endpoint", ("openai",)),
    "anthropic": ("a model endpoint over Anthropic Messages", ("anthropic",)),
    "mcp": ("the MCP server", ("mcp", "mcp_types")),
    "acp": ("the ACP agent", ("acp",)),
    "postgres": ("PostgreSQL storage", ("psycopg",)),
    "otel": ("session telemetry over OpenTelemetry", ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")),
    "openai-agents": ("the OpenAI Agents SDK adapter", ("agents",)),
    "langchain": ("the LangChain adapter", ("langchain_core",)),
    "pydantic-ai": ("the pydantic-ai adapter", ("pydantic_ai",)),
    "claude-agent-sdk": ("the Claude Agent SDK adapter", ("claude_agent_sdk", "mcp")),
    "google-adk": ("the Google ADK adapter", ("google.adk",)),
}
"""Extra (as ``pyproject.toml`` names it) → (what needs it, the top-level modules it installs)."""

NO_EXTRA: Final = {
    "crewai": ("the CrewAI adapter", "crewai>=1.15.30,<2"),
}
"""What needs a package no extra can declare → (what needs it, the requirement to install). crewai needs openai<3,
mcp<2 and opentelemetry>=1.45.1, and uv locks every extra together with this project's pins (openai 3, mcp 2,
opentelemetry 1.44), so a `crewai` extra would leave the project without a lock (see ``pyproject.toml``)."""


def missing(extra: str) -> MissingExtraError:
    """The error for ``extra`` (or a package of :data:`NO_EXTRA`) not being installed (its message names what needs
    it and the install)."""
    if extra in NO_EXTRA:
        what, requirement = NO_EXTRA[extra]
        return MissingExtraError(f"{what} needs {extra}: pip install '{requirement}'")
    what = EXTRAS[extra][0]
    return MissingExtraError(f"{what} needs the `{extra}` extra: pip install 'dsh-todo[{extra}]'")


def installed(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses the name, or a half-imported module
        return False


def require(extra: str) -> None:
    """Raise :func:`missing` unless every module of ``extra`` can be found."""
    if not all(installed(module) for module in EXTRAS[extra][1]):
        raise missing(extra)
