"""``todo_write`` for Anthropic's Claude Agent SDK (``pip install 'dsh-todo[claude-agent-sdk]'``).

:func:`todo_write_server` gives an in-process SDK MCP server for ``ClaudeAgentOptions(mcp_servers={...})``. The SDK
drives the Claude Code CLI, which lists the tool to its model as ``mcp__<server>__todo_write`` (:func:`tool_name`)
with our description and input schema, and sends each call back to this process, where :class:`TodoBinding` answers
it: the model reads the registry's text, a refusal flagged ``is_error``. Make each ``query`` (or each
``ClaudeSDKClient`` query and its response) one DSH turn with ``async with todos.turn():`` around it.

Why not ``create_sdk_mcp_server`` with ``@tool``: the server it builds checks the arguments against the input
schema (``jsonschema``) before the handler runs and answers a bad call in its own words (``Input validation error:
'doing' is not one of …``), so the model would never read the contract's ``Error: invalid arguments: …`` line. The
SDK takes any ``mcp.server.Server`` instead (``McpSdkServerConfig(type="sdk", name=…, instance=…)``, its documented
way to bring one's own server), so this module builds a low-level one whose ``tools/call`` hands the arguments to
the binding untouched. It is written against mcp 2's low-level server, which is why the extra installs ``mcp`` too.

Claude Code sends each call's ``tool_use`` id in the request's ``_meta`` (``claudecode/toolUseId``); it becomes the
``tool/call`` callId in our log, so the log and the model's transcript name a call alike.
"""

from __future__ import annotations

from typing import Any, Final

from dsh_todo.adapters.common import TodoBinding, TurnScope, bind_todo, standing_plan
from dsh_todo.extras import missing

try:
    import mcp.types as types
    from claude_agent_sdk import McpSdkServerConfig
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("claude-agent-sdk") from exc

__all__ = ["SERVER_NAME", "TodoBinding", "TurnScope", "bind_todo", "standing_plan", "todo_write_server", "tool_name"]

SERVER_NAME: Final = "dsh-todo"
"""The server's default name: the key under ``mcp_servers`` and the middle of the tool's name as the model sees it."""

TOOL_USE_ID: Final = "claudecode/toolUseId"
"""The ``_meta`` key under which Claude Code passes the model's ``tool_use`` id with a ``tools/call``."""


def tool_name(server: str = SERVER_NAME) -> str:
    """The tool's name as Claude Code shows it to the model, and as ``allowed_tools`` must name it."""
    return f"mcp__{server}__todo_write"


def _tool_use_id(params: types.CallToolRequestParams) -> str | None:
    value = (params.meta or {}).get(TOOL_USE_ID)
    return value if isinstance(value, str) else None


def todo_write_server(binding: TodoBinding, *, name: str = SERVER_NAME) -> McpSdkServerConfig:
    """An in-process SDK MCP server offering ``todo_write``, whose calls land on ``binding``'s session.

    Pass it as ``ClaudeAgentOptions(mcp_servers={name: server}, allowed_tools=[tool_name(name)])`` (the same
    ``name`` both times: Claude Code names the tool after the ``mcp_servers`` key).
    """
    listing = types.ListToolsResult(tools=[types.Tool(name=binding.name, description=binding.description,
                                                      input_schema=binding.parameters)])

    async def list_tools(_ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None,
                         ) -> types.ListToolsResult:
        return listing

    async def call_tool(_ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        call_id = _tool_use_id(params)
        if params.name != binding.name:
            unknown = types.TextContent(type="text", text=f'Error: unknown tool "{params.name}"')
            return types.CallToolResult(content=[unknown], is_error=True)
        if params.arguments is None:  # left out: the reference's rule reads empty text as {}
            result = await binding.call("", call_id=call_id)
        else:
            result = await binding.call_value(params.arguments, call_id=call_id)
        blocks: list[types.ContentBlock] = [types.TextContent(type="text", text=block["text"])
                                            for block in result.content]
        return types.CallToolResult(content=blocks, is_error=result.is_error)

    server: Server[Any] = Server(name, on_list_tools=list_tools, on_call_tool=call_tool)
    return McpSdkServerConfig(type="sdk", name=name, instance=server)
