"""``dsh-todo acp`` without ``--script`` talks to its model as DSH 0.2 does: Anthropic Messages at
``$DEEPSEEK_BASE_URL`` (the scripted Messages endpoint of the Claude Code test, on 127.0.0.1), the editor seeing the
plan the model wrote."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import needs

needs.module("acp")

from acp.exceptions import RequestError
from acp.helpers import text_block
from acp.stdio import spawn_agent_process

from tests.carriers.mcp.agents.anthropic_fake import script, tool_results
from tests.carriers.mcp.agents.common import fake_model

pytestmark = pytest.mark.anyio

ACCEPTED = '{"todos": [{"content": "read the code", "status": "in_progress"}]}'


class Client:
    """Keeps the ``session/update`` payloads it is sent; refuses everything else."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")


async def test_acp_prompts_a_messages_endpoint(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("DEEPSEEK_", "DSH_TODO_"))}
    client = Client()
    with fake_model(script([ACCEPTED], "DONE")) as fake:
        env.update(DEEPSEEK_BASE_URL=fake.url, DEEPSEEK_API_KEY="x")
        argv = ["-m", "dsh_todo.cli", "acp", "--root", str(tmp_path / "sessions")]
        async with asyncio.timeout(60), spawn_agent_process(client, sys.executable, *argv, env=env,
                                                            cwd=tmp_path) as (conn, _process):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("plan the fix")])
    assert response.stop_reason == "end_turn"
    assert [(r.path, r.headers["anthropic-version"]) for r in fake.requests] == [("/v1/messages", "2023-06-01")] * 2
    assert tool_results(fake.requests[1].body) == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "is_error": False,
         "content": [{"type": "text", "text": "Updated todo list: 0 pending, 1 in progress, 0 completed."}]}]
    assert {"sessionUpdate": "plan", "entries": [{"content": "read the code", "priority": "medium",
                                                  "status": "in_progress"}]} in client.updates
