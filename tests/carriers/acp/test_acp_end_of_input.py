"""``dsh-todo acp`` at the end of its input: every request read is answered, once, before the agent exits (issue 34
item 3). Requests come from a regular file or a pipe the client closes right after writing them, the way a script or
a shell drives the agent; the answers it needs must still arrive."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import needs

needs.module("acp")

from acp.helpers import text_block

from dsh_todo.carriers.acp.agent import TodoAgent
from dsh_todo.harness.llm import ModelReply, ScriptedModel, ToolCallRequest
from dsh_todo.jsonutil import dumps
from dsh_todo.standard import open_runtime
from tests.carriers.acp.test_acp_agent import RAW_TODOS, SCRIPT, GatedModel, Written, agent_argv, rpc_line

pytestmark = pytest.mark.anyio

RUNS = 3
"""How many times each way of ending the input is tried: the loss depended on timing."""


def stored_session(root: Path, cwd: Path) -> str:
    """A session with one finished turn (a plan written) under ``root``, made in process; its id."""

    async def make() -> str:
        model = ScriptedModel([
            ModelReply("", [ToolCallRequest("c1", "todo_write", dumps({"todos": RAW_TODOS}))], "tool_calls"),
            ModelReply("DONE")])
        ctx = open_runtime(root)
        try:
            agent = TodoAgent(ctx, model)
            session_id = (await agent.new_session(cwd=str(cwd))).session_id
            await agent.prompt(session_id=session_id, prompt=[text_block("plan the fix")])
            return session_id
        finally:
            ctx.dispose()

    return asyncio.run(make())


def load_then_prompt(session_id: str, cwd: Path) -> bytes:
    return b"".join([rpc_line(0, "initialize", {"protocolVersion": 1}),
                     rpc_line(1, "session/load", {"cwd": str(cwd), "sessionId": session_id, "mcpServers": []}),
                     rpc_line(2, "session/prompt", {"sessionId": session_id,
                                                    "prompt": [{"type": "text", "text": "go on"}]})])


def answers_of(stdout: bytes) -> dict[Any, list[dict[str, Any]]]:
    """The responses on stdout by id (every answer to an id, to see that there is exactly one)."""
    answers: dict[Any, list[dict[str, Any]]] = {}
    for line in stdout.splitlines():
        message = json.loads(line)
        if "method" not in message:
            answers.setdefault(message["id"], []).append(message)
    return answers


def turns_on_disk(root: Path, session_id: str) -> list[str]:
    ctx = open_runtime(root)
    try:
        events = ctx.session_persistence.read(session_id).events
    finally:
        ctx.dispose()
    return [event["data"]["reason"]["kind"] for event in events if event["type"] == "turn/end"]


def assert_all_answered(result: subprocess.CompletedProcess[bytes]) -> None:
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines()[1:] == []  # the banner only: no traceback
    answers = answers_of(result.stdout)
    assert sorted(answers) == [0, 1, 2]
    assert [len(each) for each in answers.values()] == [1, 1, 1]
    assert answers[1][0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert answers[2][0] == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}


def run_agent_process(tmp_path: Path, stdin: Any = None,
                      data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "script.json"
    script.write_text(dumps(SCRIPT))
    return subprocess.run([sys.executable, *agent_argv(script, tmp_path / "sessions")], stdin=stdin, input=data,
                          capture_output=True, cwd=tmp_path, timeout=60)


def test_requests_from_a_file_are_served_in_order_and_all_answered(tmp_path: Path) -> None:
    """Repro (issue 34 item 3): ``dsh-todo acp --script S --root R < requests.jsonl`` with ``initialize``,
    ``session/load`` and ``session/prompt`` for a stored session: the load was answered ``-32603 Connection closed``
    with a traceback on stderr (its replay was sent after the connection had ended), and the prompt ``unknown
    session`` (it ran before the load had finished). Now the prompt waits for the load, both are answered, the turn
    is on disk, and stderr holds the banner only."""
    root = tmp_path / "sessions"
    session_id = stored_session(root, tmp_path)
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(load_then_prompt(session_id, tmp_path))
    for run in range(RUNS):
        with requests.open("rb") as stdin:
            assert_all_answered(run_agent_process(tmp_path, stdin=stdin))
        assert turns_on_disk(root, session_id) == ["completed"] * (run + 2)


def test_requests_through_a_pipe_closed_at_once_are_all_answered(tmp_path: Path) -> None:
    """Repro (issue 34 item 3): the same requests through a pipe the client closes right after writing them: the
    prompt ran and its turn was logged ``completed``, but its answer was never written, and five tracebacks reached
    stderr. Now every request is answered before the agent exits."""
    root = tmp_path / "sessions"
    session_id = stored_session(root, tmp_path)
    for run in range(RUNS):
        assert_all_answered(run_agent_process(tmp_path, data=load_then_prompt(session_id, tmp_path)))
        assert turns_on_disk(root, session_id) == ["completed"] * (run + 2)


async def test_a_prompt_still_running_past_the_drain_time_is_answered_with_an_error_once(tmp_path: Path) -> None:
    """Input ends while a prompt waits on a model that never answers: after the drain time the prompt is answered
    with an error (exactly once: its own answer never follows), its turn ends ``aborted`` on disk, and the
    connection ends."""
    from acp.core import run_agent

    from dsh_todo.carriers.acp.lines import LineTransport

    model = GatedModel()
    ctx = open_runtime(tmp_path / "sessions")
    try:
        agent = TodoAgent(ctx, model)
        reader = asyncio.StreamReader()
        written = Written()
        reader.feed_data(rpc_line(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        serving = asyncio.create_task(run_agent(agent, input_stream=LineTransport(  # type: ignore[arg-type]
            reader, written, drain_seconds=0.2)))
        for _ in range(200):
            if written.lines:
                break
            await asyncio.sleep(0.01)
        session_id = written.lines[0]["result"]["sessionId"]
        reader.feed_data(rpc_line(2, "session/prompt", {"sessionId": session_id,
                                                        "prompt": [{"type": "text", "text": "go"}]}))
        reader.feed_eof()
        await asyncio.wait_for(model.entered.wait(), 10)
        await asyncio.wait_for(serving, 10)
        model.release.set()
        await asyncio.sleep(0.1)
        answers = [line for line in written.lines if "method" not in line]
        assert answers[1:] == [{"jsonrpc": "2.0", "id": 2, "error": {
            "code": -32603, "message": "Internal error",
            "data": {"details": "the input ended and the answer was not ready within 0.2 s"}}}]
        stored = ctx.session_persistence.read(session_id)
        assert stored.events[-1]["type"] == "turn/end"
        assert stored.events[-1]["data"]["reason"]["kind"] == "aborted"
    finally:
        ctx.dispose()


class Losable(Written):
    """A writer whose reader can go away, as stdout's can."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = asyncio.Event()

    def lose(self) -> None:
        self.lost = True
        self.gone.set()

    async def closed(self) -> None:
        await self.gone.wait()


