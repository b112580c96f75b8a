"""What the coding-agent CLI tests share: a scripted model on 127.0.0.1, the CLI's run, and what must be left.

Each CLI speaks its provider's wire format to a model endpoint we give it (``base_url`` and a dummy key): a
:class:`FakeModel` is that endpoint. It records every request it receives (so a test can assert what the CLI sent
its model: our tool, our result texts) and answers each one from the test's ``answer`` function, which returns a
:class:`Reply` (a JSON body, or server-sent events). The wire formats themselves (OpenAI Responses and chat
completions, Anthropic Messages, Gemini) live in the modules beside this one, one per format.

A CLI is run headless, in a folder of its own with a home of its own (``HOME`` and the CLI's config variables point
into the test's temporary folder, so nothing of the machine's user is read or written), with a deadline; then
:func:`no_server_left` checks that no ``dsh-todo mcp`` the CLI started is still running.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["DEADLINE", "FakeModel", "Reply", "Request", "Run", "fake_model", "no_server_left", "run_cli", "sse"]

DEADLINE = 180
"""Seconds one CLI run may take (start, its servers, three model turns, shutdown) before the test fails."""


@dataclass(frozen=True)
class Request:
    """One request the CLI sent its model endpoint."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    """The JSON body, or ``None`` when there was none or it was not JSON."""


@dataclass(frozen=True)
class Reply:
    """What the fake model answers: a JSON body, or the frames of a server-sent event stream (``events``)."""

    status: int = 200
    body: Any = None
    events: Sequence[bytes] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event frame carrying ``data`` as compact JSON (``event:`` line first when named)."""
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


Answer = Callable[[Request], Reply]


@dataclass
class FakeModel:
    """A model endpoint on 127.0.0.1 (see the module's docstring); ``url`` is its base, ``requests`` what came."""

    url: str
    requests: list[Request] = field(default_factory=list)


@contextmanager
def fake_model(answer: Answer) -> Iterator[FakeModel]:
    """Serve ``answer`` on a free loopback port for the ``with`` block; every request is recorded first."""
    model: FakeModel

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # the test's output stays the test's
            return

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            model.requests.append(request)
            try:
                reply = answer(request)
            except Exception as exc:  # a script that cannot answer says why, to the CLI and in the record
                reply = Reply(500, {"error": {"message": f"fake model: {exc!r}"}})
            if reply.events is not None:
                payload = b"".join(reply.events)
                content_type = "text/event-stream"
            else:
                payload = json.dumps(reply.body).encode()
                content_type = "application/json"
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    model = FakeModel(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, name="fake-model", daemon=True)
    thread.start()
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass(frozen=True)
class Run:
    """A finished CLI run."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(command: Sequence[str | os.PathLike[str]], *, cwd: Path, home: Path,
            env: Mapping[str, str] | None = None, timeout: float = DEADLINE) -> Run:
    """Run a CLI headless: stdin closed, ``HOME`` (and the XDG folders) in ``home``, the given variables on top of a
    minimal environment (``PATH``, the locale). A run that outlives ``timeout`` is killed with its process group and
    fails the test with what it printed."""
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "CI": "1",
    }
    for name in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"):
        if name in os.environ:
            base[name] = os.environ[name]
    home.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([os.fspath(part) for part in command], cwd=cwd, env={**base, **(env or {})},
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        out, err = process.communicate()
        why = f"{command[0]} did not finish within {timeout} s\nstdout:\n{out}\nstderr:\n{err}"
        raise AssertionError(why) from None
    return Run(process.returncode, out, err)


def _servers_of(root: Path) -> list[int]:
    """The pids of ``dsh-todo mcp`` processes running with ``root`` on their command line."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp" in argv and os.fsencode(root) in argv:
            pids.append(int(entry.name))
    return pids


def no_server_left(root: Path, wait: float = 10.0) -> None:
    """No ``dsh-todo mcp`` serving ``root`` is still running (after waiting up to ``wait`` s for ours to exit: the
    CLI may return before its server has finished exiting)."""


    deadline = time.monotonic() + wait
    while (left := _servers_of(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"dsh-todo mcp still running after the CLI exited: pids {left}"
