"""google-adk's ``McpToolset`` (a ``StdioConnectionParams``) driving ``dsh-todo mcp``, in one ``Runner.run_async``
with a scripted ``BaseLlm``.

How ADK starts and ends the server (google-adk 2.13 with its ``mcp`` extra, on the MCP SDK 2.3): the toolset
connects when the run first lists its tools, spawning the server through the MCP SDK's ``stdio_client`` (its own
process group) and running the 2025 ``initialize`` handshake within ``StdioConnectionParams.timeout`` (5 s by
default). ``Runner.close()`` (or ``McpToolset.close()``) ends it: the MCP SDK closes its stdin and polls up to 2 s
before SIGTERM to the group (SIGKILL 2 s later). Seen here: no signal; the server exits on the end of its stdin.

What ADK does on the way to its model, all of it its own doing: our description, and every ``description`` inside
our input schema, is fenced as untrusted server text (``<<<BEGIN_UNTRUSTED_TOOL_DESCRIPTION>>>\n…\n<<<END_…>>>``)
and the system instruction gains a paragraph saying so; the schema is otherwise ours, sent as
``parameters_json_schema`` (equal as values; over the handshake our server sends the root keys as ``properties,
required, type``), and an ``outputSchema`` would be sent as ``response_json_schema``. The model reads each call's
whole MCP result as one JSON object: ``content`` (our text), ``isError``, ``meta`` (our session id) and, when the
server sends it, ``structuredContent``. An ``isError`` result is returned the same way, not raised.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import needs

needs.module("google.adk")
needs.module("mcp")

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from google.genai import types
from mcp import StdioServerParameters
from pydantic import Field

from tests.carriers.mcp.clients.common import (
    ACCEPTED,
    DEADLINE,
    FINAL_TEXT,
    REFUSED,
    TEXT_OF,
    arguments,
    native_tool,
    server_command,
    stored_run,
    watch_server,
)

pytestmark = pytest.mark.anyio


class ScriptedLlm(BaseLlm):
    """One call per response, then the final text; keeps a copy of every ``LlmRequest`` ADK built."""

    model: str = "scripted"
    requests: list[LlmRequest] = Field(default_factory=list)
    steps: list[tuple[str, str]] = Field(default_factory=lambda: [("a", ACCEPTED), ("r", REFUSED)])

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request.model_copy(deep=True))
        if self.steps:
            call_id, raw = self.steps.pop(0)
            call = types.FunctionCall(id=call_id, name="todo_write", args=arguments(raw))
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
        else:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=FINAL_TEXT)]))


BEGIN, END = "<<<BEGIN_UNTRUSTED_TOOL_DESCRIPTION>>>", "<<<END_UNTRUSTED_TOOL_DESCRIPTION>>>"


def fenced(text: str) -> str:
    """A server-supplied description as ADK quotes it to the model."""
    return f"{BEGIN}\n{text}\n{END}"


def fenced_schema(schema: Any) -> Any:
    """Our schema with every ``description`` keyword fenced (ours has no property named ``description``)."""
    if isinstance(schema, dict):
        return {key: fenced(value) if key == "description" else fenced_schema(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [fenced_schema(item) for item in schema]
    return schema


def function_responses(request: LlmRequest) -> dict[str, Any]:
    """The ``function_response`` parts of a request, by call id: what the model read back."""
    return {part.function_response.id: part.function_response.response
            for content in request.contents for part in content.parts or []
            if part.function_response is not None}


async def test_an_agent_run_through_mcp_toolset_over_stdio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, cwd = tmp_path / "sessions", tmp_path / "project"
    cwd.mkdir()
    command, args = server_command(root)
    llm = ScriptedLlm()
    with watch_server(monkeypatch) as watch, anyio.fail_after(DEADLINE):
        toolset = McpToolset(connection_params=StdioConnectionParams(
            server_params=StdioServerParameters(command=command, args=args, cwd=str(cwd)), timeout=DEADLINE))
        runner = InMemoryRunner(agent=LlmAgent(name="planner", model=llm, instruction="Plan.", tools=[toolset]),
                                app_name="clients")
        session = await runner.session_service.create_session(app_name="clients", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="Fix the bug")])
        events = [event async for event in runner.run_async(user_id="u", session_id=session.id,
                                                            new_message=message)]
        await runner.close()
    assert events[-1].content is not None and events[-1].content.parts is not None
    assert events[-1].content.parts[0].text == FINAL_TEXT
    # What ADK put in every request to its model: our tool, its description and every description in its schema
    # fenced as untrusted server text (with a preamble in the system instruction saying so), the schema otherwise
    # ours, sent as JSON Schema.
    ours = native_tool()
    assert len(llm.requests) == 3
    for request in llm.requests:
        assert request.config is not None and request.config.tools is not None
        [tool] = request.config.tools
        assert isinstance(tool, types.Tool) and tool.function_declarations is not None
        [declared] = tool.function_declarations
        assert declared.name == ours["name"]
        assert declared.description == fenced(ours["description"])
        assert declared.parameters is None
        assert declared.parameters_json_schema == fenced_schema(ours["parameters"])
        assert declared.response_json_schema is None  # no outputSchema: the model is promised no JSON result
        assert isinstance(request.config.system_instruction, str)
        assert f"Tool descriptions quoted between {BEGIN} and {END}" in request.config.system_instruction
    # What the model read back: the call's whole MCP result as one JSON object, holding our exact text, and
    # ``isError`` as we set it; ``meta`` names the session the call was written to.
    view = stored_run(root, watch)
    meta = {"dsh-todo/sessionId": view.session_id}
    assert function_responses(llm.requests[-1]) == {
        "a": {"meta": meta, "content": [{"type": "text", "text": TEXT_OF[ACCEPTED]}], "isError": False},
        "r": {"meta": meta, "content": [{"type": "text", "text": TEXT_OF[REFUSED]}], "isError": True},
    }
