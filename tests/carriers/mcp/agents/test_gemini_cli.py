"""Gemini CLI (``gemini -p``, headless) driving ``dsh-todo mcp``, set up with the README's own ``settings.json``.

The run: the README's Gemini CLI block, placeholders filled in, is the home's ``~/.gemini/settings.json`` (plus the
API-key auth and the quiet settings the test needs); ``gemini -p`` plays three model turns against a scripted Gemini
API endpoint (:mod:`.gemini_fake`): the accepted list, a list with a duplicate, a final text. Gemini CLI checks a
call's arguments against our schema itself, so a status the schema refuses (the other tests' refused call) never
reaches our server; the duplicate passes the schema and only our rules refuse it (SPEC §4.1), so that is the refused
call here.

How Gemini CLI 0.61 shows our tool to its model: named ``mcp_dsh-todo_todo_write`` (``mcp_<server>_<tool>``), our
description as it is, our input schema as ``parametersJsonSchema`` with one property of its own added,
``wait_for_previous`` (a boolean, not required). What the model reads back:

- a success: our text blocks, each wrapped in ``<untrusted_context>`` tags (Gemini CLI wraps every MCP text so);
- an error (``isError``): Gemini CLI's sentence ``MCP tool 'todo_write' reported tool error for function call:
  <the call> with response: <the whole result>`` as JSON: our line is in it, escaped, beside the result's ``_meta``
  (the session id) and ``isError``.

Without ``trust`` in the server's settings a headless run does not offer the model our tool at all (it would have
to ask first); the README's block says ``"trust": true``. Gemini CLI ends the server with SIGTERM, stdin left open.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.adapters.scenario import RAW, TEXT
from tests.carriers.mcp.agents.common import fake_model, no_server_left, run_cli
from tests.carriers.mcp.agents.conftest import cli
from tests.carriers.mcp.agents.gemini_fake import function_responses, our_tool, script
from tests.carriers.mcp.agents.readme import gemini_settings, uv_environment
from tests.carriers.mcp.clients.common import ACCEPTED, FINAL_TEXT, TEXT_OF, native_tool, stored_session

pytestmark = pytest.mark.slow

DUPLICATE = RAW["c2"]
"""A list with the same content twice: it passes the schema, our rules refuse it."""
NAME = "mcp_dsh-todo_todo_write"


def settings(root: Path) -> dict[str, Any]:
    """The README's block, then what a headless run against the fake model needs: API-key auth (what Gemini CLI
    picks from a base URL alone its own validator refuses), no telemetry, update checks or IDE link."""
    return {
        **gemini_settings(root),
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ide": {"enabled": False},
    }


def test_gemini_cli_runs_our_tool_through_the_readme_setup(tmp_path: Path) -> None:
    gemini = cli("gemini")
    if shutil.which("uv") is None:
        needs.unavailable("uv is not on PATH, and the README's Gemini CLI block runs the server with it")
    root, home, cwd = tmp_path / "sessions", tmp_path / "home", tmp_path / "project"
    cwd.mkdir()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings(root), indent=2), encoding="utf-8")
    with fake_model(script([ACCEPTED, DUPLICATE], FINAL_TEXT)) as model:
        env = {"GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "fake-key", "GEMINI_CLI_TRUST_WORKSPACE": "true",
               **uv_environment()}
        run = run_cli([gemini, "-p", "Fix the bug"], cwd=cwd, home=home, env=env)
    assert run.returncode == 0, run
    assert run.stdout.strip() == FINAL_TEXT, run
    turns = [request for request in model.requests if our_tool(request.body) is not None]
    assert len(turns) == 3, [request.path for request in model.requests]
    # Our tool, as Gemini CLI declares it to its model on every turn: prefixed name, our description, our schema
    # with Gemini CLI's own wait_for_previous added last.
    ours = native_tool()
    for request in turns:
        tool = our_tool(request.body)
        assert tool is not None and list(tool) == ["name", "description", "parametersJsonSchema"]
        assert (tool["name"], tool["description"]) == (NAME, ours["description"])
        schema = json.loads(json.dumps(tool["parametersJsonSchema"]))
        added = schema["properties"].pop("wait_for_previous")
        assert schema == ours["parameters"]
        assert added["type"] == "boolean" and "wait_for_previous" not in schema["required"]
    assert [len(function_responses(request.body)) for request in turns] == [0, 1, 2]
    [accepted, refused] = function_responses(turns[-1].body)
    # What the model read back for the accepted call: our exact line, in Gemini CLI's untrusted-context tags.
    assert accepted["name"] == NAME
    assert accepted["response"] == {"output": f"<untrusted_context>\n{TEXT_OF[ACCEPTED]}\n</untrusted_context>"}
    no_server_left(root)
    view = stored_session(root, calls=(ACCEPTED, DUPLICATE))
    # And for the refused one: Gemini CLI's sentence around the call and our whole result, our exact line in it.
    assert refused["name"] == NAME
    [error] = refused["response"].values()
    assert list(refused["response"]) == ["error"]
    head = "MCP tool 'todo_write' reported tool error for function call: "
    assert error.startswith(head)
    call, result = error.removeprefix(head).split(" with response: ")
    assert json.loads(call) == {"name": "todo_write", "args": json.loads(DUPLICATE)}
    assert json.loads(result) == [{"functionResponse": {"name": "todo_write", "response": {
        "_meta": {"dsh-todo/sessionId": view.session_id},
        "content": [{"type": "text", "text": TEXT["c2"]}],
        "isError": True,
    }}}]
