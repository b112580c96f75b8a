"""Claude Code and Codex run headless against a scripted model that calls each CLI's OWN plan tool.

The scenario, the same for both: several plan writes, one the CLI refuses (a status outside its words), a subagent
that writes a plan of its own, then a write completing everything, then a final text. Each run gets a throwaway
home (``HOME``, ``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME``) under the given folder, and returns it: the tests read it
with our readers, and ``python -m tests.coding_agents.drive claude|claude-tasks|codex OUT`` saves one as a fixture
(machine paths scrubbed: see :func:`scrub`).

Which step a request is at is read from the request itself (the number of tool results its conversation carries,
ToolSearch's left out), and whether it is the subagent's from its first message (it holds :data:`SUBTASK`), so the
CLIs' side requests (titles, token counts) never shift the script.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.carriers.mcp.agents import anthropic_fake
from tests.carriers.mcp.agents.common import Reply, Request, Run, fake_model, run_cli
from tests.carriers.mcp.agents.openai_fake import _message as _response_message
from tests.carriers.mcp.agents.openai_fake import _response_events, response_tools, responses_turns

PROMPT = "Fix the bug"
SUBTASK = "SUBTASK: check the tests"
FINAL = "Fixed."
SUB_FINAL = "The tests pass."
PLACEHOLDER = "/home/dev"
"""What a fixture says where the run's temporary folder was."""

Step = tuple[str, dict[str, Any]]
"""A tool call (name, arguments); a name ``""`` is the final text."""


def _todos(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": content, "status": status, "activeForm": f"Working on: {content}"}
                      for content, status in pairs]}


CLAUDE_TODO_MAIN: Sequence[Step] = (
    ("TodoWrite", _todos(("Reproduce the bug", "in_progress"), ("Fix the parser", "pending"))),
    ("TodoWrite", _todos(("Reproduce the bug", "completed"), ("Fix the parser", "in_progress"))),
    ("TodoWrite", _todos(("Reproduce the bug", "completed"), ("Fix the parser", "done"))),  # refused
    ("Agent", {"description": "Check the tests", "prompt": SUBTASK, "subagent_type": "general-purpose"}),
    ("TodoWrite", _todos(("Reproduce the bug", "completed"), ("Fix the parser", "completed"))),
)
CLAUDE_TODO_SUB: Sequence[Step] = (
    ("TodoWrite", _todos(("Run the tests", "in_progress"), ("Report the result", "pending"))),
)
"""Claude Code with ``TodoWrite`` (``CLAUDE_CODE_ENABLE_TASKS=0``)."""

CLAUDE_TASKS_MAIN: Sequence[Step] = (
    ("TaskCreate", {"subject": "Reproduce the bug", "description": "Find the failing input",
                    "activeForm": "Reproducing the bug"}),
    ("TaskCreate", {"subject": "Fix the parser", "description": "Make it pass"}),
    ("TaskUpdate", {"taskId": "1", "status": "in_progress"}),
    ("TaskUpdate", {"taskId": "1", "status": "done"}),  # refused
    ("Agent", {"description": "Check the tests", "prompt": SUBTASK, "subagent_type": "general-purpose"}),
    ("TaskUpdate", {"taskId": "1", "status": "completed"}),
    ("TaskUpdate", {"taskId": "2", "status": "in_progress"}),
)
CLAUDE_TASKS_SUB: Sequence[Step] = ()
"""Claude Code with its default Task tools (2.1.332 offers a subagent none of them: its ToolSearch for TaskCreate
answers "No matching deferred tools found")."""


def _plan(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"explanation": "Plan", "plan": [{"step": step, "status": status} for step, status in pairs]}


CODEX_MAIN: Sequence[Step] = (
    ("update_plan", _plan(("Reproduce the bug", "in_progress"), ("Fix the parser", "pending"))),
    ("update_plan", _plan(("Reproduce the bug", "completed"), ("Fix the parser", "in_progress"))),
    ("update_plan", _plan(("Reproduce the bug", "completed"), ("Fix the parser", "done"))),  # refused
    ("spawn_agent", {"message": SUBTASK}),
    ("wait_agent", {"targets": ["<spawned>"], "timeout_ms": 60000}),
    ("update_plan", _plan(("Reproduce the bug", "completed"), ("Fix the parser", "completed"))),
)
CODEX_SUB: Sequence[Step] = (
    ("update_plan", _plan(("Run the tests", "in_progress"), ("Report the result", "pending"))),
)


# --- Claude Code ----------------------------------------------------------------------------------------------


