"""``dsh-todo mcp``: ``todo_write`` served to any MCP client, every call on a DSH-format session log.

:mod:`.calls` (no SDK) turns one tool call into one turn on an agent session; :mod:`.server` (imports the ``mcp``
SDK, so import it only to serve) puts that behind a low-level MCP server over stdio or streamable HTTP. The package
re-exports neither, so importing it never imports the SDK.
"""

__all__: list[str] = []
