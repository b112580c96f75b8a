"""An entry under a root that cannot be read never costs the other sessions anything (issue 22, item 2).

Each breaker is real: a symbolic link loop, a folder of mode 000, a folder another user owns with mode 0700 (the
normal case in a root two users share: folders are created 0700), a ``session.jsonl.zstd`` that is not zstd. The
commands run in subprocesses for which file permissions hold: as root (tests run as root), without the two
capabilities that let root ignore them (``setpriv --bounding-set=-dac_override,-dac_read_search``), so the kernel
refuses a mode-000 folder to its owner as it would to anyone; as any other user, as that user. No call is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.crafted import A_ID, B_ID, copy_fixture

ELOOP = os.strerror(40)
EACCES = os.strerror(13)
ROOTED = os.geteuid() == 0
NOBODY = 65534


def bounded(argv: list[str]) -> list[str]:
    """``argv`` run so that file permissions apply to it (see the module's docstring)."""
    if not ROOTED:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        needs.unavailable("root ignores file modes, and setpriv (util-linux) is not here to drop that capability")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", *argv]


def dsh(*args: str, cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run(bounded([sys.executable, "-m", "dsh_todo.cli", *args]), cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def rows(out: str) -> dict[str, list[str]]:
    table = {}
    for line in out.splitlines():
        session_id, *rest = line.split("\t")
        table[session_id] = rest
    return table


def broken_root(root: Path) -> dict[str, Path]:
    """Two healthy sessions (a raw and a zstd log) and, beside them, one of every breaker; the breakers by name."""
    a_log = copy_fixture("a-one-turn/none", root)
    copy_fixture("b-three-turns/zstd", root)
    project = a_log.parent.parent
    breakers = {"session-loop": project / "looping", "session-000": project / "locked-away",
                "not-zstd": project / "not-zstd", "project-loop": root / "--looping--",
                "project-000": root / "--locked-away--"}
    breakers["session-loop"].symlink_to("looping")
    breakers["project-loop"].symlink_to("--looping--")
    for name in ("session-000", "project-000"):
        shutil.copytree(a_log.parent, breakers[name] / "s" if name == "project-000" else breakers[name])
        breakers[name].chmod(0)
    breakers["not-zstd"].mkdir()
    (breakers["not-zstd"] / "session.jsonl.zstd").write_bytes(b"plain text, not a zstd frame\n")
    if ROOTED:  # another user's folders in a shared root: not ours to judge
        breakers["foreign-session"] = project / "someone-else"
        breakers["foreign-project"] = root / "--someone-else--"
        for name in ("foreign-session", "foreign-project"):
            shutil.copytree(a_log.parent, breakers[name] / "s" if name == "foreign-project" else breakers[name])
            for path in [breakers[name], *breakers[name].rglob("*")]:
                os.chown(path, NOBODY, NOBODY)
            breakers[name].chmod(0o700)
    return breakers


SCRIPT = [{"tool_calls": [{"name": "todo_write", "arguments": json.dumps(
    {"todos": [{"content": "write it", "status": "in_progress"}]})}]}, {"text": "done"}]


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "root"
    yield root
    if root.exists():  # open every folder again, before it is entered, so pytest can remove the tree
        root.chmod(0o700)
        for parent, folders, _ in os.walk(root):
            for name in folders:
                if not Path(parent, name).is_symlink():
                    Path(parent, name).chmod(0o700)


def test_an_unreadable_entry_costs_the_other_sessions_nothing(tmp_path: Path, root: Path) -> None:
    """Repro: a session folder that is a symlink loop or of mode 000 made ``dsh-todo sessions`` exit 2 listing
    nothing (``cannot list the sessions: [Errno 40] Too many levels of symbolic links``, ``[Errno 13] Permission
    denied``) and the web's ``session.list`` answer 500; the same directly under the root (a loop, or an unreadable
    project folder) made ``plan``, ``events`` and ``run --session brand-new`` fail for every other session; a
    ``session.jsonl.zstd`` that is not zstd made ``sessions`` say ``cannot list the sessions: corrupt Zstandard
    session log: invalid frame magic at byte 0``. Now what cannot be read is one row with its reason, what is not
    ours to judge (a project folder we cannot list, another user's session folder) is left out, and every other
    session reads and writes as before."""
    breakers = broken_root(root)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    work = tmp_path / "work"
    work.mkdir()

    code, out, err = dsh("sessions", "--root", str(root), cwd=work)
    assert (code, err) == (0, "")
    table = rows(out)
    not_zstd = breakers["not-zstd"] / "session.jsonl.zstd"
    plan_code, _, plan_err = dsh("plan", str(not_zstd), cwd=work)
    assert plan_code == 2 and plan_err.count("\n") == 1
    zstd_reason = plan_err.removeprefix("dsh-todo plan: ").rstrip("\n")
    assert table == {
        A_ID: ["2 in progress · 1 pending", str(next(root.glob(f"*/{A_ID}/session.jsonl"))), "ok"],
        B_ID: ["empty plan", str(next(root.glob(f"*/{B_ID}/session.jsonl.zstd"))), "ok"],
        "looping": ["-", str(breakers["session-loop"]), f"refused: cannot read {breakers['session-loop']}: {ELOOP}"],
        "locked-away": ["-", str(breakers["session-000"]),
                        f"refused: cannot read {breakers['session-000']}: {EACCES}"],
        "not-zstd": ["-", str(not_zstd), f"refused: {zstd_reason}"],
    }

    for command in (["plan"], ["events"], ["watch", "--seconds", "0.5"]):
        code, out, err = dsh(*command, "--root", str(root), A_ID, cwd=work)
        assert (code, err) == (0, ""), command
        assert out.strip(), command
    for source in (["--root", str(root), "locked-away"], [str(breakers["session-000"])]):  # by id, by path
        code, out, err = dsh("plan", *source, cwd=work)
        assert (code, out, err) == (2, "", f"dsh-todo plan: cannot read {breakers['session-000']}: {EACCES}\n")

    for session in ("brand-new", B_ID):  # a new session, and one resumed: both written beside the breakers
        code, out, err = dsh("run", "--root", str(root), "--script", str(script), "--session", session, "go",
                             cwd=work)
        assert code == 0, err
        code, out, err = dsh("plan", "--root", str(root), session, cwd=work)
        assert (code, err) == (0, "")
        assert out.startswith("To-dos: 1 in progress")

    listed = web_list(root, work)
    by_id = {row["sessionId"]: row for row in listed}
    assert set(by_id) == {A_ID, B_ID, "brand-new", "looping", "locked-away", "not-zstd"}
    assert all("error" not in by_id[session] for session in (A_ID, B_ID, "brand-new"))
    assert by_id["locked-away"]["error"] == {"code": "internal",
                                             "message": f"cannot read {breakers['session-000']}: {EACCES}"}
    assert by_id["not-zstd"]["error"]["message"] == zstd_reason


def web_list(root: Path, work: Path) -> list[dict[str, Any]]:
    """``session.list`` from ``dsh-todo web --root ROOT`` (a subprocess, loopback, a free port), after checking that
    a healthy session's history page reads."""
    process = subprocess.Popen(bounded([sys.executable, "-m", "dsh_todo.cli", "web", "--root", str(root), "--port",
                                        "0"]), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.communicate(timeout=10)
        body = json.dumps({"type": "client-request", "rpcId": "l", "method": "session.list", "payload": {}})
        request = urllib.request.Request(url + "api/session.list", data=body.encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
            rows: list[dict[str, Any]] = json.loads(response.read())["result"]["value"]["sessions"]
        body = json.dumps({"type": "client-request", "rpcId": "h", "method": "session.history",
                           "payload": {"sessionId": A_ID}})
        request = urllib.request.Request(url + "api/session.history", data=body.encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:  # a healthy session's page reads too
            assert response.status == 200
            assert json.loads(response.read())["result"]["ok"] is True
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
        return rows
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
