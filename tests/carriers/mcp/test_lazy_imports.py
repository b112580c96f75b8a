"""The MCP and ACP SDKs load only when their carrier serves: the CLI and the SDK-free halves never import them."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import dsh_todo, dsh_todo.cli, dsh_todo.runtime
import dsh_todo.carriers.mcp, dsh_todo.carriers.mcp.calls
import dsh_todo.carriers.acp, dsh_todo.carriers.acp.updates
dsh_todo.cli.build_parser().parse_args(["mcp", "--http"])
dsh_todo.cli.build_parser().parse_args(["acp", "--script", "s.json"])
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("mcp", "mcp_types", "acp", "uvicorn"))
print(",".join(loaded))
"""


def test_sdks_are_imported_lazily() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == ""