async def test_stdout_lost_while_answers_are_awaited_ends_the_wait(tmp_path: Path) -> None:
    """Input has ended and a prompt is still running when the client closes stdout too: nobody can read an answer any
    more, so the connection ends then, long before the drain time, and the turn ends ``aborted``."""
    from acp.core import run_agent

    from dsh_todo.carriers.acp.lines import LineTransport

    model = GatedModel()
    ctx = open_runtime(tmp_path / "sessions")
    try:
        agent = TodoAgent(ctx, model)
        session_id = (await agent.new_session(cwd=str(tmp_path))).session_id
        reader = asyncio.StreamReader()
        written = Losable()
        reader.feed_data(rpc_line(2, "session/prompt", {"sessionId": session_id,
                                                        "prompt": [{"type": "text", "text": "go"}]}))
        reader.feed_eof()
        serving = asyncio.create_task(run_agent(agent, input_stream=LineTransport(  # type: ignore[arg-type]
            reader, written, drain_seconds=3600)))
        await asyncio.wait_for(model.entered.wait(), 10)
        assert not serving.done()
        written.lose()
        await asyncio.wait_for(serving, 10)
        stored = ctx.session_persistence.read(session_id)
        assert stored.events[-1]["type"] == "turn/end"
        assert stored.events[-1]["data"]["reason"]["kind"] == "aborted"
    finally:
        ctx.dispose()
