"""``dsh-todo run --model`` as a person runs it (a subprocess), against a scripted model endpoint on 127.0.0.1:
the Anthropic Messages wire DSH 0.2 speaks by default, OpenAI chat completions when chosen.

The environment is the one DSH 0.2 reads (``DEEPSEEK_BASE_URL`` at the endpoint, any ``DEEPSEEK_API_KEY``); the
endpoint is the Claude Code test's scripted Messages server: our tool called with an accepted list, then with a
status the schema refuses, then a final text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.jsonutil import loads
from dsh_todo.logview import read_session
from tests.carriers.mcp.agents.anthropic_fake import script, tool_results
from tests.carriers.mcp.agents.common import FakeModel, Reply, Request, fake_model

ACCEPTED = ('{"todos": [{"content": "read the code", "status": "completed"}, '
            '{"content": " write the fix ", "status": "in_progress"}]}')
REFUSED = '{"todos": [{"content": "write the fix", "status": "done"}]}'
UPDATED = "Updated todo list: 0 pending, 1 in progress, 1 completed."
REFUSAL = 'Error: invalid arguments: "todos[0].status" must be one of ["pending","in_progress","completed"]'
PLAN = [{"content": "read the code", "status": "completed"}, {"content": "write the fix", "status": "in_progress"}]


def dsh_todo(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command, with the model's variables only as given (none of the machine's own)."""
    base = {name: value for name, value in os.environ.items()
            if not name.startswith(("DEEPSEEK_", "DSH_TODO_", "ANTHROPIC_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "dsh_todo.cli", *argv], cwd=cwd, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def endpoint(fake: FakeModel, base: str = "") -> dict[str, str]:
    return {"DEEPSEEK_BASE_URL": fake.url + base, "DEEPSEEK_API_KEY": "x"}


def run(tmp_path: Path, fake: FakeModel, *options: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return dsh_todo("run", "--root", str(tmp_path / "sessions"), "--session", "s1", *options, "plan the fix",
                    cwd=tmp_path, env={**endpoint(fake), **(env or {})})


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def last_turn_end(tmp_path: Path) -> Any:
    view = read_session("s1", root=tmp_path / "sessions")
    return [e["data"]["reason"] for e in view.events if e["type"] == "turn/end"][-1]


def test_run_model_speaks_messages_to_deepseek_base_url(tmp_path: Path) -> None:
    with fake_model(script([ACCEPTED, REFUSED], "Plan recorded.")) as fake:
        done = run(tmp_path, fake, "--model", "deepseek-flash")
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert f"model: deepseek-official/deepseek-flash over Anthropic Messages at {fake.url}" in done.stderr.splitlines()
    assert [(r.method, r.path) for r in fake.requests] == [("POST", "/v1/messages")] * 3
    assert {(r.headers["x-api-key"], r.headers["anthropic-version"]) for r in fake.requests} == {("x", "2023-06-01")}
    first, second, third = (r.body for r in fake.requests)
    assert first["stream"] is True
    schema = loads(dsh_todo("schema", cwd=tmp_path).stdout)["function"]  # the tool exactly as we define it
    assert first["tools"] == [{"name": "todo_write", "description": schema["description"],
                               "input_schema": schema["parameters"]}]
    assert tool_results(second) == [{"type": "tool_result", "tool_use_id": "toolu_01",
                                     "content": [{"type": "text", "text": UPDATED}], "is_error": False}]
    assert tool_results(third)[-1] == {"type": "tool_result", "tool_use_id": "toolu_02",
                                       "content": [{"type": "text", "text": REFUSAL}], "is_error": True}
    assert last_turn_end(tmp_path) == {"kind": "completed"}
    plan = dsh_todo("plan", "--json", "--root", str(tmp_path / "sessions"), "s1", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert loads(plan.stdout) == PLAN


def refusing(status: int, kind: str, message: str) -> Any:
    def answer(request: Request) -> Reply:
        return Reply(status, {"type": "error", "error": {"type": kind, "message": message}},
                     headers={"retry-after-ms": "1"})  # the client's retries of a 5xx, without the wait
    return answer


@pytest.mark.parametrize(("status", "kind", "message"), [(401, "authentication_error", "Authentication Fails"),
                                                         (500, "api_error", "Internal server error")])
def test_an_http_failure_is_one_line_and_the_turn_ends_error(tmp_path: Path, status: int, kind: str,
                                                             message: str) -> None:
    with fake_model(refusing(status, kind, message)) as fake:
        done = run(tmp_path, fake, "--model", "deepseek-flash")
    no_traceback(done)
    assert done.returncode == 1
    line = f"deepseek-flash: HTTP {status}: {message}"
    assert done.stderr.splitlines()[-1] == f"turn ended: error {line}"
    assert last_turn_end(tmp_path) == {"kind": "error", "error": {"name": "ModelError", "message": line}}
    assert len(fake.requests) == (1 if status == 401 else 3)  # a 5xx is retried twice, a refused key never


def chat_completion(request: Request) -> Reply:
    """A whole (unstreamed) chat completion: the final text at once."""
    if request.method != "POST" or request.path != "/v1/chat/completions":
        return Reply(404, {"error": {"message": f"no {request.method} {request.path}"}})
    return Reply(body={"id": "c", "object": "chat.completion", "created": 0, "model": request.body["model"],
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": "Nothing to plan."}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}})


@pytest.mark.parametrize("how", ["option", "variable"])
def test_the_openai_wire_still_posts_chat_completions(tmp_path: Path, how: str) -> None:
    choice = (["--wire", "openai"], {}) if how == "option" else ([], {"DSH_TODO_WIRE": "openai"})
    with fake_model(chat_completion) as fake:
        done = run(tmp_path, fake, *choice[0], env={**endpoint(fake, "/v1"), **choice[1]})
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert (f"model: openai-compatible/deepseek-v4-flash over OpenAI chat completions at {fake.url}/v1"
            in done.stderr.splitlines())
    [request] = fake.requests
    assert (request.path, request.headers["authorization"]) == ("/v1/chat/completions", "Bearer x")
    assert request.body["tools"][0]["type"] == "function"


def test_an_unknown_wire_is_refused_in_one_line(tmp_path: Path) -> None:
    done = dsh_todo("run", "--root", str(tmp_path / "sessions"), "hi", cwd=tmp_path,
                    env={"DEEPSEEK_API_KEY": "x", "DSH_TODO_WIRE": "grpc"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "dsh-todo run: unknown model wire 'grpc' (--wire or DSH_TODO_WIRE): use messages or openai"]
    assert not (tmp_path / "sessions").exists()
