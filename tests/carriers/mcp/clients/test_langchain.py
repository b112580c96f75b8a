"""langchain-mcp-adapters driving ``dsh-todo mcp``, in one ``create_agent`` run (LangChain's agent loop on LangGraph)
with a scripted chat model of LangChain's own kind (``GenericFakeChatModel`` that binds tools as real ones do).

Not installable beside our ``mcp==2.3.0`` pin, so this module skips in our environment: langchain-mcp-adapters 0.3.2
(the newest release) requires ``mcp>=1.24.0,<2.0.0``, and 0.3.1 (``mcp>=1.24.0``) installs but fails to import on
mcp 2 (``ImportError: cannot import name 'RequestContext' from 'mcp.shared.context'``). It was run as written in
an environment of its own (langchain-mcp-adapters 0.3.2 on mcp 1.30, langchain 1.5, langgraph 1.2), the client
there and the server our installed ``dsh-todo`` on mcp 2.3.

How the adapters start and end the server: ``MultiServerMCPClient.session(name)`` spawns it through the MCP SDK's
``stdio_client`` and keeps one connection for the ``async with`` block; ``load_mcp_tools(session)`` makes its tools.
Leaving the block closes its stdin (the 1.x SDK waits 2 s, then SIGTERM, then SIGKILL). Seen here: no signal.

What the adapters do on the way to the model: the ``StructuredTool`` carries our name, description and input schema,
which ``bind_tools`` (``convert_to_openai_tool``) sends unchanged. A result reaches the model as a ``ToolMessage``
whose content is the result's text blocks (each given an ``id`` of LangChain's); an ``isError`` result too, with
``status="error"`` (``handle_tool_errors=True`` by default). ``structuredContent`` would only go into the message's
``artifact``.

``MultiServerMCPClient.get_tools()`` (the adapters' shortest form) keeps no connection: listing the tools and each
call spawn a server of their own, so every call is a session (and a turn) of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import needs

pytest.importorskip("langchain_mcp_adapters", reason="langchain-mcp-adapters needs mcp<2 (see the module docstring)")
needs.module("langchain.agents")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from pydantic import Field

from dsh_todo.harness.persistence.jsonl.backend import JsonlBackend
from dsh_todo.logview import list_sessions
from tests.carriers.mcp.clients.common import (
    ACCEPTED,
    CANONICAL,
    DEADLINE,
    FINAL_TEXT,
    REFUSED,
    TEXT_OF,
    arguments,
    assert_exited,
    native_tool,
    server_command,
    stored_run,
    watch_server,
)

pytestmark = pytest.mark.anyio


class ToolCallingFake(GenericFakeChatModel):
    """``GenericFakeChatModel`` plus ``bind_tools`` as real chat models do it (OpenAI format), recording every
    request: its messages and the tools bound to it."""

    requests: list[tuple[list[BaseMessage], Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.requests.append((list(messages), kwargs.get("tools")))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def call(call_id: str, raw: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "todo_write", "args": arguments(raw), "id": call_id,
                                      "type": "tool_call"}])


def text_blocks(message: ToolMessage) -> list[dict[str, Any]]:
    """A tool message's content blocks without the ``id`` LangChain gives each block."""
    assert isinstance(message.content, list)
    return [{key: value for key, value in block.items() if key != "id"} for block in message.content
            if isinstance(block, dict)]


async def test_an_agent_run_through_one_adapter_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, cwd = tmp_path / "sessions", tmp_path / "project"
    cwd.mkdir()
    command, args = server_command(root)
    model = ToolCallingFake(messages=iter([call("a", ACCEPTED), call("r", REFUSED), AIMessage(FINAL_TEXT)]))
    client = MultiServerMCPClient({"dsh-todo": {"transport": "stdio", "command": command, "args": args,
                                                "cwd": str(cwd)}})
    with watch_server(monkeypatch) as watch, anyio.fail_after(DEADLINE):
        async with client.session("dsh-todo") as session:
            tools = await load_mcp_tools(session)
            agent = create_agent(model, tools)
            state = await agent.ainvoke({"messages": [HumanMessage("Fix the bug")]})
    assert state["messages"][-1].content == FINAL_TEXT
    # What the model was handed on every request: our tool, unchanged, in the provider's (OpenAI) format.
    ours = native_tool()
    assert len(model.requests) == 3
    for _messages, bound in model.requests:
        assert bound == [{"type": "function", "function": ours}]
    # What the model read back: our exact texts, the refusal marked as an error.
    results = {m.tool_call_id: m for m in model.requests[-1][0] if isinstance(m, ToolMessage)}
    assert results["a"].status == "success" and results["r"].status == "error"
    assert text_blocks(results["a"]) == [{"type": "text", "text": TEXT_OF[ACCEPTED]}]
    assert text_blocks(results["r"]) == [{"type": "text", "text": TEXT_OF[REFUSED]}]
    assert results["a"].artifact is None  # no structuredContent
    stored_run(root, watch)


async def test_get_tools_spawns_a_server_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a session, each call is its own connection: one server for the listing and one per call, each
    exiting 0; each call's log is a session of its own with the verdict ``ok``, and the refused call's holds no plan."""
    root, cwd = tmp_path / "sessions", tmp_path / "project"
    cwd.mkdir()
    command, args = server_command(root)
    model = ToolCallingFake(messages=iter([call("a", ACCEPTED), call("r", REFUSED), AIMessage(FINAL_TEXT)]))
    client = MultiServerMCPClient({"dsh-todo": {"transport": "stdio", "command": command, "args": args,
                                                "cwd": str(cwd)}})
    with watch_server(monkeypatch) as watch, anyio.fail_after(DEADLINE):
        agent = create_agent(model, await client.get_tools())
        await agent.ainvoke({"messages": [HumanMessage("Fix the bug")]})
    assert len(watch.processes) == 3
    for process in watch.processes:
        assert_exited(process.returncode, process.pid, str(watch))
    views = sorted(list_sessions(JsonlBackend(root)), key=lambda view: view.plan is None)
    assert [(view.health.describe(), view.plan) for view in views] == [("ok", CANONICAL), ("ok", None)]
