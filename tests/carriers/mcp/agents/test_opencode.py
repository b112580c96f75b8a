"""opencode (``opencode run``, pinned in :mod:`.install`) driving ``dsh-todo mcp`` as the README tells a reader to
configure it, headless, against the scripted model of :mod:`.openai_fake` (streamed chat completions).

The config (``opencode.json`` in the project) is the README's opencode snippet as written (``uv run --project <this
checkout> dsh-todo mcp --root <root>``) plus what the test needs: a custom OpenAI-compatible provider on the fake
model, and that model chosen. The ``OPENCODE_DISABLE_*`` variables keep the run off the network (the models.dev
catalogue, updates, sharing, language servers, default plugins). opencode also installs ``@opencode-ai/plugin`` from
npm into its config folder when that folder's ``node_modules`` is missing or its ``package.json`` lists a dependency
its ``package-lock.json`` does not: :func:`plugin_dependency_installed` writes the three so, and no fetch happens.

What opencode 1.18 does to our tool and results on their way to its model:

- It names MCP tools ``<server>_<tool>``: ``dsh-todo_todo_write``. Our description is kept; our input schema gets
  ``"additionalProperties": false`` added at its root, and is otherwise equal as a value.
- A result reaches the model as a ``tool`` message whose ``content`` is our text block as it is; an ``isError``
  result the same way (opencode prints it as a failed call, ``Error: <our text after "Error: ">``).
- opencode checks no schema itself: the refused arguments reach our registry, which answers them.
- Before the turn it asks the model for a session title, offering no tools: the fake model answers that with text.
- Once each call has been answered, opencode sends ``notifications/cancelled`` for it (``"reason":
  "AbortError: The operation was aborted."``, some 80 ms after our answer): the call is done, so the server ignores
  it, and the log holds both calls as answered.

How opencode ends the server (seen with strace): at the end of the run, SIGTERM to each process below the one it
started, stdin left open: under ``uv run``, to our stand-in and to the serving process (which so gets it twice, the
stand-in passing it on), never to uv, which exits when its child does. The server ends its turn and exits 0
within about 40 ms. opencode waits for its MCP servers to start before the first model request (a server
held back 2 s was still offered), so the snippet needs no setting for that.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.carriers.mcp.agents.common import fake_model, no_server_left, run_cli
from tests.carriers.mcp.agents.conftest import cli
from tests.carriers.mcp.agents.openai_fake import MODEL, answer, chat_tools, chat_turns
from tests.carriers.mcp.agents.readme import snippet, uv_environment
from tests.carriers.mcp.clients.common import ACCEPTED, FINAL_TEXT, REFUSED, TEXT_OF, native_tool, stored_session

pytestmark = pytest.mark.slow

QUIET = {name: "1" for name in ("OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH",
                                "OPENCODE_DISABLE_SHARE", "OPENCODE_DISABLE_LSP_DOWNLOAD",
                                "OPENCODE_DISABLE_DEFAULT_PLUGINS")}
"""What opencode would otherwise fetch or start: updates, the model catalogue, sharing, LSPs, default plugins."""
PLUGIN = "@opencode-ai/plugin"


def config(model_url: str, root: Path) -> dict[str, Any]:
    """``opencode.json``: the README's snippet as written, plus the fake model as a custom provider, chosen."""
    value = json.loads(snippet("opencode (`opencode.json`", root))
    value["provider"] = {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "fake model",
                                  "options": {"baseURL": f"{model_url}/v1", "apiKey": "dummy"},
                                  "models": {MODEL: {"name": "fake model"}}}}
    value["model"] = f"fake/{MODEL}"
    return value


def plugin_dependency_installed(home: Path) -> None:
    """Mark the plugin package as installed in opencode's config folder, so opencode does not fetch it from npm
    (this run loads no plugin)."""
    folder = home / ".config" / "opencode"
    (folder / "node_modules").mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"dependencies": {PLUGIN: "*"}}), encoding="utf-8")
    (folder / "package-lock.json").write_text(json.dumps({"packages": {"": {"dependencies": {PLUGIN: "*"}}}}),
                                              encoding="utf-8")


def test_opencode_run_writes_the_plan_through_the_readme_config(tmp_path: Path) -> None:
    opencode = cli("opencode")
    uv = uv_environment()
    root, cwd, home = tmp_path / "sessions", tmp_path / "project", tmp_path / "home"
    cwd.mkdir()
    plugin_dependency_installed(home)
    with fake_model(answer) as model:
        (cwd / "opencode.json").write_text(json.dumps(config(model.url, root), indent=2), encoding="utf-8")
        run = run_cli([opencode, "run", "Fix the bug"], cwd=cwd, home=home, env={**QUIET, **uv})
    why = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert run.returncode == 0, why
    assert run.stdout == f"{FINAL_TEXT}\n", why
    assert not (home / ".npm").exists(), "opencode fetched from npm (its cache is there)"
    # Every request is a chat completion; those offering tools are the turn (the accepted call, the refused one,
    # the final text); the one offering none is the title.
    assert {(r.method, r.path) for r in model.requests} == {("POST", "/v1/chat/completions")}
    turn = [r.body for r in model.requests if r.body.get("tools")]
    assert len(turn) == 3 and len(model.requests) == 4
    ours = native_tool()
    for body in turn:
        [tool] = [tool for tool in chat_tools(body) if tool["name"].endswith("todo_write")]
        assert tool == {"name": "dsh-todo_todo_write", "description": ours["description"],
                        "parameters": {**ours["parameters"], "additionalProperties": False}}
    # What the model read back: our exact texts, success and refusal alike, and nothing else.
    assert chat_turns(turn[-1]) == {"call_0": TEXT_OF[ACCEPTED], "call_1": TEXT_OF[REFUSED]}
    stored_session(root)
    no_server_left(root)