def _claude_results(body: Any) -> tuple[int, int]:
    """The tool results in a Claude request's conversation, ToolSearch's left out, and ToolSearch's."""
    names: dict[str, str] = {}
    count = searches = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                names[block["id"]] = block.get("name", "")
            elif block.get("type") == "tool_result":
                if names.get(str(block.get("tool_use_id"))) == "ToolSearch":
                    searches += 1
                else:
                    count += 1
    return count, searches


def claude_script(main: Sequence[Step], sub: Sequence[Step]) -> Any:
    """The scripted Anthropic endpoint: ``main`` for the session, ``sub`` for the subagent; a tool Claude Code
    defers is loaded with ``ToolSearch`` first (as a model must)."""

    def answer(request: Request) -> Reply:
        path = request.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return Reply(body={"input_tokens": 10})
        if request.method != "POST" or not path.endswith("/v1/messages"):
            return Reply(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        body = request.body
        offered = anthropic_fake.tool_names(body)
        if "ToolSearch" not in offered:  # a side request (a title, a summary)
            return anthropic_fake.text(body, "Planning")
        first = json.dumps(body["messages"][0]) if body.get("messages") else ""
        is_sub = SUBTASK in first
        steps, final = (sub, SUB_FINAL) if is_sub else (main, FINAL)
        done, searches = _claude_results(body)
        if done >= len(steps) or searches > len(steps):  # the script is played, or a tool never loads
            return anthropic_fake.text(body, final)
        name, arguments = steps[done]
        if name not in offered:
            query = json.dumps({"query": f"select:{name}", "max_results": 5})
            return anthropic_fake.tool_use(body, "ToolSearch", query, f"toolu_search_{'s' if is_sub else 'm'}{done}")
        call_id = f"toolu_{'sub' if is_sub else 'main'}_{done + 1:02d}"
        return anthropic_fake.tool_use(body, name, json.dumps(arguments), call_id)

    return answer


def run_claude(folder: Path, claude: Path, *, tasks: bool) -> tuple[Path, Run]:
    """Claude Code headless in ``folder`` (its home ``folder/home/.claude``, its project ``folder/project``):
    ``TodoWrite`` (``tasks=False``) or the Task tools; returns the home and the run."""
    home, cwd = folder / "home", folder / "project"
    cwd.mkdir(parents=True, exist_ok=True)
    config = home / ".claude"
    main, sub = (CLAUDE_TASKS_MAIN, CLAUDE_TASKS_SUB) if tasks else (CLAUDE_TODO_MAIN, CLAUDE_TODO_SUB)
    with fake_model(claude_script(main, sub)) as model:
        env = {
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "CLAUDE_CONFIG_DIR": str(config),
            "IS_SANDBOX": "1",
            # 2.1.332 offers neither TodoWrite nor the Task tools to its default model (claude-opus-5-5); this is
            # the switch that offers them (see decision 0047).
            "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            **({} if tasks else {"CLAUDE_CODE_ENABLE_TASKS": "0"}),
        }
        run = run_cli([claude, "-p", PROMPT, "--dangerously-skip-permissions"], cwd=cwd, home=home, env=env)
    return config, run


# --- Codex ----------------------------------------------------------------------------------------------------


SPAWNED = re.compile(r'"agent_id"\s*:\s*"([^"]+)"')


def codex_answer(request: Request) -> Reply:
    """The scripted Responses endpoint: :data:`CODEX_MAIN` for the session, :data:`CODEX_SUB` for the subagent."""
    path = request.path.split("?", 1)[0].rstrip("/")
    if request.method == "GET" and path.endswith("/models"):
        return Reply(body={"object": "list", "data": []})
    body = request.body
    if request.method != "POST" or not path.endswith("/responses") or not isinstance(body, dict):
        return Reply(404, {"error": {"message": f"fake model: no {request.method} {request.path}"}})
    tools = response_tools(body)
    outputs = responses_turns(body)
    done = len(outputs)
    if not any(name == "update_plan" for _, name in tools):
        return Reply(events=_response_events(f"resp_side_{done}", _response_message("msg_side", "Planning")))
    users = [item for item in body.get("input") or [] if isinstance(item, dict) and item.get("role") == "user"]
    is_sub = any(SUBTASK in json.dumps(item) for item in users) and PROMPT not in json.dumps(users)
    steps, final = (CODEX_SUB, SUB_FINAL) if is_sub else (CODEX_MAIN, FINAL)
    tag = "sub" if is_sub else "main"
    if done >= len(steps):
        return Reply(events=_response_events(f"resp_{tag}_{done}", _response_message(f"msg_{tag}", final)))
    name, arguments = steps[done]
    if name == "wait_agent":
        spawned = [match for output in outputs.values() for match in SPAWNED.findall(json.dumps(output)
                                                                                     .replace('\\"', '"'))]
        arguments = {**arguments, "targets": spawned[-1:]}
    [namespace] = [space for space, inner in tools if inner == name]
    item: dict[str, Any] = {"type": "function_call", "id": f"fc_{tag}_{done}", "call_id": f"call_{tag}_{done}",
                            "name": name, "arguments": json.dumps(arguments), "status": "completed"}
    if namespace is not None:
        item["namespace"] = namespace
    return Reply(events=_response_events(f"resp_{tag}_{done}", item))


def run_codex(folder: Path, codex: Path) -> tuple[Path, Run]:
    """``codex exec`` headless in ``folder`` with ``update_plan`` enabled; returns its home and the run."""
    home, cwd = folder / "home", folder / "project"
    cwd.mkdir(parents=True, exist_ok=True)
    config = home / ".codex"
    config.mkdir(parents=True, exist_ok=True)
    with fake_model(codex_answer) as model:
        (config / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake model"\n'
            f'base_url = "{model.url}/v1"\nwire_api = "responses"\nenv_key = "DSH_TODO_FAKE_KEY"\n\n'
            "[analytics]\nenabled = false\n\n[features]\nplugins = false\n\n[tools.update_plan]\nenabled = true\n",
            encoding="utf-8")
        run = run_cli([codex, "exec", "--skip-git-repo-check", "--color", "never", PROMPT], cwd=cwd, home=home,
                      env={"CODEX_HOME": str(config), "DSH_TODO_FAKE_KEY": "dummy"})
    return config, run


# --- fixtures -------------------------------------------------------------------------------------------------


def scrub(text: str, folder: Path) -> str:
    """``text`` with the run's temporary folder replaced by :data:`PLACEHOLDER` (both as written and as the CLIs
    mangle it into a folder name: every character outside ``[A-Za-z0-9]`` turned into ``-``)."""
    mangled = re.sub(r"[^A-Za-z0-9]", "-", str(folder))
    text = text.replace(str(folder), PLACEHOLDER).replace(mangled, re.sub(r"[^A-Za-z0-9]", "-", PLACEHOLDER))
    scratch = re.escape(tempfile.gettempdir()) + r"/claude-\d+"  # Claude Code's own scratch folder
    return re.sub(scratch, f"{PLACEHOLDER}/.claude-tmp", text)


MAX_LINE = 4000
"""A fixture keeps the lines of a transcript up to this long: the longer ones are Claude Code's snapshots of its
system prompt and listings (tens of KB each, nothing a plan reader looks at)."""


def save(folder: Path, home: Path, out: Path, keep: Sequence[str], *, trim: bool) -> None:
    """Copy the files of ``home`` matching the globs ``keep`` into ``out``, scrubbed, under scrubbed names; with
    ``trim``, the JSONL files without their lines over :data:`MAX_LINE` characters (Claude Code's; a Codex rollout
    is kept whole: its first line, the ``session_meta`` a reader needs, holds the system prompt)."""
    for pattern in keep:
        for source in sorted(home.glob(pattern)):
            if not source.is_file():
                continue
            target = out / scrub(str(source.relative_to(home)), folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            text = source.read_text(encoding="utf-8")
            if trim and source.suffix == ".jsonl":
                text = "".join(line for line in text.splitlines(keepends=True) if len(line) <= MAX_LINE)
            target.write_text(scrub(text, folder), encoding="utf-8")


def main(argv: Sequence[str]) -> int:
    from tests.carriers.mcp.agents.install import binary

    which, out = argv[0], Path(argv[1])
    folder = Path(argv[2]) if len(argv) > 2 else Path(tempfile.gettempdir()) / f"dsh-todo-drive-{which}"
    shutil.rmtree(folder, ignore_errors=True)
    cli = binary("codex" if which == "codex" else "claude")
    assert not isinstance(cli, str), cli
    if which == "codex":
        home, run = run_codex(folder, cli)
        keep = ["sessions/**/*.jsonl"]
    else:
        home, run = run_claude(folder, cli, tasks=which == "claude-tasks")
        keep = ["projects/**/*.jsonl", "projects/**/*.meta.json", "tasks/**/*.json"]
    print(run.returncode, run.stdout, run.stderr[-3000:], file=sys.stderr)
    save(folder, home, out, keep, trim=which != "codex")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
