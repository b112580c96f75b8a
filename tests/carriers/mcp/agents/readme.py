"""The README's MCP setup snippets, as the coding-agent CLI tests use them: as written, placeholders filled in.

The snippets run the server with ``uv run --project /path/to/dsh-todo dsh-todo mcp --root /home/me/.dsh-todo/sessions``;
a test replaces the two placeholders (the repository, its own root) and nothing else, so a snippet that stops
working fails its CLI's test.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

__all__ = ["REPO", "claude_line", "gemini_settings", "uv_environment"]

REPO = Path(__file__).resolve().parents[4]
README = REPO / "README.md"
PLACEHOLDERS = ("/path/to/dsh-todo", "/home/me/.dsh-todo/sessions")


def _fill(words: list[str], root: Path) -> list[str]:
    swap = dict(zip(PLACEHOLDERS, (str(REPO), str(root)), strict=True))
    return [swap.get(word, word) for word in words]


def claude_line(root: Path) -> list[str]:
    """The Claude Code line (``claude mcp add dsh-todo -- uv run …``), split into words."""
    [line] = re.findall(r"^claude mcp add dsh-todo -- .*$", README.read_text(encoding="utf-8"), re.M)
    return _fill(shlex.split(line), root)


def gemini_settings(root: Path) -> dict[str, Any]:
    """The Gemini CLI ``settings.json`` block (the first JSON block after its heading line)."""
    [block] = re.findall(r"^Gemini CLI \(`~/\.gemini/settings\.json`.*?```json\n(.*?)```",
                         README.read_text(encoding="utf-8"), re.M | re.S)
    settings = json.loads(block)
    server = settings["mcpServers"]["dsh-todo"]
    server["args"] = _fill(server["args"], root)
    return dict(settings)


def uv_environment() -> dict[str, str]:
    """Variables for the snippets' ``uv run``: this test run's environment, used as it is (no sync, offline: the
    suite's environment is not a test's to change)."""
    return {"UV_PROJECT_ENVIRONMENT": sys.prefix, "UV_NO_SYNC": "1", "UV_OFFLINE": "1"}
