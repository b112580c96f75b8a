"""Codex CLI (``codex exec``, pinned in :mod:`.install`) driving ``dsh-todo mcp`` as the README tells a reader to
configure it, headless, against the scripted model of :mod:`.openai_fake` (the Responses API over SSE).

The config is the README's Codex snippet as written (``uv run --project <this checkout> dsh-todo mcp --root
<root>``, ``required = true``), after the root keys choosing the model and before the tables the test adds: the
provider (``base_url`` on the fake model) and what keeps a headless run off the network (``analytics``, which
reports to ab.chatgpt.com, and the ``plugins`` feature, which looks up github.com and chatgpt.com).

What Codex 0.171 does to our tool and results on their way to its model:

- It offers MCP tools inside a ``namespace`` tool named ``mcp__<server>`` with the server's ``-`` turned into
  ``_`` (``mcp__dsh_todo``, described ``Tools in the mcp__dsh_todo namespace.``); inside it, our tool keeps its
  name, description and input schema (equal as values), with ``strict: false``. The model's call names the
  namespace beside the tool (``"namespace": "mcp__dsh_todo", "name": "todo_write"``).
- A result reaches the model as two ``input_text`` items: Codex's own ``Wall time: <s> seconds\\nOutput:``, then
  our text block as it is. An ``isError`` result looks the same to the model; Codex prints the call as ``(failed)``.
- Codex checks no schema itself: the refused arguments reach our registry, which answers them.

How Codex ends the server (seen with strace): at the end of the run it sends SIGTERM and closes stdin at once
(under a millisecond apart, SIGTERM first). Without ``required = true``, Codex sends its first model request
without waiting for a server still starting (a server held back 0.4 s was left out of the turn, silently: no tool,
exit 0).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.carriers.mcp.agents.common import fake_model, no_server_left, run_cli
from tests.carriers.mcp.agents.conftest import cli
from tests.carriers.mcp.agents.openai_fake import MODEL, answer, response_tools, responses_turns
from tests.carriers.mcp.agents.readme import snippet, uv
from tests.carriers.mcp.clients.common import ACCEPTED, FINAL_TEXT, REFUSED, TEXT_OF, native_tool, stored_session

KEY = "DSH_TODO_FAKE_KEY"
WALL_TIME = re.compile(r"Wall time: \d+(\.\d+)? seconds\nOutput:")


def config(model_url: str, root: Path) -> str:
    """``config.toml``: the model's root keys, the README's snippet as written, the provider, a quiet run."""
    return (f'model = "{MODEL}"\nmodel_provider = "fake"\n\n'
            + snippet("Codex (`~/.codex/config.toml`", root)
            + f'\n[model_providers.fake]\nname = "fake model"\nbase_url = "{model_url}/v1"\nwire_api = "responses"\n'
            + f'env_key = "{KEY}"\n\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n')


def our_namespace(body: Any) -> Any:
    """The ``namespace`` tool Codex put our server's tools in."""
    [space] = [tool for tool in body["tools"] if tool.get("type") == "namespace" and tool["name"] == "mcp__dsh_todo"]
    return space


def test_codex_exec_writes_the_plan_through_the_readme_config(tmp_path: Path) -> None:
    codex = cli("codex")
    uv()
    root, cwd, home = tmp_path / "sessions", tmp_path / "project", tmp_path / "home"
    cwd.mkdir()
    (home / ".codex").mkdir(parents=True)
    with fake_model(answer) as model:
        (home / ".codex" / "config.toml").write_text(config(model.url, root), encoding="utf-8")
        run = run_cli([codex, "exec", "--skip-git-repo-check", "--color", "never", "Fix the bug"], cwd=cwd, home=home,
                      env={"CODEX_HOME": str(home / ".codex"), KEY: "dummy"})
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
