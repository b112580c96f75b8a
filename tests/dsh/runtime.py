"""The real DeepSeek Harness 0.2.1 (``dsh``) driven offline: where its command is, a turn, its plan, its export.

``dsh`` comes from the ``deepseek-harness-runtime-bin`` wheel pinned in the dev group (Linux x86-64 only): a console
script that execs a single-file Node executable. It reaches nothing but its model endpoint; everything it keeps is
in three folders, which the tests point at scratch folders of their own:

- ``DSH_HOME`` (required, never ``~/.dsh`` by default): its profiles, ``sessions/`` (the JSONL root, one
  ``--<projectKey(cwd)>--/<id>/session.v4.jsonl[.zstd]`` per session) and ``storages/session_projcache/`` (the
  projection cache, written when ``dsh`` exits);
- ``HOME``: about 81 MB unpacked into ``.cache/pkg`` on first start, reused later (one per test run: :class:`Scratch`);
- ``TMPDIR``: spill folders.

Cost, measured on the 2-core machine: a ``dsh headless`` turn of a few scripted steps takes 1.3-1.7 s and peaks at
about 350 MB resident; ``dsh --version`` about 0.13 s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from http.cookiejar import CookieJar
from io import BytesIO
from pathlib import Path
from typing import Any

import zstandard

from tests import needs

__all__ = [
    "VERSION", "Home", "Scratch", "Turn", "dsh_command", "exported", "log_lines", "log_of", "opened", "projection",
    "run_turn", "start_turn", "turn_of",
]

VERSION = "0.2.1-rc.2"
"""What ``dsh --version`` prints for the pinned wheel (``deepseek-harness-runtime-bin==0.2.1rc2``)."""

TURN_SECONDS = 90
"""How long one ``dsh`` run may take before the test fails (a turn normally takes under 2 s)."""

RAW_PATCH = "[{id: session-persistence-jsonl, config: {root: !!js dshHomePath('sessions'), compression: none}}]\n"
"""A ``--patch`` overlay: DSH's JSONL persistence writes raw ``session.v4.jsonl`` logs instead of zstd."""

SINGLE_PATCH = "[{id: tool-todo, config: {allowParallelInProgress: false}}]\n"
"""A ``--patch`` overlay: ``todo_write`` with the single policy (at most one item ``in_progress``)."""


def dsh_command() -> Path:
    """The ``dsh`` command of this environment, checked to be the pinned release; else
    :func:`tests.needs.unavailable`.

    It is the console script beside this interpreter (what ``uv run dsh`` runs), not one found on ``PATH``: the
    suite tests the wheel this project pins."""
    command = Path(sysconfig.get_path("scripts")) / "dsh"
    if not command.exists():
        where = f"{sys.platform} {os.uname().machine}" if hasattr(os, "uname") else sys.platform
        needs.unavailable(f"the dsh command is not installed in this environment ({command}): "
                          f"deepseek-harness-runtime-bin"
                          f"=={VERSION.replace('-rc.', 'rc')} is in the dev group for Linux x86-64 (this is {where}); "
                          "`uv sync` installs it")
    try:
        done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, env={**_base_env(), "DSH_HOME": os.devnull})
    except (OSError, subprocess.TimeoutExpired) as exc:
        needs.unavailable(f"{command} --version failed: {exc}")
    if done.stdout.strip() != VERSION:
        needs.unavailable(f"{command} --version printed {done.stdout.strip()!r} (exit {done.returncode}, "
                          f"{done.stderr.strip()[-200:]!r}), not {VERSION}")
    return command


def _base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "NO_COLOR": "1"}


@dataclass(frozen=True)
class Scratch:
    """``HOME`` and ``TMPDIR`` for every ``dsh`` of a test run (the 81 MB unpack happens once)."""

    home: Path
    tmp: Path

    @classmethod
    def make(cls, where: Path) -> Scratch:
        scratch = cls(where / "home", where / "tmp")
        scratch.home.mkdir(parents=True, exist_ok=True)
        scratch.tmp.mkdir(parents=True, exist_ok=True)
        return scratch


