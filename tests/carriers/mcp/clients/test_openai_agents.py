"""openai-agents' ``MCPServerStdio`` driving ``dsh-todo mcp``, in one ``Runner.run`` with the SDK's own scripted
``Model`` (``agents.testing.ScriptedModel``).

How the SDK starts and ends the server (openai-agents 0.24 on the MCP SDK 2.3): entering ``MCPServerStdio`` spawns
it through the MCP SDK's ``stdio_client`` (a new session, so a process group of its own) and runs the 2025
``initialize`` handshake, bounded by ``client_session_timeout_seconds`` (5 s by default, so a slow start fails the
connection). Leaving it closes the server's stdin and polls for its exit for up to 2 s; only then would it send
SIGTERM to the group, and SIGKILL 2 s later. Seen here: no signal; the server exits on the end of its stdin.

What the SDK does to our tool and results on their way to its model: the ``FunctionTool`` handed to
``Model.get_response`` has our name, description and input schema (equal as values; over the handshake our server
sends the schema's root keys as ``properties, required, type``), ``strict_json_schema`` off
(``convert_schemas_to_strict=False`` by default). A result reaches the model as the text blocks of ``content``
(``use_structured_content=False`` by default, so ``structuredContent`` is ignored either way), one block as one
``input_text`` item; an ``isError`` result the same way, with no wording of the SDK's around it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import needs

needs.module("agents")
needs.module("mcp")

from agents import Agent, FunctionTool, RunConfig, Runner
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call

from tests.carriers.mcp.clients.common import (
    ACCEPTED,
    DEADLINE,
    FINAL_TEXT,
    REFUSED,
    TEXT_OF,
    native_tool,
    server_command,
    stored_run,
    watch_server,
)

pytestmark = pytest.mark.anyio


def outputs_read_by_the_model(model: ScriptedModel) -> dict[str, Any]:
    """The ``function_call_output`` items of the last request, by call id: what the model read back."""
    last = model.last_call
    assert last is not None and isinstance(last.input, list)
    return {item["call_id"]: item["output"] for item in last.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


async def test_an_agent_run_through_mcp_server_stdio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, cwd = tmp_path / "sessions", tmp_path / "project"
    cwd.mkdir()
    command, args = server_command(root)
    model = ScriptedModel([[function_call("todo_write", ACCEPTED, call_id="a")],
                           [function_call("todo_write", REFUSED, call_id="r")],
                           [assistant_message(FINAL_TEXT)]])
    with watch_server(monkeypatch) as watch, anyio.fail_after(DEADLINE):
        async with MCPServerStdio({"command": command, "args": args, "cwd": str(cwd)}, name="dsh-todo",
                                  client_session_timeout_seconds=DEADLINE) as server:
            agent = Agent(name="planner", instructions="Plan.", model=model, mcp_servers=[server])
            result = await Runner.run(agent, "Fix the bug", run_config=RunConfig(tracing_disabled=True))
    model.assert_complete()
    assert result.final_output == FINAL_TEXT
    # What the SDK handed its model on every request: our tool, unchanged.
    ours = native_tool()
    assert len(model.calls) == 3
    for call in model.calls:
        [tool] = call.tools
        assert isinstance(tool, FunctionTool)
        assert (tool.name, tool.description, tool.params_json_schema) == (
            ours["name"], ours["description"], ours["parameters"])
        assert tool.strict_json_schema is False
    # What the model read back: our exact texts, success and refusal alike, and nothing else.
    assert outputs_read_by_the_model(model) == {
        "a": [{"type": "input_text", "text": TEXT_OF[ACCEPTED]}],
        "r": [{"type": "input_text", "text": TEXT_OF[REFUSED]}],
    }
    stored_run(root, watch)
