"""pydantic-ai's MCP client driving ``dsh-todo mcp``, in one ``Agent.run`` with pydantic-ai's own ``FunctionModel``.

pydantic-ai 2 removed ``MCPServerStdio`` (importing it raises ``ImportError`` naming its replacement): its MCP
client is ``MCPToolset`` on the FastMCP client (the ``mcp`` extra, ``fastmcp-slim``), a stdio server given as
FastMCP's ``StdioTransport``.

How it starts and ends the server (pydantic-ai 2.68, fastmcp-slim 4.2, MCP SDK 2.3): entering the agent (or its
first run) starts a background task that spawns the server through the MCP SDK's ``stdio_client`` (its own process
group) and runs the 2025 ``initialize`` handshake (within ``init_timeout``, 5 s by default). With FastMCP's default
``keep_alive=True`` the server outlives the agent's context: it ends at ``transport.close()``, or when the event
loop ends (``asyncio.run`` cancels the task); with ``keep_alive=False`` it ends as the agent's context exits. Either
way the MCP SDK closes its stdin and polls up to 2 s before SIGTERM to the group (SIGKILL 2 s later). Seen here: no
signal; the server exits on the end of its stdin.

What pydantic-ai does on the way to its model: the ``ToolDefinition`` in ``AgentInfo.function_tools`` has our name,
description and input schema (equal as values; over the handshake our server sends the schema's root keys as
``properties, required, type``). A successful result becomes ``structuredContent`` when the server sends one (every
content block being text): the model would read the JSON value, not our line. An ``isError`` result raises
``ModelRetry`` (``tool_error_behavior="retry"``): the model gets a retried ``ToolReturnPart`` whose content is our
text, rendered for a provider as ``{"error": "<our text>"}``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import needs

needs.module("fastmcp")
needs.module("pydantic_ai")

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dsh_todo.jsonutil import dumps, loads
from tests.carriers.mcp.clients.common import (
    ACCEPTED,
    DEADLINE,
    FINAL_TEXT,
    REFUSED,
    TEXT_OF,
    assert_exited,
    native_tool,
    server_command,
    stored_run,
    stored_session,
    watch_server,
)

pytestmark = pytest.mark.anyio


class Script:
    """The ``FunctionModel`` function: one call per response, then the final text; keeps every request's tools and
    the tool results (returns and retry prompts) the messages carried."""

    def __init__(self) -> None:
        self.steps = [("a", ACCEPTED), ("r", REFUSED)]
        self.infos: list[AgentInfo] = []
        self.results: dict[str, Any] = {}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        for message in messages:
            for part in getattr(message, "parts", []):
                if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                    self.results[part.tool_call_id] = part
        if self.steps:
            call_id, raw = self.steps.pop(0)
            return ModelResponse(parts=[ToolCallPart("todo_write", raw, tool_call_id=call_id)])
        return ModelResponse(parts=[TextPart(FINAL_TEXT)])


@pytest.mark.parametrize("keep_alive", [True, False], ids=["kept-alive-then-closed", "not-kept-alive"])
async def test_an_agent_run_through_mcp_toolset_over_stdio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           keep_alive: bool) -> None:
    root, cwd = tmp_path / "sessions", tmp_path / "project"
    cwd.mkdir()
    command, args = server_command(root)
    script = Script()
    with watch_server(monkeypatch) as watch, anyio.fail_after(DEADLINE):
        transport = StdioTransport(command, args, cwd=str(cwd), keep_alive=keep_alive)
        agent = Agent(FunctionModel(script), toolsets=[MCPToolset(transport, id="dsh-todo", init_timeout=DEADLINE)])
        async with agent:
            result = await agent.run("Fix the bug")
        if keep_alive:
            assert watch.process.returncode is None  # FastMCP's default: the server outlives the agent's context
            await transport.close()
    assert result.output == FINAL_TEXT
    # What pydantic-ai showed its model on every request: our tool, unchanged.
    ours = native_tool()
    assert len(script.infos) == 3
    for info in script.infos:
        [tool] = info.function_tools
        assert (tool.name, tool.description, tool.parameters_json_schema) == (
            ours["name"], ours["description"], ours["parameters"])
    # What the model read back: our exact texts. The refusal comes back as a retry of the call (pydantic-ai's
    # default ``tool_error_behavior="retry"``), holding our text; a provider renders it as ``{"error": TEXT}``.
    accepted, refused = script.results["a"], script.results["r"]
    assert isinstance(accepted, ToolReturnPart) and accepted.outcome == "success"
    assert accepted.content == TEXT_OF[ACCEPTED]
    assert accepted.model_response_str() == TEXT_OF[ACCEPTED]
    assert isinstance(refused, ToolReturnPart) and refused.outcome == "retried"
    assert refused.content == TEXT_OF[REFUSED]
    assert refused.model_response_str() == dumps({"error": TEXT_OF[REFUSED]})
    stored_run(root, watch)


PROGRAM = """
import asyncio, json, sys
import anyio
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.mcp import MCPToolset

command, root, accepted, refused = sys.argv[1:]
calls = [ToolCallPart("todo_write", refused, tool_call_id="r"), ToolCallPart("todo_write", accepted, tool_call_id="a")]
spawned = []
real_open = anyio.open_process

async def open_process(*args, **kwargs):
    spawned.append(await real_open(*args, **kwargs))
    return spawned[-1]

anyio.open_process = open_process

def model(messages, info):
    return ModelResponse(parts=[calls.pop()] if calls else [TextPart("done")])

async def main():
    agent = Agent(FunctionModel(model), toolsets=[MCPToolset(StdioTransport(command, ["mcp", "--root", root]))])
    async with agent:
        print((await agent.run("Fix the bug")).output, file=sys.stderr)

asyncio.run(main())
print(json.dumps([[process.pid, process.returncode] for process in spawned]))
"""
"""A user's program: one agent run in ``asyncio.run``, the transport left open (FastMCP's default keep-alive); it
prints the pid and exit code of each server it spawned."""


@pytest.mark.slow
def test_a_program_that_never_closes_the_transport(tmp_path: Path) -> None:
    """The server outlives the agent's context (keep-alive) and is ended when ``asyncio.run`` cancels the
    transport's task at the program's end: the MCP SDK's shutdown still closes its stdin and waits for it."""
    root = tmp_path / "sessions"
    command, _args = server_command(root)
    done = subprocess.run([sys.executable, "-c", PROGRAM, command, str(root), ACCEPTED, REFUSED], cwd=tmp_path,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stderr
    [[pid, returncode]] = loads(done.stdout)
    assert_exited(returncode, pid, done.stderr)
    stored_session(root)
