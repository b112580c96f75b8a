"""A missing optional extra names the install (issue 23): one line, exit 2, never Python's bare import error.

Each case runs a real ``dsh-todo`` process in which the extra's packages cannot be imported: a finder placed first
on ``sys.meta_path`` refuses them, as an interpreter without the extra would (the packages stay installed for the
rest of the suite).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BLOCKED_CLI = """
import sys
blocked = set(sys.argv[1].split(","))

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
from dsh_todo.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def blocked_run(modules: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEEPSEEK_API_KEY": "sk-test"}  # a key, so that run --model gets as far as the SDK
    return subprocess.run([sys.executable, "-c", BLOCKED_CLI, modules, *argv], capture_output=True, text=True,
                          timeout=60, cwd=cwd, stdin=subprocess.DEVNULL, env=env)


@pytest.mark.parametrize(("modules", "argv", "line"), [
    ("mcp_types", ["mcp"], "dsh-todo mcp: the MCP server needs the `mcp` extra: pip install 'dsh-todo[mcp]'"),
    ("mcp", ["mcp", "--http", "--port", "0"],
     "dsh-todo mcp: the MCP server needs the `mcp` extra: pip install 'dsh-todo[mcp]'"),
    ("acp", ["acp", "--script", "s.json"],
     "dsh-todo acp: the ACP agent needs the `acp` extra: pip install 'dsh-todo[acp]'"),
    ("psycopg", ["plan", "s1", "--database", "postgresql://127.0.0.1:1/x"],
     "dsh-todo plan: PostgreSQL storage needs the `postgres` extra: pip install 'dsh-todo[postgres]'"),
    ("psycopg", ["run", "hi", "--script", "s.json", "--database", "postgresql://127.0.0.1:1/x"],
     "dsh-todo run: PostgreSQL storage needs the `postgres` extra: pip install 'dsh-todo[postgres]'"),
    ("psycopg", ["import", ".", "--database", "postgresql://127.0.0.1:1/x"],
     "dsh-todo import: PostgreSQL storage needs the `postgres` extra: pip install 'dsh-todo[postgres]'"),
    ("anthropic", ["run", "hi", "--model", "m"],
     "dsh-todo run: a model endpoint over Anthropic Messages needs the `anthropic` extra: "
     "pip install 'dsh-todo[anthropic]'"),
    ("openai", ["run", "hi", "--model", "m", "--wire", "openai"],
     "dsh-todo run: a model endpoint needs the `openai` extra: pip install 'dsh-todo[openai]'"),
    ("opentelemetry", ["run", "hi", "--script", "s.json", "--telemetry", "full"],
     "dsh-todo run: session telemetry over OpenTelemetry needs the `otel` extra: pip install 'dsh-todo[otel]'"),
    ("opentelemetry", ["mcp", "--telemetry", "feedback-only"],
     "dsh-todo mcp: session telemetry over OpenTelemetry needs the `otel` extra: pip install 'dsh-todo[otel]'"),
], ids=["mcp", "mcp-http", "acp", "plan-database", "run-database", "import", "run-model", "run-model-openai",
        "run-telemetry", "mcp-telemetry"])
def test_a_command_without_its_extra_names_the_install(modules: str, argv: list[str], line: str,
                                                       tmp_path: Path) -> None:
    """Repro: ``dsh-todo mcp`` in an environment without the ``mcp`` extra printed ``dsh-todo: error: No module
    named 'mcp_types'`` and exited 1; ``--database`` without psycopg said "reading a database needs psycopg …:
    No module named 'psycopg'" (or, for a writer, a boot error naming the plugin)."""
    (tmp_path / "s.json").write_text('[{"text": "done"}]', encoding="utf-8")
    done = blocked_run(modules, *argv, cwd=tmp_path)
    assert done.stderr.splitlines() == [line], done.stderr
    assert done.returncode == 2
    assert not (tmp_path / ".dsh-todo").exists()  # refused before anything was created


BLOCKED_IMPORT = """
import sys
blocked = set(sys.argv[1].split(","))

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
import importlib
try:
    importlib.import_module(sys.argv[2])
except ImportError as exc:
    print(type(exc).__name__, isinstance(exc, ImportError), exc, sep="|")
"""


@pytest.mark.parametrize(("modules", "adapter", "text"), [
    ("agents", "dsh_todo.adapters.openai_agents",
     "the OpenAI Agents SDK adapter needs the `openai-agents` extra: pip install 'dsh-todo[openai-agents]'"),
    ("langchain_core", "dsh_todo.adapters.langchain",
     "the LangChain adapter needs the `langchain` extra: pip install 'dsh-todo[langchain]'"),
    ("pydantic_ai", "dsh_todo.adapters.pydantic_ai",
     "the pydantic-ai adapter needs the `pydantic-ai` extra: pip install 'dsh-todo[pydantic-ai]'"),
    ("claude_agent_sdk", "dsh_todo.adapters.claude_agent_sdk",
     "the Claude Agent SDK adapter needs the `claude-agent-sdk` extra: pip install 'dsh-todo[claude-agent-sdk]'"),
    ("mcp", "dsh_todo.adapters.claude_agent_sdk",  # its server is mcp's own, so mcp is part of the extra
     "the Claude Agent SDK adapter needs the `claude-agent-sdk` extra: pip install 'dsh-todo[claude-agent-sdk]'"),
    ("google", "dsh_todo.adapters.google_adk",
     "the Google ADK adapter needs the `google-adk` extra: pip install 'dsh-todo[google-adk]'"),
    ("crewai", "dsh_todo.adapters.crewai",  # no extra can hold crewai (see pyproject.toml): the package is named
     "the CrewAI adapter needs crewai: pip install 'crewai>=1.15.30,<2'"),
])
def test_an_adapter_without_its_extra_names_the_install(modules: str, adapter: str, text: str) -> None:
    """Repro: ``import dsh_todo.adapters.langchain`` without langchain-core said "needs langchain-core: pip install
    …", in words of its own per adapter; now one wording, the commands' (an ``ImportError`` still)."""
    done = subprocess.run([sys.executable, "-c", BLOCKED_IMPORT, modules, adapter], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.splitlines() == [f"MissingExtraError|True|{text}"], done.stderr


def test_every_extra_of_the_package_is_known() -> None:
    """Each extra ``pyproject.toml`` declares has its words and modules in :data:`dsh_todo.extras.EXTRAS`."""
    import tomllib

    from dsh_todo.extras import EXTRAS, missing
    from tests.conftest import REPO_ROOT

    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert sorted(EXTRAS) == sorted(declared["optional-dependencies"])
    assert str(missing("mcp")) == "the MCP server needs the `mcp` extra: pip install 'dsh-todo[mcp]'"
