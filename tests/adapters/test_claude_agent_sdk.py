"""The Claude Agent SDK adapter, in the SDK's real runtime: ``query`` drives the pinned Claude Code CLI, which talks
to a scripted Anthropic Messages endpoint on 127.0.0.1 and calls our in-process server back through the SDK.

What is asserted is what crossed the wire: the tool as the CLI listed it in its model requests
(``mcp__dsh-todo__todo_write``, our description and schema), the ``tool_result`` blocks the model read back (our
texts, refusals flagged ``is_error``), and the session log each query left. Claude Code answers arguments that are
not JSON itself (``<tool_use_error>InputValidationError: …``), before any tool sees them, so the scenario's ``c3``
never reaches us; it is the one text of the scenario that is not ours.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import needs

needs.module("claude_agent_sdk")

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, query
from mcp.client import Client

from dsh_todo.adapters.claude_agent_sdk import SERVER_NAME, TodoBinding, bind_todo, todo_write_server, tool_name
from tests.adapters.scenario import (
    CANONICAL,
    FINAL_TEXT,
    RAW,
    STEPS,
    TEXT,
    assert_log,
    assert_native_tool,
    hang_on_an_empty_list,
)
from tests.advertised import assert_advertised
from tests.carriers.mcp.agents.anthropic_fake import our_tool, text, tool_names, tool_results, tool_use, tool_uses
from tests.carriers.mcp.agents.common import Answer, FakeModel, Reply, Request, fake_model
from tests.carriers.mcp.agents.conftest import cli
from tests.conftest import plan_json, todo_writes

pytestmark = pytest.mark.anyio  # (about 1-2 s a query on the 2-core machine: not ``slow``)

NAME = "mcp__dsh-todo__todo_write"
DEADLINE = 120
"""Seconds one query (the CLI's start, its model turns, its exit) may take before the test fails."""

NOT_JSON = re.compile(r"<tool_use_error>InputValidationError: mcp__dsh-todo__todo_write was called with input that "
                      r"could not be parsed as JSON\.")
README = Path(__file__).resolve().parents[2] / "README.md"


def script(steps: Sequence[Sequence[str]] = STEPS, raw: dict[str, str] = RAW, *, search: bool = False) -> Answer:
    """The model: each step one response calling our tool with the listed calls, then :data:`FINAL_TEXT`.

    Requests that do not offer our tool are the CLI's side requests (a title, a quota probe) and get a short text;
    with ``search`` (tools deferred behind ``ToolSearch``), such a turn first loads ours as a model must. A prompt
    naming ``run-X`` gets call ids prefixed ``X-`` (the last such prompt of the conversation counts), so concurrent
    queries on one fake, and successive queries of one client, each play the steps with ids of their own."""

    def answer(request: Request) -> Reply:
        path = request.path.split("?")[0]
        if path.endswith("/v1/messages/count_tokens"):
            return Reply(body={"input_tokens": 10})
        body = request.body
        tool = our_tool(body)
        if tool is None and search and "ToolSearch" in tool_names(body):
            return tool_use(body, "ToolSearch", json.dumps({"query": f"select:{NAME}"}), "toolu_search")
        if tool is None:
            return text(body, "Planning")
        runs = re.findall(r"run-(\w)", json.dumps(body["messages"]))
        prefix = f"{runs[-1]}-" if runs else ""
        done = len([result for result in tool_results(body) if result["tool_use_id"].startswith(prefix)])
        seen = 0
        for step in steps:
            if done == seen:
                return tool_uses(body, [(tool["name"], raw[cid], prefix + cid) for cid in step])
            seen += len(step)
        return text(body, FINAL_TEXT)

    return answer


def environment(model: FakeModel, home: Path, *, deferred: bool = False) -> dict[str, str]:
    """The CLI pointed at the fake model, with a home of its own, quiet; MCP tools listed from the first request,
    or deferred behind ``ToolSearch`` (Claude Code's default)."""
    return {
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "IS_SANDBOX": "1",  # running as root (CI containers)
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        **({} if deferred else {"ENABLE_TOOL_SEARCH": "false"}),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


class Rig:
    """Where queries run: the pinned CLI, a fake model, a home and a project folder of the test's own."""

    def __init__(self, tmp_path: Path, model: FakeModel) -> None:
        self.claude = cli("claude")
        self.model = model
        self.home = tmp_path / "home"
        self.cwd = tmp_path / "project"
        self.home.mkdir(exist_ok=True)
        self.cwd.mkdir(exist_ok=True)

    def options(self, todos: TodoBinding, *, deferred: bool = False) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(mcp_servers={SERVER_NAME: todo_write_server(todos)}, allowed_tools=[tool_name()],
                                  cli_path=self.claude, cwd=self.cwd,
                                  env=environment(self.model, self.home, deferred=deferred))

    async def run(self, todos: TodoBinding, prompt: str = "Fix the bug", *, deferred: bool = False) -> str | None:
        """One query as one turn of ``todos``' session; its result text."""
        result = None
        async with asyncio.timeout(DEADLINE), todos.turn():
            async for message in query(prompt=prompt, options=self.options(todos, deferred=deferred)):
                if isinstance(message, ResultMessage):
                    result = message.result
        return result


@contextmanager
def rig(tmp_path: Path, answer: Answer) -> Iterator[Rig]:
    with fake_model(answer) as model:
        yield Rig(tmp_path, model)


def model_turns(model: FakeModel) -> list[Request]:
    """The requests that offered our tool: the agent's turns (side requests left out)."""
    return [request for request in model.requests if our_tool(request.body) is not None]


def read_back(request: Request) -> dict[str, tuple[str, bool]]:
    """What the model read back from each call of our tool, by call id: the text and the ``is_error`` flag."""
    found = {}
    for result in tool_results(request.body):
        content = result["content"]
        if not isinstance(content, str):
            [block] = content
            assert block["type"] == "text", block
            content = block["text"]
        found[result["tool_use_id"]] = (content, result.get("is_error", False))
    return found


@pytest.fixture
def todos() -> Any:
    with bind_todo() as binding:
        yield binding


@pytest.mark.parametrize("deferred", [False, True], ids=["listed", "tool-search"])
async def test_a_query_reads_the_contract_texts_and_is_one_turn(todos: TodoBinding, tmp_path: Path,
                                                                deferred: bool) -> None:
    with rig(tmp_path, script(search=deferred)) as run:
        assert await run.run(todos, deferred=deferred) == FINAL_TEXT
    turns = model_turns(run.model)
    assert len(turns) == len(STEPS) + 1
    # Our tool as the CLI offered it on every turn: its prefixed name, our description and schema (same key order).
    for request in turns:
        offered = our_tool(request.body)
        assert offered is not None
        assert offered.pop("defer_loading", False) is deferred
        assert list(offered) == ["name", "description", "input_schema"]
        assert offered["name"] == NAME
        assert_native_tool(todos, offered["name"].removeprefix("mcp__dsh-todo__"), offered["description"],
                           offered["input_schema"])
    # What the model read back: our exact texts, refusals flagged; the text that is not JSON, the CLI's own answer.
    seen = read_back(turns[-1])
    assert list(seen) == ["c1", "c2", "c3", "c4"]
    assert NOT_JSON.match(seen.pop("c3")[0])
    assert seen == {cid: (TEXT[cid], cid != "c1") for cid in ("c1", "c2", "c4")}
    assert_log(todos, answered_by_the_framework=("c3",))


async def test_each_query_is_a_turn_and_the_plan_survives_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    second = '{"todos":[{"content":"Read the issue","status":"completed"},{"content":"Ship","status":"in_progress"}]}'
    with rig(tmp_path, script([["c1"], ["c4"]], {**RAW, "c5": second})) as run:
        with bind_todo(root=root, session="claude", cwd=str(run.cwd)) as todos:
            assert await run.run(todos) == FINAL_TEXT
            log = todos.ctx.session_persistence.locate("claude")
            assert log is not None
        assert plan_json(log) == CANONICAL  # the refused c4 left the accepted list standing
        with bind_todo(root=root, session="claude") as todos:  # a new process would do the same
            assert todos.plan == CANONICAL
    with rig(tmp_path, script([["c5"]], {**RAW, "c5": second})) as run, \
            bind_todo(root=root, session="claude") as todos:
        assert await run.run(todos, "Go on") == FINAL_TEXT
        assert read_back(model_turns(run.model)[-1]) == {
            "c5": ("Updated todo list: 0 pending, 1 in progress, 1 completed.", False)}
        starts = [e["data"]["turn"] for e in todos.session.events if e["type"] == "turn/start"]
        ends = [e["data"]["reason"] for e in todos.session.events if e["type"] == "turn/end"]
        assert starts == [1, 2] and ends == [{"kind": "completed"}] * 2
    expected = [{"content": "Read the issue", "status": "completed"}, {"content": "Ship", "status": "in_progress"}]
    assert plan_json(log) == expected


async def test_a_cancelled_query_closes_its_turn_aborted_and_keeps_the_plan(todos: TodoBinding,
                                                                            tmp_path: Path) -> None:
    """The query's task is cancelled while its second call runs: that call is answered ``Error: tool call
    aborted``, the turn ends ``aborted``, nothing is written after it, and the plan of the first call stands."""
    started = hang_on_an_empty_list(todos)
    with rig(tmp_path, script([["c1"], ["c5"]], {**RAW, "c5": '{"todos":[]}'})) as run:
        task = asyncio.ensure_future(run.run(todos))
        await asyncio.wait_for(started.wait(), DEADLINE)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        events = list(todos.session.events)
        await asyncio.sleep(1)  # whatever the SDK still winds down writes nothing more
        assert list(todos.session.events) == events
    kinds = [event["type"] for event in events]
    assert kinds[-6:] == ["step/start", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"]
    assert events[-4]["data"]["callId"] == "c5"
    assert_advertised(events[-5], events[-4])
    assert events[-3]["data"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert events[-3]["data"]["message"]["content"] == [{"type": "text", "text":
                                                                       "Error: tool call aborted"}]
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert kinds.count("turn/start") == kinds.count("turn/end") == 1
    assert todos.plan == CANONICAL


async def test_concurrent_queries_in_one_turn_never_interleave_their_calls(todos: TodoBinding,
                                                                           tmp_path: Path) -> None:
    """Two CLIs at once on one binding: their calls are serialised (each alone in its step) in the one turn."""
    with rig(tmp_path, script([["c1"], ["c2"]])) as run:
        async with todos.turn():
            results = await asyncio.gather(run.run(todos, "run-A"), run.run(todos, "run-B"))
    assert results == [FINAL_TEXT, FINAL_TEXT]
    kinds = [event["type"] for event in todos.session.events]
    accepted = ["step/start", "assistant/message", "tool/call", "todo/write", "tool/result", "step/end"]
    refused = ["step/start", "assistant/message", "tool/call", "tool/result", "step/end"]
    assert kinds[0] == "turn/start" and kinds[-1] == "turn/end" and kinds.count("turn/start") == 1
    assert sorted(kinds[1:-1]) == sorted(accepted * 2 + refused * 2)
    body = kinds[1:-1]
    while body:  # each call's events are contiguous, in DSH's order
        size = len(accepted) if body[3] == "todo/write" else len(refused)
        assert body[:size] in (accepted, refused)
        body = body[size:]
    calls = sorted(e["data"]["callId"] for e in todos.session.events if e["type"] == "tool/call")
    assert calls == ["A-c1", "A-c2", "B-c1", "B-c2"]
    assert [e["data"]["step"] for e in todos.session.events if e["type"] == "tool/call"] == [1, 2, 3, 4]


async def test_each_query_of_a_client_is_a_turn(todos: TodoBinding, tmp_path: Path) -> None:
    """``ClaudeSDKClient`` keeps one CLI for a conversation: ``todos.turn()`` around each query and its response
    makes each one turn, and the second turn's accepted call is its own plan."""
    with rig(tmp_path, script([["c1"], ["c2"]])) as run:
        async with asyncio.timeout(DEADLINE), ClaudeSDKClient(options=run.options(todos)) as client:
            for prompt in ("run-A", "run-B"):
                async with todos.turn():
                    await client.query(prompt)
                    results = [message.result async for message in client.receive_response()
                               if isinstance(message, ResultMessage)]
                    assert results == [FINAL_TEXT]
    calls = [(e["data"]["turn"], e["data"]["callId"]) for e in todos.session.events if e["type"] == "tool/call"]
    assert calls == [(1, "A-c1"), (1, "A-c2"), (2, "B-c1"), (2, "B-c2")]
    ends = [e["data"] for e in todos.session.events if e["type"] == "turn/end"]
    assert ends == [{"turn": 1, "reason": {"kind": "completed"}}, {"turn": 2, "reason": {"kind": "completed"}}]
    assert todo_writes(todos.session) == [CANONICAL, CANONICAL]
    assert todos.plan == CANONICAL


def test_a_second_binding_of_a_held_session_is_refused(tmp_path: Path) -> None:
    """Across processes (or runtimes) one persisted session has one writer: a second binding is refused."""
    from dsh_todo.harness.persistence import SessionLockedError

    root = tmp_path / "sessions"
    with bind_todo(root=root, session="claude", cwd=str(tmp_path)) as todos:
        assert todos.call_sync(RAW["c1"]).text == TEXT["c1"]
        with pytest.raises(SessionLockedError):
            bind_todo(root=root, session="claude")


async def test_the_server_answers_what_the_cli_never_sends(todos: TodoBinding) -> None:
    """Through an MCP client of its own: arguments left out read as ``{}`` (the reference's rule), an unknown tool
    name gets the registry's words; neither reaches the log as a write."""
    server = todo_write_server(todos, name="plans")
    assert server["type"] == "sdk" and server["name"] == "plans"
    assert tool_name("plans") == "mcp__plans__todo_write"
    async with Client(server["instance"]) as client:
        [listed] = (await client.list_tools()).tools
        assert_native_tool(todos, listed.name, listed.description or "", listed.input_schema)
        missing = await client.call_tool("todo_write", None)
        unknown = await client.call_tool("other", {})
    assert [(block.text, missing.is_error) for block in missing.content] == [  # type: ignore[union-attr]
        ('Error: invalid arguments: missing required property "todos"', True)]
    assert [(block.text, unknown.is_error) for block in unknown.content] == [  # type: ignore[union-attr]
        ('Error: unknown tool "other"', True)]
    assert todo_writes(todos.session) == []


def _readme_example() -> tuple[str, str]:
    """The README's Claude Agent SDK example (a ``py`` block: it needs the CLI and a model, so the snippet test
    leaves it out) and the ``text`` block after it."""
    found = re.search(r"```py\n(.*?)```\n\n```text\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert found is not None, "the README has no Claude Agent SDK example"
    return found.group(1), found.group(2)


def test_the_readme_example_runs_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The example as printed, with the SDK's bundled CLI (what a user's install runs) pointed at the fake model."""
    import claude_agent_sdk

    if not (Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude").is_file():
        needs.unavailable("this claude-agent-sdk install has no bundled Claude Code CLI (a source build)")
    code, expected = _readme_example()
    assert "from dsh_todo.adapters.claude_agent_sdk import" in code
    one = ('{"todos":[{"content":"Read the issue","status":"in_progress"},'
           '{"content":"Write the fix","status":"pending"}]}')
    with fake_model(script([["c1"]], {"c1": one})) as model:
        home = tmp_path / "home"
        home.mkdir()
        for key, value in environment(model, home).items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(tmp_path)
        exec(compile(code, f"{README.name} Claude Agent SDK example", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out == expected
    assert len(model_turns(model)) == 2
