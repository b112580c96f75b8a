"""The README's copy-paste MCP client snippets, as the CLI tests use them: each test configures its CLI with the
snippet a reader would copy, placeholders filled in and nothing else changed, so a snippet that stops working fails
a test instead of a reader."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from tests import needs

__all__ = ["PROJECT", "claude_line", "gemini_settings", "snippet", "uv_environment"]

PROJECT = Path(__file__).resolve().parents[4]
"""This checkout: what the snippets' ``/path/to/dsh-todo`` stands for."""
DOC = PROJECT / "README.md"
PLACEHOLDERS = ("/path/to/dsh-todo", "/home/me/.dsh-todo/sessions")
"""The project's path and the sessions root, as the snippets write them."""
FENCE = re.compile(r"```[\w-]*\n(.*?)```", re.S)


def snippet(label: str, root: Path) -> str:
    """The fenced block that first follows the README paragraph starting with ``label``, with the placeholders
    replaced by this checkout and ``root``."""
    text = DOC.read_text(encoding="utf-8")
    start = re.search(rf"^{re.escape(label)}", text, re.M)
    assert start is not None, f"the README has no paragraph starting with {label!r}"
    block = FENCE.search(text, start.end())
    assert block is not None, f"no fenced block follows {label!r} in the README"
    body = block.group(1)
    for placeholder in PLACEHOLDERS:
        assert placeholder in body, f"the {label!r} snippet no longer names {placeholder}"
    return body.replace(PLACEHOLDERS[0], str(PROJECT)).replace(PLACEHOLDERS[1], str(root))


def claude_line(root: Path) -> list[str]:
    """The Claude Code line (``claude mcp add dsh-todo -- uv run …``), split into words."""
    [line] = snippet("Claude Code:", root).splitlines()
    return shlex.split(line)


def gemini_settings(root: Path) -> dict[str, Any]:
    """The Gemini CLI ``settings.json`` block."""
    settings = json.loads(snippet("Gemini CLI (`~/.gemini/settings.json`", root))
    assert isinstance(settings, dict)
    return settings


def uv_environment() -> dict[str, str]:
    """What the CLI's environment needs for the snippets' ``uv run``: the environment under test as the project's
    (wherever it is), used as it is (``UV_NO_SYNC``, ``UV_OFFLINE``: no install, no lock written, no network; the
    suite's environment is not a test's to change). Skips, saying so, where uv is not on ``PATH``."""
    if shutil.which("uv") is None:
        needs.unavailable("the README's snippets run dsh-todo through uv, which is not on PATH")
    return {"UV_PROJECT_ENVIRONMENT": sys.prefix, "UV_NO_SYNC": "1", "UV_OFFLINE": "1"}
