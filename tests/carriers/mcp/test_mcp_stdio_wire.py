"""``dsh-todo mcp`` over real stdio, byte for byte: every request gets exactly one answer, whatever the bytes were.

A raw subprocess: the test writes lines of bytes and reads answer lines, with a deadline per request, so a request
the server never answers fails the test instead of hanging it (issue 13 item 2).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import needs

needs.module("mcp")

from dsh_todo.carriers.mcp.wire import MAX_DEPTH, MAX_LINE
from dsh_todo.standard import open_runtime
from tests.conftest import fixtures_dir, read_jsonl

ANSWER_TIMEOUT = 20.0
LOSSLESS = "Error: tool execution arguments must be losslessly JSON-serializable"


class Wire:
    """``dsh-todo mcp`` as a subprocess spoken to in raw lines."""

    def __init__(self, root: Path, cwd: Path, *options: str) -> None:
        env = dict(os.environ)
        env.pop("DSH_TODO_ROOT", None)
        self.process = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "mcp", "--root", str(root), *options],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        cwd=cwd, env=env)
        self._pending = b""

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = ANSWER_TIMEOUT) -> dict[str, Any]:
        """The next line the server writes, parsed; fails when none comes within ``timeout`` seconds."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            assert left > 0, "no answer: the server left the request unanswered"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                assert chunk, f"the server closed stdout: {self.stderr_text()}"
                self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, line: bytes) -> dict[str, Any]:
        self.send(line)
        return self.answer()

    def handshake(self, client: str) -> None:
        """``initialize`` (protocol 2025-06-18) as ``client``, checked, then ``notifications/initialized``."""
        init = self.ask(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}}
                                   ).encode())
        assert init["result"]["serverInfo"]["name"] == "dsh-todo"
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def close(self) -> tuple[int, bytes]:
        """Close stdin (the client leaves); the exit code and whatever stdout still had."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        rest = self._pending + self.process.stdout.read()
        return self.process.wait(timeout=30), rest

    def stderr_text(self) -> str:
        if self.process.poll() is None:
            return ""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def wire(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Wire]:
    """A server past its handshake; a test marked ``options(...)`` starts it with those command-line options."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    marker = request.node.get_closest_marker("options")
    server = Wire(tmp_path / "sessions", cwd, *(marker.args if marker is not None else ()))
    try:
        server.handshake("raw")
        yield server
    finally:
        server.kill()


def call(request_id: int | str, arguments: bytes) -> bytes:
    """A ``tools/call`` line whose ``arguments`` are the given bytes, verbatim."""
    return (b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"todo_write","arguments":%s}}'
            % (json.dumps(request_id).encode(), arguments))


def text_of(answer: dict[str, Any]) -> str:
    [block] = answer["result"]["content"]
    return str(block["text"])


def stored_events(tmp_path: Path, session_id: str) -> list[dict[str, Any]]:
    ctx = open_runtime(tmp_path / "sessions")
    try:
        stored = ctx.session_persistence.read(session_id)
    finally:
        ctx.dispose()
    assert stored.torn is None
    return [dict(event) for event in stored.events]


def test_invalid_json_is_a_parse_error_with_null_id(wire: Wire) -> None:
    """Repro: ``{not json`` on stdin got no answer at all (the SDK's reader dropped it)."""
    for line in (b"{not json", b'{"jsonrpc":"2.0","id":7,"method":"tools/call"', b"\xff\xfe not utf-8", b"NaN"):
        answer = wire.ask(line)
        assert answer["jsonrpc"] == "2.0" and answer["id"] is None, line
        assert answer["error"]["code"] == -32700, line
        assert answer["error"]["message"].startswith("Parse error"), line
        assert "\n" not in answer["error"]["message"]
    # The connection goes on.
    assert text_of(wire.ask(call(1, b'{"todos":[]}'))) == "Updated todo list: 0 pending, 0 in progress, 0 completed."


def test_messages_that_are_not_requests_are_invalid_requests(wire: Wire) -> None:
    """JSON that is not a JSON-RPC request is answered -32600 with the request's id when it has a usable one."""
    for line, request_id in ((b"[1, 2]", None), (b'"hello"', None), (b'{"jsonrpc":"2.0","id":5}', None),
                             (b'{"jsonrpc":"1.0","id":6,"method":"tools/list"}', 6),
                             (b'{"jsonrpc":"2.0","id":[6],"method":"tools/list"}', None),
                             (b'{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}', None),
                             (b'{"jsonrpc":"2.0","id":"x","method":7}', "x")):
        answer = wire.ask(line)
        assert answer["id"] == request_id, line
        assert answer["error"]["code"] == -32600, line
    # A notification that does not validate is not answered (JSON-RPC never answers notifications); the next
    # request's answer is the next line.
    wire.send(b'{"jsonrpc":"2.0","method":5}')
    assert wire.ask(b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}')["id"] == 9


