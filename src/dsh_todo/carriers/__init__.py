"""The ways in and out of the harness: terminal, web, MCP, ACP.

Each carrier is its own subpackage or module (``terminal``, ``web``, ``mcp``, ``acp``), imported by the command that
runs it; this package re-exports nothing, so importing one carrier never imports another's SDK.
"""

__all__: list[str] = []