@dataclass(frozen=True)
class Home:
    """One ``DSH_HOME`` (``path``) with the scratch folders its ``dsh`` runs use."""

    path: Path
    scratch: Scratch

    @classmethod
    def make(cls, path: Path, scratch: Scratch) -> Home:
        """A new, non-empty ``DSH_HOME`` (``dsh`` refuses an empty one)."""
        path.mkdir(parents=True, exist_ok=True)
        (path / ".keep").write_text("")
        return cls(path, scratch)

    @property
    def sessions(self) -> Path:
        """The JSONL root DSH writes its sessions under."""
        return self.path / "sessions"

    def copy(self, to: Path) -> Home:
        """A copy of this home as it is now (a snapshot taken between turns, or a throwaway to resume in)."""
        shutil.copytree(self.path, to, symlinks=True)
        return Home(to, self.scratch)

    def env(self, model_url: str) -> dict[str, str]:
        """The environment of a ``dsh`` run against the model at ``model_url`` (any key does)."""
        return {**_base_env(), "DSH_HOME": str(self.path), "HOME": str(self.scratch.home),
                "TMPDIR": str(self.scratch.tmp), "DEEPSEEK_BASE_URL": model_url, "DEEPSEEK_API_KEY": "x"}


@dataclass(frozen=True)
class Turn:
    """A finished ``dsh headless --json`` run: its exit status, the JSON lines it printed and its stderr."""

    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    @property
    def session_id(self) -> str:
        """The id of the session the run used (its first JSON line, ``{"type": "session", "sessionId"…}``)."""
        found = [event["sessionId"] for event in self.events if event.get("type") == "session"]
        assert found, f"dsh printed no session line (exit {self.returncode}): {self.events} {self.stderr[-800:]}"
        return str(found[0])

    def describe(self) -> str:
        return f"dsh exited {self.returncode}\nstdout: {self.events}\nstderr: {self.stderr[-2000:]}"


def _argv(dsh: Path, prompt: str, session_id: str | None, patch: str | None, where: Path) -> list[str]:
    argv = [str(dsh), "headless"]
    if patch is not None:  # a launcher option: after the profile's name, before the app's own options
        patch_file = where / f"patch-{abs(hash(patch)):x}.yml"
        patch_file.write_text(patch)
        argv += ["--patch", str(patch_file)]
    argv.append("--json")
    if session_id is not None:
        argv += ["--session-id", session_id]
    return [*argv, prompt]