@pytest.mark.options("--structured-output")
def test_lone_surrogate_escapes_are_json(wire: Wire, tmp_path: Path) -> None:
    """Repro: ``"\\ud800"`` inside a request (valid JSON text, and what JavaScript's ``JSON.stringify`` writes for a
    lone surrogate) got no answer. It is the tool's to judge, and it takes it; the answer escapes it again."""
    answer = wire.ask(call(1, b'{"todos":[{"content":"\\ud800 half a pair","status":"pending"}]}'))
    assert text_of(answer) == "Updated todo list: 1 pending, 0 in progress, 0 completed."
    assert answer["result"]["structuredContent"]["todos"][0]["content"] == "\ud800 half a pair"
    session_id = answer["result"]["_meta"]["dsh-todo/sessionId"]
    code, rest = wire.close()
    assert code == 0 and rest == b""
    [write] = [e for e in stored_events(tmp_path, session_id) if e["type"] == "todo/write"]
    assert write["data"]["todos"] == [{"content": "\ud800 half a pair", "status": "pending"}]


def nested(depth: int, leaf: bytes = b"1") -> bytes:
    return b'{"a":' * depth + leaf + b"}" * depth


def test_deeply_nested_arguments_get_the_registry_answer(wire: Wire) -> None:
    """Repro: ``arguments`` nested 200 levels or more got no answer (the SDK's parser stops at 200 and drops the
    line). Up to :data:`MAX_DEPTH` levels the registry judges them like any other arguments."""
    assert MAX_DEPTH >= 256
    deep = nested(MAX_DEPTH - 8)
    assert text_of(wire.ask(call(1, deep))) == 'Error: invalid arguments: missing required property "todos"'
    listed = b'{"todos":' + b"[" * 250 + b"]" * 250 + b"}"
    assert text_of(wire.ask(call(2, listed))) == 'Error: invalid arguments: "todos[0]" must be an object'
    extra = b'{"todos":[],"x":' + nested(250) + b"}"
    assert text_of(wire.ask(call(3, extra))) == "Updated todo list: 0 pending, 0 in progress, 0 completed."


def test_nesting_beyond_the_limit_is_refused_with_the_request_id(wire: Wire) -> None:
    """Beyond :data:`MAX_DEPTH` (and far beyond, where Python's own parser gives up) the request is refused in one
    line, answered under its own id, and nothing is logged."""
    for request_id, depth in ((1, MAX_DEPTH + 1), (2, 100_000)):
        answer = wire.ask(call(request_id, nested(depth)))
        assert answer["id"] == request_id
        assert answer["error"]["code"] == -32600
        assert answer["error"]["message"] == f"Invalid Request: JSON nested deeper than {MAX_DEPTH} levels"
    assert wire.ask(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}')["result"]["tools"][0]["name"] == "todo_write"


def test_a_line_beyond_the_size_limit_is_refused(wire: Wire) -> None:
    """Memory stays bounded: a line longer than :data:`MAX_LINE` is skipped unread and refused under its id."""
    padding = b" " * (MAX_LINE + 10)
    answer = wire.ask(b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":' + padding + b"{}}")
    assert answer["id"] == 41
    assert answer["error"] == {"code": -32600, "message": f"Invalid Request: a message longer than {MAX_LINE} bytes"}
    assert wire.ask(b'{"jsonrpc":"2.0","id":42,"method":"tools/list"}')["id"] == 42


def lossless_vectors() -> list[dict[str, Any]]:
    vectors = read_jsonl(fixtures_dir() / "conformance" / "exec-vectors.jsonl")
    return [v for v in vectors if v["category"] == "lossless" and v["agent"]
            and v["config"]["allowParallelInProgress"]]


def test_numbers_json_cannot_carry_losslessly(wire: Wire, tmp_path: Path) -> None:
    """Repro: ``1e400`` or an integer beyond 64 bits. The registry's own answer as a tool result with ``isError``
    (the ``lossless`` conformance vectors), the log records the number as the client wrote it (``1e400`` had been
    logged as ``null``), and every call's step and the connection's turn close."""
    vectors = lossless_vectors()
    assert vectors
    cases: list[tuple[bytes, str, bool]] = [
        (json.dumps(v["args"]).encode(), v["text"], v["isError"]) for v in vectors]
    cases += [
        (b'{"todos":[],"x":1e400}', LOSSLESS, True),
        (b"-1E+400", LOSSLESS, True),
        (b'{"todos":[{"content":"a","status":"pending"}],"x":-0}', LOSSLESS, True),  # JavaScript's -0
        (b'{"todos":[],"x":' + b"9" * 5000 + b"}", LOSSLESS, True),  # beyond every float, as in JavaScript
        (b'{"todos":[],"x":123456789012345678901234567890}', "Updated todo list: 0 pending, 0 in progress, "
                                                             "0 completed.", False),
        (b'{"todos":[{"content":"a","status":123456789012345678901234567890}]}',
         'Error: invalid arguments: "todos[0].status" must be a string', True),
    ]
    session_id = None
    for index, (arguments, text, is_error) in enumerate(cases, start=1):
        answer = wire.ask(call(index, arguments))
        assert answer["id"] == index
        assert text_of(answer) == text, arguments[:60]
        assert answer["result"]["isError"] is is_error
        session_id = answer["result"]["_meta"]["dsh-todo/sessionId"]
    code, rest = wire.close()
    assert code == 0 and rest == b""
    assert session_id is not None
    events = stored_events(tmp_path, session_id)
    logged = [e["data"]["arguments"] for e in events if e["type"] == "tool/call"]
    assert logged[len(vectors)] == '{"todos":[],"x":1e400}'
    assert logged[len(vectors) + 1] == "-1E+400"
    assert logged[len(vectors) + 2].endswith('"x":-0}')
    kinds = [e["type"] for e in events]
    assert kinds.count("assistant/message") == kinds.count("tool/call") == kinds.count("tool/result") == len(cases)
    assert kinds.count("step/start") == kinds.count("step/end") == len(cases)
    assert kinds[0] == "turn/start" and kinds[-1] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


