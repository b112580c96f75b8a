"""Arize Phoenix, a real OTLP trace receiver people run locally, finds a ``dsh-todo run``'s turn, chat and tool spans
through its own client (issue 25 goal 4).

Phoenix is not a dependency of ours: the test installs ``arize-phoenix`` into a throwaway virtual environment with
``uv`` (seconds with a warm cache), serves it on free ports of 127.0.0.1 with a working directory of its own, points
the spans at its ``/v1/traces`` (the logs go to the test receiver: Phoenix takes traces only) and asks Phoenix's own
client (``phoenix.client.Client().spans.get_spans``), run in that environment, what it stored. It is skipped, with the
reason, where uv is missing, the install fails or Phoenix does not come up.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import needs
from tests.cli.test_telemetry import SCRIPT, environment
from tests.environments import environment as throwaway_environment
from tests.harness.telemetry.receiver import Receiver, otlp_receiver

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 120

ASK = """
import json, sys
from phoenix.client import Client

spans = Client(base_url=sys.argv[1]).spans.get_spans(project_identifier="default", limit=1000)
print(json.dumps([{"name": s["name"], "span_kind": s["span_kind"], "status_code": s["status_code"],
                   "status_message": s["status_message"], "parent_id": s.get("parent_id"),
                   "span_id": s["context"]["span_id"], "trace_id": s["context"]["trace_id"],
                   "attributes": {k: v for k, v in s.get("attributes", {}).items() if k.startswith("gen_ai.")}}
                  for s in spans]))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a throwaway environment holding ``arize-phoenix``."""
    return throwaway_environment(tmp_path_factory.mktemp("phoenix") / "venv", ["arize-phoenix"], "arize-phoenix")


@pytest.fixture
def phoenix(phoenix_python: Path, tmp_path: Path) -> Iterator[str]:
    """A Phoenix server on free ports of 127.0.0.1, its data in ``tmp_path``: its base URL."""
    port = free_port()
    work = tmp_path / "phoenix"
    work.mkdir()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port())}
    log = (tmp_path / "phoenix.log").open("wb")
    server = subprocess.Popen([str(phoenix_python), "-m", "phoenix.server.main", "serve"], env=env, stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                needs.unavailable(f"Phoenix did not come up: {(tmp_path / 'phoenix.log').read_text()[-300:]}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
        log.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as running:
        yield running


def test_phoenix_finds_the_turn_chat_and_tool_spans(phoenix: str, phoenix_python: Path, receiver: Receiver,
                                                    tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = environment(tmp_path, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=receiver.url,
                      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{phoenix}/v1/traces")
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "run", "plan it", "--script", str(script),
                           "--root", str(tmp_path / "root"), "--session", "s1", "--single-active",
                           "--telemetry", "full"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 30
    while True:  # Phoenix stores what it received on its own schedule
        asked = subprocess.run([str(phoenix_python), "-c", ASK, phoenix], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
        assert asked.returncode == 0, asked.stderr
        spans = json.loads(asked.stdout)
        if len(spans) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    turn = next(s for s in spans if s["name"] == "invoke_agent")
    found = sorted((s["name"], s["span_kind"], s["status_code"], s["parent_id"] == turn["span_id"],
                    s["attributes"].get("gen_ai.tool.call.id", "")) for s in spans if s is not turn)
    assert found == [
        ("chat script.json", "LLM", "UNSET", True, ""), ("chat script.json", "LLM", "UNSET", True, ""),
        ("chat script.json", "LLM", "UNSET", True, ""),
        ("execute_tool todo_write", "TOOL", "ERROR", True, "call-1"),
        ("execute_tool todo_write", "TOOL", "UNSET", True, "call-2")]
    assert (turn["span_kind"], turn["status_code"], turn["parent_id"]) == ("AGENT", "UNSET", None)
    assert {s["trace_id"] for s in spans} == {turn["trace_id"]}
    rejected = next(s for s in spans if s["status_code"] == "ERROR")
    assert rejected["status_message"] == "Error: invalid todos: at most one task may be in_progress (got 2)"
    assert turn["attributes"] == {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "s1",
                                  "gen_ai.provider.name": "scripted"}
    assert receiver.records  # the logs went to their own collector meanwhile
