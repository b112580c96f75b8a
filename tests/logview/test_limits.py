"""The reader's bounds on hostile logs: nesting depth, line length, decompressed size. Each refusal is the reader's
corrupt-log verdict in one line, through every front door, and ``plan`` stays within a bounded peak memory.

The one-verdict-everywhere check (``plan``, ``events``, ``sessions``, the web page) runs over the crafted deep logs
in ``tests/carriers/web/test_verdicts.py``; here the messages, ``run --session`` and memory are checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from dsh_todo.harness.persistence.jsonl.limits import DEFAULT_MAX_LINE, MAX_LINE_ENV
from dsh_todo.jsonutil import MAX_VALUE_DEPTH
from dsh_todo.logview import read_plan, read_session
from tests.crafted import B_ID, copy_fixture, deep_line

_HWM = """
import atexit, sys
def _hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
atexit.register(lambda: print(f"VmHWM {_hwm()}", file=sys.stderr))
from dsh_todo.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``dsh-todo`` in a fresh interpreter that prints its own peak resident size (VmHWM) as the last stderr line."""

MEMORY_BOUND = 200 << 20
"""What ``plan`` may peak at on any input: the interpreter and its imports, one maximum line, one read piece."""


def plan_with_peak(*argv: str, env: dict[str, str] | None = None) -> tuple[int, list[str], int]:
    """Exit code, stderr lines (without the VmHWM line) and the peak resident bytes of ``dsh-todo plan``."""
    proc = subprocess.run([sys.executable, "-c", _HWM, "plan", *argv], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    *said, peak = proc.stderr.splitlines()
    assert peak.startswith("VmHWM "), proc.stderr
    return proc.returncode, said, int(peak.split()[1])


# -- depth ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("at_end", [False, True])
def test_a_line_nested_beyond_the_bound_is_refused_as_corrupt(tmp_path: Path, at_end: bool) -> None:
    """Repro: a ``step/end`` whose data nests 1,000 arrays made ``events`` die of ``RecursionError`` while ``plan``
    showed a plan; at the end of the log it would pass for a crash tail. It is neither: the line is complete and
    parses, so it is refused wherever it stands, naming the bound."""
    log = deep_line(tmp_path, at_end=at_end)
    line = 1 + next(i for i, text in enumerate(log.read_bytes().split(b"\n")) if b"[[[[" in text)
    for view in (read_plan(log), read_session(log)):
        assert view.health.state == "refused" and view.health.code == "corrupt-log"
        assert view.health.reason == (f"corrupt session log: event at line {line - 1} nests deeper than "
                                      f"{MAX_VALUE_DEPTH} levels (this reader's bound)")


def test_a_line_at_the_bound_is_read(tmp_path: Path) -> None:
    log = copy_fixture("b-three-turns/none", tmp_path)
    nested = b"[" * (MAX_VALUE_DEPTH - 2) + b"]" * (MAX_VALUE_DEPTH - 2)  # the event object, its data, then the arrays
    lines = log.read_bytes().split(b"\n")
    index = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"step/end"'))
    lines[index] = lines[index][:lines[index].index(b'"data":') + len(b'"data":')] + nested + b"}"
    log.write_bytes(b"\n".join(lines))
    view = read_session(log)
    assert view.health.state == "ok", view.health


def test_run_resume_of_a_deep_log_is_a_one_line_refusal(tmp_path: Path) -> None:
    """Repro: ``dsh-todo run --session <id>`` on the deep log printed a ``RecursionError``."""
    root = tmp_path / "root"
    log = deep_line(root)
    before = log.read_bytes()
    line = next(i for i, text in enumerate(before.split(b"\n")) if b"[[[[" in text)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "done"}]))
    proc = subprocess.run([sys.executable, "-m", "dsh_todo.cli", "run", "again", "--script", str(script),
                           "--root", str(root), "--session", B_ID], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[-1] == (f"dsh-todo run: corrupt session log: event at line {line} nests deeper "
                                            f"than {MAX_VALUE_DEPTH} levels (this reader's bound)"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert log.read_bytes() == before


# -- size -----------------------------------------------------------------------------------------------------


def _header(log: Path) -> bytes:
    return log.read_bytes().split(b"\n", 1)[0] + b"\n"


def test_a_raw_line_longer_than_the_maximum_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """Repro: one 512 MB line took 72 s and 2.1 GB before ``plan`` answered. The line here is 1 GiB (a sparse
    file: the header, then zero bytes and no newline); ``plan`` stops at the maximum line length."""
    log = copy_fixture("b-three-turns/none", tmp_path)
    header = _header(log)
    with log.open("wb") as file:
        file.write(header)
        file.truncate(1 << 30)
    code, said, peak = plan_with_peak(str(log))
    assert code == 2
    assert said == [f"dsh-todo plan: corrupt session log: line 1 is longer than {DEFAULT_MAX_LINE} "
                    f"bytes (the reader's maximum line length; set {MAX_LINE_ENV} to read longer lines)"]
    assert peak < MEMORY_BOUND, peak


def _bomb(log: Path, plaintext: int, piece: bytes) -> Path:
    """A zstd log: the fixture's header frame, then one frame of ``plaintext`` bytes of ``piece`` repeated."""
    header = _header_frame(log)
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False).compressobj()
    block = piece * ((1 << 20) // len(piece))
    frame = b"".join(compressor.compress(block) for _ in range(plaintext // len(block))) + compressor.flush()
    log.write_bytes(header + frame)
    return log


def _header_frame(log: Path) -> bytes:
    from dsh_todo.harness.persistence.jsonl.zstd import scan_frames

    data = log.read_bytes()
    start, end = scan_frames(data, max_frames=1).frames[0]
    return data[start:end]


def test_a_zstd_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """Repro: a 16.5 KB zstd log that decompresses to 3.9 GB ended in ``MemoryError``. This one decompresses to
    1 GiB of one line; the frame is decoded piece by piece and refused at the maximum line length."""
    log = _bomb(copy_fixture("b-three-turns/zstd", tmp_path), 1 << 30, b"x")
    assert log.stat().st_size < 100_000
    code, said, peak = plan_with_peak(str(log))
    assert code == 2
    assert said == [f"dsh-todo plan: corrupt session log: line 1 is longer than {DEFAULT_MAX_LINE} "
                    f"bytes (the reader's maximum line length; set {MAX_LINE_ENV} to read longer lines)"]
    assert peak < MEMORY_BOUND, peak


def test_a_zstd_bomb_of_empty_lines_ends_quickly(tmp_path: Path) -> None:
    """Half a GiB of newlines: empty lines are damage in a complete frame, which DSH refuses; the reader must get
    there without parsing half a billion lines one by one (after damage only a ``turn/end`` counts)."""
    log = _bomb(copy_fixture("b-three-turns/zstd", tmp_path), 1 << 29, b"\n")
    code, said, peak = plan_with_peak(str(log))
    assert (code, said) == (2, ["dsh-todo plan: corrupt Zstandard session log: complete frame contains a torn JSONL "
                                "record"])
    assert peak < MEMORY_BOUND, peak


def test_the_maximum_line_length_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = copy_fixture("b-three-turns/none", tmp_path)
    longest = max(map(len, log.read_bytes().split(b"\n")[1:]))
    monkeypatch.setenv(MAX_LINE_ENV, str(longest))
    assert read_plan(log).health.state == "ok"
    monkeypatch.setenv(MAX_LINE_ENV, str(longest - 1))
    view = read_plan(log)
    assert view.health.code == "corrupt-log"
    assert f"is longer than {longest - 1} bytes" in view.health.reason