def test_every_request_is_answered_exactly_once(wire: Wire) -> None:
    """A burst of good and bad lines written at once: one answer per request id, none for notifications."""
    lines = [call(1, b'{"todos":[]}'), b"{bad", call(2, b"1e400"), b'{"jsonrpc":"2.0","method":"x"}',
             call(3, nested(MAX_DEPTH + 5)), call(4, b'{"todos":[{"content":"\\udfff","status":"pending"}]}'),
             b'{"jsonrpc":"2.0","id":5,"method":"no/such/method"}', b"", b"   "]
    for line in lines:
        wire.send(line)
    answers = [wire.answer() for _ in range(6)]
    code, rest = wire.close()
    assert code == 0
    assert rest == b""
    assert sorted((a["id"] is None, a["id"]) for a in answers) == [
        (False, 1), (False, 2), (False, 3), (False, 4), (False, 5), (True, None)]


def test_an_object_that_is_neither_request_notification_nor_response_is_answered(wire: Wire) -> None:
    """Repro: ``{}`` and ``{"foo":"boo"}`` (JSON-RPC's own example of an invalid request) got no answer at all: no
    ``method`` (so not a notification) and no ``result`` or ``error`` (so not a response). JSON-RPC answers an
    invalid request with ``-32600`` and a null id."""
    for line in (b"{}", b'{"foo":"boo"}', b'{"jsonrpc":"2.0"}'):
        assert wire.ask(line) == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message"}}, line
    # What could be a response (the server sends no requests, so nobody waits on it) is still not answered.
    wire.send(b'{"jsonrpc":"2.0","result":{}}')
    assert wire.ask(b'{"jsonrpc":"2.0","id":9,"method":"ping"}') == {"jsonrpc": "2.0", "id": 9, "result": {}}


def test_requests_for_the_sdk_written_just_before_input_ends_are_answered(wire: Wire) -> None:
    """Repro: a client writes requests the SDK serves (an unknown method, a listing with a cursor, a call with
    ``_meta``) and closes stdin at once, as ``printf … | dsh-todo mcp`` does: the last of them was never answered.
    The transport closed the SDK's input as soon as stdin ended, and the SDK cancelled the handler it had just
    started before it ran. Each gets its answer, or the SDK's ``Connection closed``; none is left waiting."""
    requests = [b'{"jsonrpc":"2.0","id":5,"method":"no/such/method"}',
                b'{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"cursor":"x"}}',
                b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"todo_write","arguments":'
                b'{"todos":[]},"_meta":{"progressToken":1}}}']
    for line in requests:
        wire.send(line)
    code, rest = wire.close()
    assert code == 0
    answers = [json.loads(line) for line in rest.splitlines()]
    assert sorted(answer["id"] for answer in answers) == [5, 6, 7]



def test_every_request_in_a_file_is_answered_into_a_file(tmp_path: Path) -> None:
    """Repro: ``dsh-todo mcp < requests.jsonl > answers.jsonl`` (stdin and stdout regular files) with the handshake,
    a refused call and a valid one wrote 3, 3, 1, 3, 3, 3 of the 3 answer lines in six runs (the handshake's own
    answer lost too). A direct answer left the in-flight set once computed, before its line was written, and a line
    for anything but a pipe with room is written on a worker thread: at the end of input the drain found nothing in
    flight and the server exited with answers still queued behind the write lock (a pipe the client was slow to read
    lost them the same way). Input that ends at once is the worst case, so the server is run several times."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "file", "version": "1"}}}).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        call(2, b'{"todos":[{"content":"a","status":"done"}]}'),
        call(3, b'{"todos":[{"content":"  write it ","status":"in_progress"}]}')]
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b"\n".join(lines) + b"\n")
    env = dict(os.environ)
    env.pop("DSH_TODO_ROOT", None)
    for run in range(8):
        answers_path = tmp_path / f"answers-{run}.jsonl"
        with requests.open("rb") as stdin, answers_path.open("wb") as stdout:
            done = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "mcp", "--root", str(tmp_path / "sessions")],
                                  stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, cwd=cwd, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        answers = {answer["id"]: answer for answer in map(json.loads, answers_path.read_bytes().splitlines())}
        assert sorted(answers) == [1, 2, 3], f"run {run}"
        assert text_of(answers[2]).startswith("Error: invalid arguments:")
        assert text_of(answers[3]) == "Updated todo list: 0 pending, 1 in progress, 0 completed."
