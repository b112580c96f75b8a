"""Codex CLI (``codex exec``, pinned in :mod:`.install`) driving ``dsh-todo mcp`` as the README tells a reader to
configure it, headless, against the scripted model of :mod:`.openai_fake` (the Responses API over SSE).

The config is the README's Codex snippet as written (``uv run --project <this checkout> dsh-todo mcp --root
<root>``, ``required = true``; and once in the README's other form, ``dsh-todo`` found on ``PATH``), after the root
keys choosing the model and before the tables the test adds: the provider (``base_url`` on the fake model) and
what keeps a headless run off the network (``analytics``, which reports to ab.chatgpt.com, and the ``plugins``
feature, which looks up github.com and chatgpt.com).

What Codex 0.171 does to our tool and results on their way to its model:

- It offers MCP tools inside a ``namespace`` tool named ``mcp__<server>`` with the server's ``-`` turned into
  ``_`` (``mcp__dsh_todo``, described ``Tools in the mcp__dsh_todo namespace.``); inside it, our tool keeps its
  name, description and input schema (equal as values), with ``strict: false``. The model's call names the
  namespace beside the tool (``"namespace": "mcp__dsh_todo", "name": "todo_write"``).
- A result reaches the model as two ``input_text`` items: Codex's own ``Wall time: <s> seconds\\nOutput:``, then
  our text block as it is. An ``isError`` result looks the same to the model; Codex prints the call as ``(failed)``.
- Codex checks no schema itself: the refused arguments reach our registry, which answers them.

How Codex ends the server (seen with strace): at the end of the run it sends SIGTERM to the server's process group
and closes its stdin at once (under a millisecond apart, SIGTERM first), then SIGKILL to the process it started
12 to 14 ms later (if it is still there). Under ``uv run`` that process is uv: our server, uv's child, gets
SIGTERM twice (from Codex, and forwarded by uv), outlives the SIGKILL and ends its turn. With ``dsh-todo`` started
directly (the README's other form, the ``installed`` case), the SIGKILL is our server's: it must have written
``turn/end`` and flushed its log within those milliseconds (it does: under strace, 9 ms after the SIGTERM, 3 ms
before the SIGKILL; 5 runs out of 5 did it with both cores kept busy).

Without ``required = true``, Codex sends its first model request without waiting for a server still starting: a
server held back 0.4 s was left out of the turn, silently (no tool offered, exit 0). Hence the snippet's line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.carriers.mcp.agents.common import fake_model, no_server_left, run_cli
from tests.carriers.mcp.agents.conftest import cli
from tests.carriers.mcp.agents.openai_fake import MODEL, answer, response_tools, responses_turns
from tests.carriers.mcp.agents.readme import snippet, uv_environment
from tests.carriers.mcp.clients.common import (
    ACCEPTED,
    FINAL_TEXT,
    REFUSED,
    TEXT_OF,
    native_tool,
    server_command,
    stored_session,
)

KEY = "DSH_TODO_FAKE_KEY"
WALL_TIME = re.compile(r"Wall time: \d+(\.\d+)? seconds\nOutput:")


def config(model_url: str, root: Path, *, installed: bool) -> str:
    """``config.toml``: the model's root keys, the README's snippet, the provider, a quiet run. ``installed`` takes
    the README's other form, ``dsh-todo`` found on ``PATH`` instead of ``uv run``."""
    servers = snippet("Codex (`~/.codex/config.toml`", root)
    if installed:
        servers, count = re.subn(r'^command = "uv"\nargs = \[.*\]$',
                                 f'command = "dsh-todo"\nargs = ["mcp", "--root", "{root}"]', servers, flags=re.M)
        assert count == 1, servers
    return (f'model = "{MODEL}"\nmodel_provider = "fake"\n\n' + servers
            + f'\n[model_providers.fake]\nname = "fake model"\nbase_url = "{model_url}/v1"\nwire_api = "responses"\n'
            + f'env_key = "{KEY}"\n\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n')


def search_path() -> str:
    """``PATH`` with this environment's scripts first, where ``dsh-todo`` is installed."""
    script = Path(server_command(Path("/"))[0])
    return os.pathsep.join([str(script.parent), os.environ.get("PATH", os.defpath)])


def our_namespace(body: Any) -> Any:
    """The ``namespace`` tool Codex put our server's tools in."""
    [space] = [tool for tool in body["tools"] if tool.get("type") == "namespace" and tool["name"] == "mcp__dsh_todo"]
    return space


@pytest.mark.parametrize("installed", [False, True], ids=["uv-run", "installed"])
def test_codex_exec_writes_the_plan_through_the_readme_config(tmp_path: Path, installed: bool) -> None:
    codex = cli("codex")
    uv = {} if installed else uv_environment()
    root, cwd, home = tmp_path / "sessions", tmp_path / "project", tmp_path / "home"
    cwd.mkdir()
    (home / ".codex").mkdir(parents=True)
    with fake_model(answer) as model:
        (home / ".codex" / "config.toml").write_text(config(model.url, root, installed=installed), encoding="utf-8")
        run = run_cli([codex, "exec", "--skip-git-repo-check", "--color", "never", "Fix the bug"], cwd=cwd, home=home,
                      env={"CODEX_HOME": str(home / ".codex"), KEY: "dummy", "PATH": search_path(), **uv})
    why = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert run.returncode == 0, why
    assert run.stdout == f"{FINAL_TEXT}\n", why
    # Codex told the success from the isError result (its own lines, on stderr).
    assert [line for line in run.stderr.splitlines() if line.startswith("mcp: ")] == [
        "mcp: dsh-todo/todo_write started", "mcp: dsh-todo/todo_write (completed)",
        "mcp: dsh-todo/todo_write started", "mcp: dsh-todo/todo_write (failed)"]
    # Three model requests, no other: the accepted call, the refused one, the final text.
    assert [(r.method, r.path) for r in model.requests] == [("POST", "/v1/responses")] * 3
    ours = native_tool()
    for request in model.requests:
        assert our_namespace(request.body) == {
            "type": "namespace", "name": "mcp__dsh_todo", "description": "Tools in the mcp__dsh_todo namespace.",
            "tools": [{"type": "function", "name": "todo_write", "description": ours["description"],
                       "strict": False, "parameters": ours["parameters"]}]}
        assert [name for _, name in response_tools(request.body) if name.endswith("todo_write")] == ["todo_write"]
    # What the model read back: Codex's wall-time line, then our exact text (not JSON, not structuredContent).
    outputs = responses_turns(model.requests[-1].body)
    assert list(outputs) == ["call_0", "call_1"]
    for call_id, arguments in zip(outputs, (ACCEPTED, REFUSED), strict=True):
        timing, text = outputs[call_id]
        assert timing["type"] == "input_text" and WALL_TIME.fullmatch(timing["text"]), timing
        assert text == {"type": "input_text", "text": TEXT_OF[arguments]}
    stored_session(root)
    no_server_left(root)
