"""``dsh-todo mcp``: ``todo_write`` served to any MCP client, every call on a DSH-format session log.

:mod:`.stdio` (no SDK) owns a served connection: :mod:`.calls` turns one tool call into one turn step on an agent
session and answers the handshake and the hot methods, :mod:`.wire` reads and writes the lines, and
:mod:`.fallback` (the SDK half, started only when a message needs it) serves the rest with the SDK's low-level server
from :mod:`.server`, which also serves streamable HTTP. The package re-exports nothing, so importing it never
imports the SDK.
"""

__all__: list[str] = []