def start_turn(dsh: Path, home: Home, cwd: Path, prompt: str, model_url: str, *, session_id: str | None = None,
               patch: str | None = None) -> subprocess.Popen[str]:
    """Start ``dsh headless [--patch FILE] --json [--session-id ID] PROMPT`` in ``cwd`` (a session must be resumed
    from the folder it was recorded in), in a process group of its own, stdin closed. ``patch``: the text of a
    ``--patch`` overlay (:data:`RAW_PATCH`, :data:`SINGLE_PATCH`), written beside the home."""
    argv = _argv(dsh, prompt, session_id, patch, home.path.parent)
    return subprocess.Popen(argv, cwd=cwd, env=home.env(model_url), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def turn_of(process: subprocess.Popen[str], timeout: float = TURN_SECONDS) -> Turn:
    """Wait for a started run; one that outlives ``timeout`` is killed with its group and fails the test."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(f"dsh did not finish within {timeout} s\nstdout: {out}\nstderr: {err[-2000:]}") from None
    events = []
    for line in out.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"type": "(not JSON)", "line": line})
    return Turn(process.returncode, events, err)


def run_turn(dsh: Path, home: Home, cwd: Path, prompt: str, model_url: str, *, session_id: str | None = None,
             patch: str | None = None) -> Turn:
    """One ``dsh headless`` turn (see :func:`start_turn`), waited for."""
    return turn_of(start_turn(dsh, home, cwd, prompt, model_url, session_id=session_id, patch=patch))


def projection(home: Home, session_id: str, name: str = "todos") -> Any:
    """DSH's own value of one projection of a session: ``record.rows[name].val`` of its projection cache,
    ``$DSH_HOME/storages/session_projcache/sessions/<id>.json`` (``todos``: ``{"ver": 2, "seq", "val"}``).

    The cache is written when ``dsh`` exits, and a resumed headless turn clears the standing plan at its
    ``turn/start``: the plan a turn ended with is read from a copy of the home taken right after that turn."""
    path = home.path / "storages" / "session_projcache" / "sessions" / f"{session_id}.json"
    rows = json.loads(path.read_text(encoding="utf-8"))["record"]["rows"]
    assert name in rows, f"DSH's projection cache of {session_id} has no {name!r} row: {sorted(rows)}"
    return rows[name]["val"]


def log_of(root: Path, session_id: str) -> Path:
    """The one log file of ``session_id`` under a JSONL root (whatever its project folder, version, encoding)."""
    found = [path for path in root.glob(f"--*--/{session_id}/session*.jsonl*") if path.name != "session.lock"]
    assert len(found) == 1, f"expected one log of {session_id} under {root}, found {found}"
    return found[0]


def log_lines(path: Path) -> list[bytes]:
    """A log's lines as stored (zstd frames decompressed), each without its ``\\n``; a torn zstd frame at the end
    is left out (what was fully written before it is kept), as a reader recovering the log would."""
    raw = path.read_bytes()
    if path.name.endswith(".zstd"):
        out = bytearray()
        reader = zstandard.ZstdDecompressor().stream_reader(BytesIO(raw), read_across_frames=True)
        try:
            while chunk := reader.read(1 << 16):
                out += chunk
        except zstandard.ZstdError:
            pass
        raw = bytes(out)
    lines = raw.split(b"\n")
    return lines[:-1]  # the last piece follows the last \n: empty, or a torn line


# -- dsh web: DSH's export of a session ----------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def exported(dsh: Path, home: Home, session_ids: Sequence[str]) -> dict[str, bytes | int]:
    """DSH's export of each session of ``home``: its log in format v4, as DSH reads it.

    ``dsh web --no-open --host 127.0.0.1 --port P`` serves DSH's browser client (``--port 0`` picks a free port,
    but the URL it prints is the only way to learn it; this picks one first). Its first stdout line is
    ``dsh web: http://127.0.0.1:P/?token=T``: a ``GET`` of that URL answers ``303`` with the auth cookie
    (``dsh-auth-…``, ``HttpOnly``, ``SameSite=Strict``) that every ``/api/…`` call needs (without it: ``401``).
    ``GET /api/session.export?sessionId=ID`` then answers ``application/zip`` (``attachment;
    filename="dsh-session-ID.zip"``) holding one member, ``session.v4.jsonl``: the decoded log, byte for byte the
    stored one's lines for a v4 log (whichever its encoding), a v0 log migrated to v4 in memory (the file is left
    as it is); an unknown id answers ``404`` ``session not found``. Two entries fail to activate at start (a
    directory picker and an office converter that the wheel leaves out); the server works without them.

    Returns each id's ``session.v4.jsonl`` bytes, or the HTTP status when the export was refused."""
    port = _free_port()
    argv = [str(dsh), "web", "--no-open", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(argv, cwd=home.path, env=home.env("http://127.0.0.1:9"), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert first.startswith(f"dsh web: http://127.0.0.1:{port}/?token="), (
            f"dsh web printed {first!r}; stderr: {process.stderr.read()[-2000:] if process.poll() is not None else ''}")
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        opener.open(first.removeprefix("dsh web: "), timeout=30).read()
        found: dict[str, bytes | int] = {}
        for session_id in session_ids:
            try:
                with opener.open(f"http://127.0.0.1:{port}/api/session.export?sessionId={session_id}",
                                 timeout=60) as response:
                    assert response.headers["content-type"] == "application/zip"
                    with zipfile.ZipFile(BytesIO(response.read())) as archive:
                        assert archive.namelist() == ["session.v4.jsonl"]
                        found[session_id] = archive.read("session.v4.jsonl")
            except urllib.error.HTTPError as refused:
                found[session_id] = refused.code
        return found
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


# -- the SDK: a session opened without input -----------------------------------------------------------------------

def opened(home: Home, cwd: Path, session_id: str) -> None:
    """Open a session through DSH's Python SDK (``resume_session``) without sending input, then close it: DSH
    loads and repairs the log (an interrupted turn gets its closers, every reopen a ``session/end-seed``) and
    writes its projection cache at exit, without the ``turn/start`` of a new turn clearing the standing plan.
    Raises what the SDK raises when DSH cannot open the log."""
    from deepseek_harness import DeepSeekHarness, DeepSeekHarnessConfig

    env = {key: value for key, value in home.env("http://127.0.0.1:9").items() if key != "PATH"}
    config = DeepSeekHarnessConfig(cwd=str(cwd), dsh_home=str(home.path), env=env,
                                   dsh_bin=str(_runtime_executable()), request_timeout_seconds=TURN_SECONDS,
                                   shutdown_timeout_seconds=30)
    with DeepSeekHarness(config) as harness:
        harness.resume_session(session_id)


def _runtime_executable() -> Path:
    """The Node executable the ``dsh`` console script execs (the SDK launches it directly)."""
    from deepseek_harness_runtime import bundled_runtime_path

    return bundled_runtime_path()
