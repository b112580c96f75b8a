"""The ways in and out of the harness: terminal, web, MCP, ACP."""
