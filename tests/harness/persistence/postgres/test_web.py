"""The page follows a session that another process writes to PostgreSQL: same frames, pushed by NOTIFY."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

from dsh_todo.cli import main as cli
from dsh_todo.harness import boot
from dsh_todo.jsonutil import dumps
from dsh_todo.testing import database_composition
from tests.carriers.web.conftest import SseReader
from tests.conftest import REPO_ROOT
from tests.harness.persistence.postgres.test_processes import WORKER, finish, worker


def history(base: str, session_id: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"type": "client-request", "rpcId": "r1", "method": "session.history",
                       "payload": {"sessionId": session_id}}).encode()
    request = urllib.request.Request(base + "api/session.history", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_page_served_by_one_process_shows_a_plan_another_process_appends(
        pg_url: str, pg_schema: str) -> None:
    boot(database_composition(pg_url, schema=pg_schema)).dispose()  # the tables exist before either process starts
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    server = subprocess.Popen([sys.executable, "-m", WORKER, "web", pg_url, pg_schema, "-"],
                              cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base = server.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:")
        status, _body = history(base, "remote")
        assert status == 404
        reader = SseReader(base.removeprefix("http://").rstrip("/"), "/api/events.mux?sessionId=remote&afterSeq=-1")
        try:
            assert reader.frame()["payload"] == {"type": "session/subscribed", "sessionId": "remote", "lastSeq": -1}
            writer = worker("append", pg_url, pg_schema, "remote", "3", "0.05")
            payloads = reader.payloads_until(
                lambda p: p["type"] == "session/event" and p["event"]["type"] == "turn/end")
            code, _out, err = finish(writer)
            assert code == 0, err
        finally:
            reader.close()
        status, body = history(base, "remote")
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(20)

    reader_ctx = boot(database_composition(pg_url, schema=pg_schema))
    try:
        stored = reader_ctx.session_persistence.read("remote").events
    finally:
        reader_ctx.dispose()
    events = [p["event"] for p in payloads if p["type"] == "session/event"]
    assert [dumps(event) for event in events] == [dumps(event) for event in stored]
    projections = [(p["seq"], p["value"]) for p in payloads if p["type"] == "session/projection"]
    plans = [event["data"]["todos"] for event in stored if event["type"] == "todo/write"]
    assert projections == [(event["seq"], event["data"]["todos"]) for event in stored
                           if event["type"] == "todo/write"]
    assert status == 200
    value = body["result"]["value"]
    assert value["projections"] == {"asOfSeq": len(stored) - 1, "values": {"todos": plans[-1]}}
    assert plans[-1][0]["content"] == "remote step 2"


def test_web_refuses_a_database_it_cannot_reach(capsys: Any) -> None:
    """Repro: the refusal took two lines (libpq's hint) and exit 1, unlike every other command's one line and 2."""
    assert cli(["web", "--database", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "--port", "0"]) == 2
    assert capsys.readouterr().err == (
        'dsh-todo web: composition row "persistence" (@deepseek-ai/dsh-session-persistence-postgres): cannot open '
        "the database postgresql://127.0.0.1:1/none (schema public): Connection refused\n")
