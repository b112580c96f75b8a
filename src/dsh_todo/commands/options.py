"""Options and texts that several commands share, so each means the same everywhere."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from dsh_todo.coding_agents.base import AGENTS, UnknownAgentError, selected
from dsh_todo.harness.errors import CommandError
from dsh_todo.harness.persistence.contract import LogReader
from dsh_todo.harness.persistence.jsonl.reader import JsonlReader
from dsh_todo.logview.database import open_database
from dsh_todo.runtime import Storage, Telemetry, default_root, resolve_telemetry

SESSION_HELP = "a session directory, its log file, or a session id under --root (or in --database)"

SCRIPT_FORMAT = """\
A script (--script FILE) is a JSON list of model replies, played in order:
  [{"tool_calls": [{"name": "todo_write", "arguments":
     "{\\"todos\\": [{\\"content\\": \\"read\\", \\"status\\": \\"in_progress\\"}]}"}]},
   {"text": "Plan recorded."}]
Each reply has "text" and/or "tool_calls"; a call's "arguments" is the raw JSON string a model would send. A turn
ends at a reply without tool calls, or after 50 model steps (the agent loop's cap)."""


def add_storage_options(parser: argparse.ArgumentParser, *, writes: bool) -> None:
    """``--root`` / ``--database`` (and, for commands that create logs, ``--compression``): where sessions live,
    resolved by :func:`storage_of` as :meth:`~dsh_todo.runtime.Storage.resolve` says."""
    parser.add_argument("--root", metavar="DIR",
                        help="JSONL session root (default $DSH_TODO_ROOT or ./.dsh-todo/sessions)")
    parser.add_argument("--database", metavar="URL",
                        help="PostgreSQL instead of a root (default $DSH_TODO_DATABASE_URL)")
    parser.add_argument("--schema", default="public", help="PostgreSQL schema holding the tables (default public)")
    if writes:
        parser.add_argument("--compression", choices=["zstd", "none"],
                            help="encoding of new logs under the root (default zstd, as DSH); existing logs keep "
                                 "theirs")


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    """What an agent-loop command (``run``, ``acp``) needs: the model's source, then :func:`add_harness_options`."""
    add_model_options(parser)
    add_harness_options(parser)


def add_harness_options(parser: argparse.ArgumentParser) -> None:
    """What a command that serves ``todo_write`` from its own harness (``run``, ``acp``, ``mcp``) needs: the storage
    its logs go to, the tool's policy and the telemetry."""
    add_storage_options(parser, writes=True)
    add_policy_option(parser)
    add_telemetry_option(parser)


def add_telemetry_option(parser: argparse.ArgumentParser) -> None:
    """``--telemetry``: what the sessions of a front door that boots the harness (``run``, ``mcp``, ``acp``,
    ``web``, ``demo``) share over OpenTelemetry, resolved by :func:`telemetry_of`."""
    parser.add_argument("--telemetry", choices=["full", "feedback-only", "disabled"],
                        help="share sessions over OpenTelemetry (OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT): full "
                             "sends every event, feedback-only a session's log at a feedback event (default "
                             "$DSH_TODO_TELEMETRY or disabled)")


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    """``--single-active``: the tool's ``allowParallelInProgress: false``."""
    parser.add_argument("--single-active", action="store_true", help="allowParallelInProgress: false")


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Where the model's replies come from: a script (offline) or a model endpoint, never both; and the endpoint's
    wire (:func:`dsh_todo.harness.llm.choose_wire`)."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--script", help="a JSON list of scripted assistant replies (offline)")
    source.add_argument("--model", help="model name at the endpoint (default $DEEPSEEK_MODEL, else deepseek-flash "
                                        "over messages, deepseek-v4-flash over openai)")
    parser.add_argument("--wire", choices=["messages", "openai"],
                        help="how to talk to the endpoint $DEEPSEEK_BASE_URL: messages (Anthropic Messages, as DSH "
                             "0.2; default https://api.deepseek.com/anthropic) or openai (chat completions; default "
                             "https://api.deepseek.com); default $DSH_TODO_WIRE or messages")


def storage_of(args: argparse.Namespace) -> Storage:
    """The storage the options name (a contradiction raises :class:`~dsh_todo.runtime.StorageError`)."""
    return Storage.resolve(args.root, args.database, getattr(args, "compression", None), args.schema)


def telemetry_of(args: argparse.Namespace) -> Telemetry:
    """The telemetry the options name, checked before anything boots
    (:func:`~dsh_todo.runtime.resolve_telemetry`)."""
    return resolve_telemetry(args.telemetry)


def open_backend(storage: Storage) -> LogReader:
    """The backend a reader reads ``storage`` through (no runtime booted: readers never write). A database that
    cannot be reached raises :class:`~dsh_todo.logview.Refusal`."""
    if storage.database is not None:
        return open_database(storage.database, schema=storage.schema)
    return JsonlReader(storage.root or default_root(), storage.compression)


def check_port(port: int) -> int:
    """``port``, or refused if no socket can have it: asyncio and uvicorn would otherwise wrap it silently
    (99999 → 34463)."""
    if not 0 <= port <= 65535:
        raise CommandError(f"--port must be between 0 and 65535 (0 picks a free one), not {port}")
    return port


def seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse reports the error in one line)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"a positive number of seconds, not {text!r}")
    return value


def add_agents_option(parser: argparse.ArgumentParser) -> None:
    """``--agents`` (which other coding agents' sessions to read as well) and ``--agent-home AGENT=DIR`` (a home
    to read instead of that agent's own), resolved by :func:`agents_of`."""
    parser.add_argument("--agents", metavar="LIST",
                        help="also read the sessions of other coding agents: all, none or a comma list of "
                             "claude,codex,gemini,opencode (default $DSH_TODO_AGENTS, else none)")
    parser.add_argument("--agent-home", metavar="AGENT=DIR", action="append", default=[],
                        help="read AGENT's sessions from DIR instead of its own home (repeatable)")


def agents_of(args: argparse.Namespace) -> tuple[list[str], dict[str, Path]]:
    """The agents chosen (``--agents``, else ``$DSH_TODO_AGENTS``, else none) and the homes named instead of
    theirs; a value naming no agent is the one-line error (exit 2)."""
    try:
        agents = selected(getattr(args, "agents", None))
    except UnknownAgentError as exc:
        raise CommandError(str(exc)) from None
    homes: dict[str, Path] = {}
    for pair in getattr(args, "agent_home", None) or []:
        agent, equals, folder = pair.partition("=")
        if not equals or not folder:
            raise CommandError(f"--agent-home takes AGENT=DIR, not {pair!r}")
        if agent not in AGENTS:
            raise CommandError(f"--agent-home: unknown agent {agent!r}: choose one of {','.join(AGENTS)}")
        homes[agent] = Path(folder).expanduser()
    return agents, homes
