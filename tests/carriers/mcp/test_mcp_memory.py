"""A long MCP session's memory stays bounded (issue 34, item 5).

Repro: one ``dsh-todo mcp`` stdio connection is one session and one turn, and every call appended five events
(``step/start``, ``tool/call``, ``todo/write``, ``tool/result``, ``step/end``; six now, with the ``assistant/message``
that advertises the call) to the in-memory ``Session``, which held its whole log: about 5 MiB of RSS per 1,000 calls
(``benchmarks/mcp_memory.py``: 23.2 MiB after warm-up, 37.6 MiB after 3,000 more calls), telemetry or not, for as
long as the client stays connected. Now a persisted MCP session
holds a recent tail and reads older events back from its log on demand. The count is asserted, not the RSS: the
server says at ``DSH_TODO_DEBUG=1`` how many events its session logged and how many it still held.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_todo.carriers.mcp.calls import KEEP_IN_MEMORY, Connections
from dsh_todo.harness.loader import boot
from dsh_todo.standard import open_runtime
from dsh_todo.testing import memory_log_composition
from tests.carriers.mcp.test_mcp_stdio_wire import stored_events

CALLS = 2_000
TODO = b'{"todos":[{"content":"write the plan","status":"in_progress"},{"content":"ship","status":"pending"}]}'


def call_line(request_id: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"todo_write","arguments":%s}}' % (
        request_id, TODO)


def test_a_long_stdio_session_holds_a_bounded_tail_of_its_log(tmp_path: Path) -> None:
    """2,000 pipelined calls (12,002 events with the turn's start and end) on one connection: the session holds at
    most twice its bound in memory at the end, and its log on disk still has every event."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DSH_TODO_ROOT"}
    env["DSH_TODO_DEBUG"] = "1"
    handshake = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "long", "version": "1"}}}
        ).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    lines = b"\n".join([*handshake, *(call_line(n) for n in range(1, CALLS + 1))]) + b"\n"
    done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "mcp", "--root", str(tmp_path / "sessions")],
                          input=lines, capture_output=True, cwd=cwd, env=env, timeout=240)
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, err
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == CALLS + 1 and all(not a["result"].get("isError", False) for a in answers[1:]), answers[-1]
    found = re.search(r'MCP session "([^"]+)" closed: (\d+) events logged, (\d+) held in memory', err)
    assert found is not None, err
    session_id, logged, held = found[1], int(found[2]), int(found[3])
    assert logged == 6 * CALLS + 2
    assert held <= 2 * KEEP_IN_MEMORY
    events = stored_events(tmp_path, session_id)
    assert [event["seq"] for event in events] == list(range(logged))
    assert events[-1]["type"] == "turn/end"


@pytest.mark.parametrize("store", ["memory", "files"])
def test_a_bounded_session_reads_older_events_back_from_its_log(tmp_path: Path, store: str) -> None:
    """Both doors' sessions (stdio's own, one per ``--http`` MCP session) come from :class:`Connections`: bounded to
    a small tail, ``session.events`` still answers every index, slice and iteration with the whole log, as stored
    (in a JSONL root, read while its writer holds it)."""
    ctx = (boot(memory_log_composition(batch_delay_ms=5)) if store == "memory"
           else open_runtime(tmp_path / "sessions"))
    try:
        connections = Connections(ctx, cwd=str(tmp_path))
        assert connections.bound is not None
        connections.bound.keep = 10
        session = connections.default

        async def calls() -> None:
            for _ in range(60):
                result = await session.call("todo_write", json.loads(TODO))
                assert not result.is_error

        asyncio.run(calls())
        live = session.session
        assert live is not None
        assert live.seq == 6 * 60 + 1 and 10 <= live.held <= 20
        stored = ctx.session_persistence.read(live.id).events
        events = live.events
        assert len(events) == live.seq == len(stored)
        assert list(events) == [dict(event) for event in stored]
        assert list(reversed(events)) == list(reversed(list(events)))
        assert events[0]["type"] == "turn/start" and events[-1]["seq"] == live.seq - 1
        assert events[3] == stored[3] and events[-3] == stored[-3]
        assert list(events[2:7]) == stored[2:7] and list(events[-30:]) == stored[-30:]
        assert list(events[::50]) == stored[::50] and list(events[:]) == stored
        with pytest.raises(IndexError):
            events[live.seq]
    finally:
        connections.close()
        ctx.dispose()
