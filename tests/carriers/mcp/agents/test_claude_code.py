"""Claude Code (``claude -p``, headless) driving ``dsh-todo mcp``, set up with the README's own ``claude mcp add``.

The run: the README's Claude Code line, placeholders filled in, adds the server to the test's home; then ``claude -p``
plays three model turns against a scripted Anthropic Messages endpoint (:mod:`.anthropic_fake`): the accepted list,
a status the schema refuses, a final text. Claude Code checks no MCP tool's arguments against its schema, so the
refused call reaches our registry and the model reads its ``Error: invalid arguments: …`` line.

How Claude Code 2.1 shows our tool to its model: named ``mcp__dsh-todo__todo_write`` (``mcp__<server>__<tool>``),
with our description and input schema as they are. By default it defers every MCP tool: the system prompt names it,
and only once the model has called ``ToolSearch`` (``select:<name>``, answered with a ``tool_reference`` block) does
the tool list carry it, marked ``defer_loading: true`` (the API expands the reference into the definition). With
``ENABLE_TOOL_SEARCH=false`` it is listed from the first request, unmarked. Both ways are played. A success reaches
the model as the result's ``content`` blocks (one text block), an error as that text alone with ``is_error``, no
wording of Claude Code's around either.

``claude -p`` starts its first model turn without waiting long for MCP servers still connecting (about 2 s); a
turn that starts before our server is up never offers our tool, so the run sets ``CLAUDE_CODE_MCP_STARTUP_WAIT_MS``
to the 30 s Claude Code allows a server to connect, and two more cases start the server late on purpose (a ``uv``
that sleeps first) to show the run does not depend on how busy the machine is.

Claude Code ends the server (``uv``, which passes the signals on to ``dsh-todo``) with SIGINT then SIGTERM 100 ms
later, stdin left open. Running as root (as in CI containers), ``--dangerously-skip-permissions`` is refused
unless ``IS_SANDBOX=1``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.carriers.mcp.agents.anthropic_fake import our_tool, script, tool_names, tool_results
from tests.carriers.mcp.agents.common import fake_model, no_server_left, run_cli
from tests.carriers.mcp.agents.conftest import cli
from tests.carriers.mcp.agents.readme import claude_line, uv_environment
from tests.carriers.mcp.clients.common import ACCEPTED, FINAL_TEXT, REFUSED, TEXT_OF, native_tool, stored_session

pytestmark = pytest.mark.slow


NAME = "mcp__dsh-todo__todo_write"

STARTUP_WAIT_MS = 30_000
"""How long ``claude -p`` holds its first model turn for a server still connecting
(``CLAUDE_CODE_MCP_STARTUP_WAIT_MS``, Claude Code 2.1.274 on): as long as Claude Code gives a server to connect at
all (its ``MCP_TIMEOUT``, 30 s by default). Left unset, the hold measured about 2 s, and a first turn that starts
before our server has answered ``initialize`` and ``tools/list`` never offers our tool (listed: the model answers
without it; deferred: the system message names no MCP tool). ``uv run`` plus Python's imports took 0.7-1 s on an
idle 2-core machine and more than 2 s on a busy one, so without this the test passed or failed with the machine's
load (a fresh CI machine passed it, a shared one did not)."""

SLOW_START = 3
"""Seconds the slow-start cases hold the server back before ``uv`` runs: longer than Claude Code's own first-turn
hold (about 2 s, measured), as a busy machine makes ``uv run`` plus Python's imports take."""


def slow_uv(folder: Path) -> str:
    """A ``PATH`` whose ``uv`` sleeps :data:`SLOW_START` seconds, then runs the real one with the same arguments:
    the README's server line unchanged, started as late as on a loaded machine."""
    real = shutil.which("uv")
    assert real is not None
    folder.mkdir()
    shim = folder / "uv"
    shim.write_text(f'#!/bin/sh\nsleep {SLOW_START}\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def environment(base_url: str, deferred: bool) -> dict[str, str]:
    """Claude Code pointed at the fake model, headless and quiet (and the README's ``uv run`` as the suite runs);
    MCP tools deferred behind ``ToolSearch`` (the default) or not; the first turn waiting for our server to connect
    (:data:`STARTUP_WAIT_MS`)."""
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "IS_SANDBOX": "1",
        **({} if deferred else {"ENABLE_TOOL_SEARCH": "false"}),
        "CLAUDE_CODE_MCP_STARTUP_WAIT_MS": str(STARTUP_WAIT_MS),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        **uv_environment(),
    }


def text_of(result: dict[str, Any]) -> str:
    """The text a ``tool_result`` block carries: a plain string, or exactly one text block."""
    content = result["content"]
    if isinstance(content, str):
        return content
    [block] = content
    assert block["type"] == "text", block
    return str(block["text"])


@pytest.mark.parametrize(("deferred", "slow"), [(True, False), (False, False), (True, True), (False, True)],
                         ids=["tool-search", "listed", "tool-search-slow-start", "listed-slow-start"])
def test_claude_code_runs_our_tool_through_the_readme_setup(tmp_path: Path, deferred: bool, slow: bool) -> None:
    claude = cli("claude")
    if shutil.which("uv") is None:
        needs.unavailable("uv is not on PATH, and the README's Claude Code line runs the server with it")
    root, home, cwd = tmp_path / "sessions", tmp_path / "home", tmp_path / "project"
    cwd.mkdir()
    command = claude_line(root)
    assert command[:4] == ["claude", "mcp", "add", "dsh-todo"]
    with fake_model(script([ACCEPTED, REFUSED], FINAL_TEXT, search=NAME)) as model:
        env = environment(model.url, deferred)
        if slow:
            env["PATH"] = slow_uv(tmp_path / "slow-bin")
        added = run_cli([claude, *command[1:]], cwd=cwd, home=home, env=env, timeout=60)
        assert added.returncode == 0, added
        run = run_cli([claude, "-p", "Fix the bug", "--dangerously-skip-permissions"], cwd=cwd, home=home, env=env)
    assert run.returncode == 0, run
    assert run.stdout.strip() == FINAL_TEXT, run
    turns = [request for request in model.requests if our_tool(request.body) is not None]
    assert len(turns) == 3, [request.path for request in model.requests]
    # Our tool, as Claude Code lists it for its model on every turn: prefixed name, our description and schema.
    ours = native_tool()
    listed = {"name": NAME, "description": ours["description"], "input_schema": ours["parameters"]}
    for request in turns:
        assert our_tool(request.body) == ({**listed, "defer_loading": True} if deferred else listed)
    if deferred:  # before them, one turn that named the tool (in a system message) and offered ToolSearch
        [before] = [request for request in model.requests if our_tool(request.body) is None
                    and "ToolSearch" in tool_names(request.body)]
        assert NAME in json.dumps(before.body["messages"])
        [loaded] = [block for message in turns[0].body["messages"] if message["role"] == "user"
                    and isinstance(message["content"], list) for block in message["content"]
                    if block.get("type") == "tool_result"]
        assert loaded["content"] == [{"type": "tool_reference", "tool_name": NAME}]
    # What the model read back: our exact lines, the refusal flagged as an error, nothing else.
    results = tool_results(turns[-1].body)
    assert [(result["tool_use_id"], text_of(result), result.get("is_error", False)) for result in results] == [
        ("toolu_01", TEXT_OF[ACCEPTED], False),
        ("toolu_02", TEXT_OF[REFUSED], True),
    ]
    assert [len(tool_results(request.body)) for request in turns] == [0, 1, 2]
    no_server_left(root)
    stored_session(root, calls=(ACCEPTED, REFUSED))
