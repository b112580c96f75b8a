"""Runs of lines proven clean in bulk read exactly as the exact pass reads them.

A pass that keeps no events (``read_plan``, ``sessions``) lets :func:`~dsh_todo.harness.persistence.jsonl.bulk.prove`
take whole runs of lines at once; whatever it cannot prove goes through the exact pass. These tests read every log
twice, with the bulk proof and with it switched off, and require the same answer to the last byte of every error
text: DSH's fixtures, the crafted damaged logs, and a few thousand mutations of a log with every kind of line
(packed rows of each tag, plan events, an open turn), cut into pieces of several sizes so that runs start and end
anywhere.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.harness import Agent
from dsh_todo.harness.persistence.errors import SessionLogError
from dsh_todo.harness.persistence.interest import Interest
from dsh_todo.harness.persistence.jsonl import bulk, reading, scan
from dsh_todo.harness.persistence.jsonl.checkpoint import CHECKPOINT_NAME
from dsh_todo.harness.persistence.jsonl.limits import MAX_LINE_ENV
from dsh_todo.harness.persistence.jsonl.zstd import compress_frame, scan_frames
from dsh_todo.jsonutil import loads
from dsh_todo.logview import read_plan
from dsh_todo.logview.plan import PLAN_INTEREST
from dsh_todo.standard import open_runtime
from dsh_todo.tool_todo.rules import PLAN_EVENT_TYPES, replaces_plan
from tests.crafted import CRAFTED, FIXTURES

PIECES = (64, 1000, 256 << 10)
"""Piece sizes the passes read in: runs then start and end anywhere, inside lines too."""


def _outcome(log: Path) -> tuple[Any, ...]:
    """Everything a pass that keeps no events answers: the pass's own findings (or its error) and the reader's."""
    try:
        found = reading.scan_log(log, keep=False, wanted=PLAN_INTEREST)
        scanned: tuple[Any, ...] = (found.count, found.torn_at, found.cut_frame_events, found.last_record,
                                    found.open_turn, found.closers())
    except SessionLogError as exc:
        scanned = (type(exc).__name__, str(exc))
    return scanned, read_plan(log)


def same_both_ways(log: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The outcome with the bulk proof equals the outcome without, at every piece size; returns how many runs were
    proven (so a test can tell it did not compare the exact pass with itself)."""
    proven = 0
    prove = bulk.prove

    def counted(*args: Any, **kwargs: Any) -> bulk.Proven | None:
        nonlocal proven
        result = prove(*args, **kwargs)
        proven += result is not None
        return result

    monkeypatch.setattr(scan, "BULK_MIN", 0)
    for size in PIECES:
        monkeypatch.setattr(reading, "CHUNK_SIZE", size)
        monkeypatch.setattr(scan, "prove", counted)
        fast = _outcome(log)
        with monkeypatch.context() as exact:
            exact.setattr(reading._Pass, "__init__", _exact_pass)
            assert _outcome(log) == fast, f"pieces of {size} bytes"
    monkeypatch.undo()
    return proven


_PASS_INIT = reading._Pass.__init__


def _exact_pass(self: reading._Pass, scanner: scan.LogScanner, path: Path, keep: bool,
                observe: reading.Observer | None, wanted: Interest | None = None,
                expand: bool = False) -> None:
    """A pass as it reads without the bulk proof: every line by the exact rules, pieces fed as they come."""
    _PASS_INIT(self, scanner, path, keep, observe, None, expand)


def _fixture_logs() -> list[Path]:
    return sorted(FIXTURES.glob("**/store/*/*/session*.jsonl*"))


@pytest.mark.parametrize("source", _fixture_logs(), ids=lambda path: str(path.relative_to(FIXTURES)).split("/store")[0])
def test_every_dsh_fixture_reads_the_same(source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = next(parent for parent in source.parents if parent.name == "store")
    shutil.copytree(store, tmp_path / "store")
    log = tmp_path / "store" / source.relative_to(store)
    (log.parent / CHECKPOINT_NAME).unlink(missing_ok=True)
    same_both_ways(log, monkeypatch)


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_every_crafted_log_reads_the_same(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = CRAFTED[name](tmp_path)
    for log in made if isinstance(made, tuple) else (made,):
        if log.is_file():
            same_both_ways(log, monkeypatch)


def _session_lines(root: Path, version: int) -> tuple[bytes, list[bytes]]:
    """A raw log with every kind of line of format ``version``, its last turn left open: (the header line, the event
    lines). In v0 delta runs are packed rows; in v4 each assistant message names its step's chunks, a run its
    ``sourceEventSeqs`` stores as a range."""
    ctx = open_runtime(root, compression="none", batch_delay_ms=60_000)
    session = ctx.sessions.create("s", cwd="/w", **({"version": 0} if version == 0 else {}))
    agent = Agent("a", session)
    for number in range(1, 9):
        session.append("turn/start", {"turn": number})
        for step in (1, 2):
            started = session.append("step/start", {"turn": number, "step": step})["seq"]
            for kind in ("reasoning-delta", "text-delta"):
                for index in range(3 + step):
                    session.append("assistant/chunk", {"turn": number, "step": step, "chunk": {
                        "type": kind, "index": 0, "text": f"ü{number}-{index} "}})
            for index in range(3):
                chunk = {"type": "tool-call-delta", "index": 1, "id": f"c{number}{step}", "argumentsDelta": f"{index}"}
                if step == 1:
                    chunk["name"] = "todo_write"
                session.append("assistant/chunk", {"turn": number, "step": step, "chunk": chunk})
            todos = [{"content": f"task {number}.{step}", "status": "in_progress"},
                     {"content": "后来", "status": "pending"}]
            session.append("assistant/message", {"turn": number, "step": step, "message": {
                "id": f"m{number}{step}", "role": "assistant",
                "content": [{"type": "tool-call", "id": f"c{number}{step}", "name": "todo_write",
                             "arguments": {"todos": todos}}]}}, surface_op="append",
                            source_event_seqs=range(started + 1, session.seq) if version == 4 else None)
            asyncio.run(ctx.tools.execute("todo_write", {"todos": todos}, agent=agent))
            if number < 8 or step == 1:
                session.append("step/end", {"turn": number, "step": step})
        if number < 8:
            session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
        ctx.session_persistence.flush()
    ctx.session_persistence.flush()
    log = next(root.glob("*/s/session*.jsonl"))
    assert log.name == ("session.jsonl" if version == 0 else "session.v4.jsonl")
    data = log.read_bytes()
    ctx.dispose()
    lines = data.split(b"\n")
    assert lines.pop() == b""
    return lines[0] + b"\n", lines[1:]


@pytest.fixture(scope="module", params=[0, 4], ids=["v0", "v4"])
def session_lines(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  ) -> tuple[bytes, list[bytes]]:
    """The lines of a log in each format this harness reads: DSH 0.1's v0 and DSH 0.2's v4."""
    return _session_lines(tmp_path_factory.mktemp("made"), request.param)


def _write(target: Path, header: bytes, lines: list[bytes], zstd: bool, torn: int = 0) -> Path:
    """The lines as a log at ``target`` (a session directory), raw or as zstd frames of a few lines each."""
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("session*.jsonl*"):
        old.unlink()
    name = "session.jsonl" if b'"version":0,' in header else "session.v4.jsonl"
    body = b"".join(line + b"\n" for line in lines)
    if torn:
        body = body[:-torn]
    if not zstd:
        log = target / name
        log.write_bytes(header + body)
        return log
    frames = [compress_frame(header)]
    step = 7
    cut = 0
    while cut < len(body):
        end = body.find(b"\n", cut + 1, len(body))
        for _ in range(step - 1):
            if end < 0:
                break
            end = body.find(b"\n", end + 1, len(body))
        end = len(body) if end < 0 else end + 1
        frames.append(compress_frame(body[cut:end]))
        cut = end
    log = target / f"{name}.zstd"
    log.write_bytes(b"".join(frames))
    return log


def test_a_clean_log_is_proven_and_reads_the_same(session_lines: tuple[bytes, list[bytes]], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    header, lines = session_lines
    if b'"version":0,' in header:
        assert any(line.startswith(b'{"type":"tool-call-chunks"') for line in lines)
    else:
        assert not any(b"-chunks" in line for line in lines)
        assert sum(b',"sourceEventSeqs":[[' in line for line in lines) == 16
    for zstd in (False, True):
        log = _write(tmp_path / "--w--" / "s", header, lines, zstd)
        assert same_both_ways(log, monkeypatch) > 0
        view = read_plan(log)
        assert view.health.state == "recovered" and view.plan == [
            {"content": "task 8.2", "status": "in_progress"}, {"content": "后来", "status": "pending"}]


Mutation = Callable[[random.Random, list[bytes]], None]


def _pick(rng: random.Random, lines: list[bytes], *prefixes: bytes) -> int:
    found = [index for index, line in enumerate(lines) if line.startswith(prefixes or (b"",))]
    return rng.choice(found) if found else rng.randrange(len(lines))


def _in_value(rng: random.Random, lines: list[bytes], what: bytes, prefixes: tuple[bytes, ...] = ()) -> None:
    """Put ``what`` where a value starts (after a ``:``) in one line."""
    index = _pick(rng, lines, *prefixes)
    line = lines[index]
    spots = [at + 1 for at in range(len(line)) if line[at:at + 1] == b":"]
    at = rng.choice(spots)
    end = line.find(b",", at)
    end = line.rfind(b"}") if end < 0 else end
    lines[index] = line[:at] + what + line[end:]


def _replace(rng: random.Random, lines: list[bytes], old: bytes, new: bytes, *prefixes: bytes) -> None:
    index = _pick(rng, lines, *prefixes)
    lines[index] = lines[index].replace(old, new, 1)


MUTATIONS: dict[str, Mutation] = {
    "flip a bit": lambda rng, lines: _flip(rng, lines),
    "not UTF-8": lambda rng, lines: _replace(rng, lines, "ü".encode(), b"\xfc", b'{"type":"reasoning-chunks"'),
    "UTF-8 surrogate": lambda rng, lines: _replace(rng, lines, "ü".encode(), b"\xed\xa0\x80"),
    "lone surrogate escape": lambda rng, lines: _replace(rng, lines, "ü".encode(), b"\\ud800"),
    "lone surrogate in the plan": lambda rng, lines: _replace(rng, lines, b"task", b"\\udc00",
                                                              b'{"type":"todo/write"'),
    "deep 600": lambda rng, lines: _in_value(rng, lines, b"[" * 600 + b"]" * 600),
    "deep 513": lambda rng, lines: _in_value(rng, lines, b"[" * 513 + b"]" * 513),
    "deep 512": lambda rng, lines: _in_value(rng, lines, b"[" * 511 + b"]" * 511),
    "deep 2000": lambda rng, lines: _in_value(rng, lines, b"[" * 2000 + b"]" * 2000),
    "long and shallow": lambda rng, lines: _in_value(rng, lines, b"[" + b"[1]," * 600 + b"1]"),
    "long string": lambda rng, lines: _in_value(rng, lines, b'"' + b"x" * 5000 + b'"'),
    "duplicate type": lambda rng, lines: _replace(rng, lines, b'"seq"', b'"type":"turn/end","seq"'),
    "duplicate type last": lambda rng, lines: _dup_last(rng, lines, b',"type":"turn/start"}'),
    "duplicate seq": lambda rng, lines: _dup_last(rng, lines, b',"seq":3}'),
    "duplicate seq0": lambda rng, lines: _dup_last(rng, lines, b',"seq0":1}', b'{"type":"text-chunks"'),
    "duplicate data": lambda rng, lines: _dup_last(rng, lines, b',"data":{"todos":7}}', b'{"type":"todo/write"'),
    "blank line": lambda rng, lines: lines.insert(rng.randrange(len(lines)), b""),
    "space line": lambda rng, lines: lines.insert(rng.randrange(len(lines)), b"  "),
    "carriage return": lambda rng, lines: _edit(rng, lines, lambda line: line + b"\r"),
    "leading space": lambda rng, lines: _edit(rng, lines, lambda line: b" " + line),
    "two on a line": lambda rng, lines: _join(rng, lines, b" "),
    "two glued": lambda rng, lines: _join(rng, lines, b""),
    "split at a comma": lambda rng, lines: _edit(rng, lines, lambda line: line.replace(b",", b",\n", 1)),
    "seq as float": lambda rng, lines: _edit(rng, lines, _seq_as(b".0")),
    "seq as exponent": lambda rng, lines: _edit(rng, lines, _seq_as(b"e0")),
    "seq as true": lambda rng, lines: _replace(rng, lines, b'"seq":1,', b'"seq":true,'),
    "seq huge": lambda rng, lines: _edit(rng, lines, _seq_as(b"000000000000000000000")),
    "seq missing": lambda rng, lines: _edit(rng, lines, lambda line: line.replace(b'"seq":', b'"sequence":', 1)),
    "dt too long": lambda rng, lines: _replace(rng, lines, b'"dt":[', b'"dt":[0,', b'{"type":"text-chunks"'),
    "dt too short": lambda rng, lines: _edit(rng, lines, _dt_short),
    "dt huge": lambda rng, lines: _replace(rng, lines, b'"dt":[', b'"dt":[4294967297,', b'{"type":"reasoning'),
    "dt float": lambda rng, lines: _replace(rng, lines, b'"dt":[', b'"dt":[0.5,', b'{"type":"text-chunks"'),
    "time0 huge": lambda rng, lines: _replace(rng, lines, b'"time0":', b'"time0":3', b'{"type":"tool-call'),
    "time0 negative": lambda rng, lines: _replace(rng, lines, b'"time0":', b'"time0":-', b'{"type":"text-chunks"'),
    "seq0 float": lambda rng, lines: _replace(rng, lines, b',"time0"', b'.0,"time0"', b'{"type":"text-chunks"'),
    "row extra key": lambda rng, lines: _dup_last(rng, lines, b',"x":1}', b'{"type":"tool-call-chunks"'),
    "row data extra key": lambda rng, lines: _replace(rng, lines, b'"dt":', b'"x":1,"dt":', b'{"type":"text'),
    "row without name": lambda rng, lines: _replace(rng, lines, b'"name":"todo_write",', b'',
                                                    b'{"type":"tool-call-chunks"'),
    "row name not text": lambda rng, lines: _replace(rng, lines, b'"name":"todo_write"', b'"name":1',
                                                     b'{"type":"tool-call-chunks"'),
    "row texts empty": lambda rng, lines: _edit(rng, lines, _texts_empty),
    "row member not text": lambda rng, lines: _replace(rng, lines, b'"texts":["', b'"texts":[1,"',
                                                       b'{"type":"reasoning-chunks"'),
    "row turn text": lambda rng, lines: _replace(rng, lines, b'"turn":', b'"turn":"', b'{"type":"text-chunks"'),
    "todo/write without data": lambda rng, lines: _replace(rng, lines, b'"data":', b'"datum":',
                                                           b'{"type":"todo/write"'),
    "todos not a list": lambda rng, lines: _all(lines, b'{"type":"todo/write"', b'"data":{"todos":5,"x":'),
    "todos null": lambda rng, lines: _all(lines, b'{"type":"todo/write"', b'"data":{"todos":null,"x":'),
    "last todos not a list": lambda rng, lines: _last(lines, b'{"type":"todo/write"', b'"data":{"todos":"x","y":'),
    "todos item bad": lambda rng, lines: _replace(rng, lines, b'"status":"pending"', b'"status":"done"',
                                                  b'{"type":"todo/write"'),
    "unknown type": lambda rng, lines: _replace(rng, lines, b'"type":"step/end"', b'"type":"step/odd"'),
    "ignorable type": lambda rng, lines: _replace(rng, lines, b'"type":"step/end"',
                                                  b'"type":"step/odd","ignorable":true'),
    "escaped type": lambda rng, lines: _replace(rng, lines, b'"type":"turn/start"', b'"type":"turn\\/start"'),
    "type not text": lambda rng, lines: _replace(rng, lines, b'"type":"step/start"', b'"type":["step/start"]'),
    "not an object": lambda rng, lines: _edit(rng, lines, lambda line: b"[" + line + b"]"),
    "scalar line": lambda rng, lines: lines.insert(rng.randrange(len(lines)), b"7"),
    "trailing comma": lambda rng, lines: _edit(rng, lines, lambda line: line[:-1] + b",}"),
    "NaN": lambda rng, lines: _in_value(rng, lines, b"NaN"),
    "big integer": lambda rng, lines: _in_value(rng, lines, b"123456789012345678901234567890"),
    "line dropped": lambda rng, lines: lines.pop(rng.randrange(len(lines))),
    "line repeated": lambda rng, lines: _edit(rng, lines, lambda line: line + b"\n" + line),
    "turn/start dropped": lambda rng, lines: lines.pop(_pick(rng, lines, b'{"type":"turn/start"')),
    "turn/end dropped": lambda rng, lines: lines.pop(_pick(rng, lines, b'{"type":"turn/end"')),
    "cut": lambda rng, lines: _edit(rng, lines, lambda line: line[:rng.randrange(len(line))]),
}

RANGE_MUTATIONS: dict[str, Mutation] = {
    # format v4's sourceEventSeqs ranges (a v0 log has none: these then change nothing or a random line)
    "range reversed": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[%d,%d]" % (b, a)),
    "range to its own seq": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[%d,%d]" % (a, b + 1)),
    "range of one": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[%d,%d]" % (a, a)),
    "range of three": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[%d,%d,%d]" % (a, a + 1, b)),
    "range bound float": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[%d.0,%d]" % (a, b)),
    "range bound negative": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[-1,%d]" % b),
    "range and a member": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"%d,[%d,%d]" % (a, a, b)),
    "range member before": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"%d,[%d,%d]" % (a - 1, a, b)),
    "range twice": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[%d,%d],[%d,%d]" % (a, b, a, b)),
    "range nested": lambda rng, lines: _in_range(rng, lines, lambda a, b: b"[[%d,%d]]" % (a, b)),
    "range spaced": lambda rng, lines: _in_range(rng, lines, lambda a, b: b" [ %d , %d ] " % (a, b)),
    "range after a space": lambda rng, lines: _replace(rng, lines, b'"sourceEventSeqs":[[', b'"sourceEventSeqs": [['),
    "range key escaped": lambda rng, lines: _replace(rng, lines, b'"sourceEventSeqs":', b'"source\\u0045ventSeqs":'),
    "range key twice": lambda rng, lines: _replace(rng, lines, b'"sourceEventSeqs":', b'"sourceEventSeqs":[1],'
                                                   b'"sourceEventSeqs":'),
    "seqs not a list": lambda rng, lines: _replace(rng, lines, b'"sourceEventSeqs":[', b'"sourceEventSeqs":{"x":['),
    "seqs a number": lambda rng, lines: _replace(rng, lines, b',"sourceEventSeqs":[', b',"sourceEventSeqs":7,"y":['),
    "seqs on a plan event": lambda rng, lines: _replace(rng, lines, b'"data":', b'"sourceEventSeqs":[[0,2]],"data":',
                                                        b'{"type":"todo/write"'),
    "seqs bad on a plan event": lambda rng, lines: _replace(rng, lines, b'"data":', b'"sourceEventSeqs":[[2,0]],'
                                                            b'"data":', b'{"type":"todo/write"'),
    "seqs bad on a turn start": lambda rng, lines: _replace(rng, lines, b'"data":', b'"sourceEventSeqs":"x","data":',
                                                            b'{"type":"turn/start"'),
}


def _in_range(rng: random.Random, lines: list[bytes], change: Callable[[int, int], bytes]) -> None:
    """Rewrite one stored ``[start,end]`` range of a ``sourceEventSeqs`` (a line without one is left alone)."""
    index = _pick(rng, lines, b'{"type":"assistant/message"')
    line = lines[index]
    at = line.find(b'"sourceEventSeqs":[[')
    if at < 0:
        return
    start = at + len(b'"sourceEventSeqs":[')
    end = line.index(b"]", start) + 1
    first, last = map(int, line[start + 1:end - 1].split(b","))
    lines[index] = line[:start] + change(first, last) + line[end:]


def _edit(rng: random.Random, lines: list[bytes], change: Callable[[bytes], bytes]) -> None:
    index = rng.randrange(len(lines))
    lines[index] = change(lines[index])


def _flip(rng: random.Random, lines: list[bytes]) -> None:
    index = rng.randrange(len(lines))
    line = bytearray(lines[index])
    line[rng.randrange(len(line))] ^= 1 << rng.randrange(8)
    lines[index] = bytes(line)


def _dup_last(rng: random.Random, lines: list[bytes], extra: bytes, *prefixes: bytes) -> None:
    index = _pick(rng, lines, *prefixes)
    lines[index] = lines[index][:-1] + extra


def _join(rng: random.Random, lines: list[bytes], glue: bytes) -> None:
    index = rng.randrange(len(lines) - 1)
    lines[index:index + 2] = [lines[index] + glue + lines[index + 1]]


def _seq_as(suffix: bytes) -> Callable[[bytes], bytes]:
    def change(line: bytes) -> bytes:
        at = line.find(b'"seq":')
        if at < 0:
            return line
        end = line.index(b",", at)
        return line[:end] + suffix + line[end:]
    return change


def _dt_short(line: bytes) -> bytes:
    at = line.find(b'"dt":[')
    if at < 0:
        return line
    start = at + len(b'"dt":[')
    end = line.index(b"]", start)
    return line[:start] + b",".join(line[start:end].split(b",")[1:]) + line[end:]


def _texts_empty(line: bytes) -> bytes:
    at = line.find(b'"texts":[')
    if at < 0:
        return line
    return line[:at] + b'"texts":[]' + line[line.index(b"]", at) + 1:]


def _all(lines: list[bytes], prefix: bytes, data: bytes) -> None:
    for index, line in enumerate(lines):
        if line.startswith(prefix):
            lines[index] = line.replace(b'"data":{', data + b"{", 1) + b"}"


def _last(lines: list[bytes], prefix: bytes, data: bytes) -> None:
    index = max(index for index, line in enumerate(lines) if line.startswith(prefix))
    lines[index] = lines[index].replace(b'"data":{', data + b"{", 1) + b"}"


@pytest.mark.parametrize("name", sorted(MUTATIONS | RANGE_MUTATIONS))
def test_every_mutation_reads_the_same(name: str, session_lines: tuple[bytes, list[bytes]], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    header, original = session_lines
    rng = random.Random(name)
    for round_ in range(6):
        lines = list(original)
        (MUTATIONS | RANGE_MUTATIONS)[name](rng, lines)
        log = _write(tmp_path / "--w--" / "s", header, lines, zstd=round_ % 2 == 1, torn=rng.choice((0, 0, 3)))
        same_both_ways(log, monkeypatch)


@pytest.mark.parametrize("seed", range(4))
def test_random_mutations_read_the_same(seed: int, session_lines: tuple[bytes, list[bytes]], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Several mutations at once, anywhere: the bulk proof and the exact pass agree (in a v4 log, range mutations
    too; a v0 log has no ranges, and draws from the mutations it always did)."""
    header, original = session_lines
    rng = random.Random(seed)
    mutations = MUTATIONS if b'"version":0,' in header else MUTATIONS | RANGE_MUTATIONS
    names = sorted(mutations)
    for round_ in range(8):
        lines = list(original)
        for _ in range(rng.randint(1, 3)):
            mutations[rng.choice(names)](rng, lines)
        log = _write(tmp_path / "--w--" / "s", header, lines, zstd=round_ % 2 == 1)
        same_both_ways(log, monkeypatch)


def test_damage_in_a_later_frame_is_reported_after_the_lines_before_it(
        session_lines: tuple[bytes, list[bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small frames are proven together; a frame that fails validation is still reported only after the lines of
    the frames before it were read (here a line too deep, which is the verdict piece by piece)."""
    header, original = session_lines
    lines = list(original)
    lines[2] = lines[2][:-1] + b',"x":' + b"[" * 600 + b"]" * 600 + b"}"
    log = _write(tmp_path / "--w--" / "s", header, lines, zstd=True)
    data = bytearray(log.read_bytes())
    start, end = scan_frames(bytes(data)).frames[-2]
    data[(start + end) // 2] ^= 0x55
    log.write_bytes(bytes(data))
    same_both_ways(log, monkeypatch)
    assert "nests deeper than 512 levels" in read_plan(log).health.reason


def test_a_short_line_bound_reads_the_same(session_lines: tuple[bytes, list[bytes]], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``$DSH_TODO_MAX_LINE`` below a line's length: refused at the same line either way."""
    header, lines = session_lines
    log = _write(tmp_path / "--w--" / "s", header, lines, zstd=False)
    for bound in (300, 700, 5000):
        monkeypatch.setenv(MAX_LINE_ENV, str(bound))
        same_both_ways(log, monkeypatch)


def _lines(cases: list[bytes]) -> Iterator[tuple[bytes, Any]]:
    for line in cases:
        try:
            yield line, loads(line)
        except ValueError:
            yield line, None


_ENVELOPE = b'{"type":"step/end","seq":0'
SINGLE_LINES = [_ENVELOPE + rest for rest in (
    b',"x":"\xff"}', b',"x":"\\x"}', b',"x":"\\ud800"}', b',"x":"a\tb"}', b',"x":01}', b',"x":1.}', b',"x":-}',
    b',"x":.5}', b',"x":+1}', b',"x":NaN}', b',"x":Infinity}', b',"x":[1,]}', b',}', b'} {"type":"step/end","seq":1}',
    b',"x":"\xed\xa0\x80"}', b',"x":"\xc0\x80"}', b',"x":"\xf4\x90\x80\x80"}', b',"x":"\\u12"}', b',"x":{1:1}}',
    b',"x":"\x00"}', b',"x":\x0c1}', b',"x":tru}', b'.0}', b'e0}', b',"type":"odd"}', b',"seq":0}', b'}\r', b'} ',
    b',"x":"\x7f"}', b',"x":' + b"[" * 600 + b"]" * 600 + b"}", b',"x":' + b"[" * 512 + b"]" * 512 + b"}",
)] + [b'\xef\xbb\xbf' + _ENVELOPE + b"}", b'{"type":"step/end","seq":true}', b'{"type":"step/end","seq":-0}',
      b'{"type":"odd","type":"step/end","seq":0}', b'{"type":"step/end","seq":5,"seq":0}', b' ' + _ENVELOPE + b"}"]


@pytest.mark.parametrize(("line", "value"), list(_lines(SINGLE_LINES)))
def test_a_proven_line_is_one_loads_accepts_alike(line: bytes, value: Any) -> None:
    """What the proof accepts, ``loads`` parses alone into an object of the same type and seq, nested no deeper than
    the reader's bound (a duplicate key: the last one in both)."""
    proven = bulk.prove([line], [line], 0, False, PLAN_INTEREST)
    if proven is not None:
        assert type(value) is dict and value["type"] == "step/end" and value["seq"] == 0 and type(value["seq"]) is int
        assert len(line) < 1024 or line.count(b"[") <= 512


_CHARACTERS = ("a", "\n", "é", "€", "😀", "\x7f")
_BROKEN = (b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80")


@pytest.mark.parametrize("slice_size", [4, 5, 6, 8])
def test_utf8_is_checked_in_slices_exactly(slice_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The UTF-8 check decodes in slices (a whole piece's ``str`` cost 64 page faults each); cutting them must not
    change its answer: valid text with characters of every width across every slice boundary is accepted, and a
    broken sequence anywhere, even astride a boundary, is refused, as one ``str`` of the whole text decides."""
    rng = random.Random(slice_size)
    monkeypatch.setattr(bulk, "UTF8_SLICE", slice_size)
    answers = set()
    for case in range(400):
        text = "".join(rng.choice(_CHARACTERS) for _ in range(rng.randrange(0, 40))).encode()
        if case % 2:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(_BROKEN) + text[at:]
        try:
            str(text, "utf-8")
            whole = True
        except UnicodeDecodeError:
            whole = False
        assert bulk._utf8(text) is whole, text
        assert bulk._utf8(memoryview(text)) is whole, text
        answers.add(whole)
    assert answers == {True, False}


def test_a_committed_bad_line_in_a_zstd_log_gets_one_verdict_at_every_piece_size(
        session_lines: tuple[bytes, list[bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the random mix once the v4 mutations joined its draw (v0 then kept its old draw): one unparsable line
    in turn 4 of a zstd log (frames of seven lines), turn 4 ending after it. Repro before: read in pieces of 1000
    bytes or more, both passes said "unparsable committed event at line N"; in pieces of 64 bytes, both said
    "complete frame contains a torn JSONL record". After damage the scanner skims for a ``turn/end`` line, and a
    piece finishing a line whose ``turn/end`` came in an earlier piece was counted unparsed (only the 8 bytes either
    side of the seam were looked at), so no later ``turn/end`` proved the damage committed."""
    header, original = session_lines
    lines = list(original)
    bad = next(index for index, line in enumerate(lines) if line.startswith(b'{"type":"step/start"')
               and line.endswith(b'"data":{"turn":4,"step":2}}'))
    lines[bad] = lines[bad][:-1] + b",}"
    log = _write(tmp_path / "--w--" / "s", header, lines, zstd=True)
    verdicts = set()
    for size in PIECES:
        with monkeypatch.context() as exact:
            exact.setattr(reading, "CHUNK_SIZE", size)
            exact.setattr(reading._Pass, "__init__", _exact_pass)
            verdicts.add(_outcome(log)[0])
    line = bad + 1  # the header is line 0 in the reader's count
    assert verdicts == {("CorruptSessionLogError", f"corrupt session log: unparsable committed event at line {line}")}


def test_a_pass_hands_over_what_its_caller_reads_whatever_the_types(
        session_lines: tuple[bytes, list[bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Storage knows no fold (decision 0043): told its observer reads ``step/end`` (no fold of ours does), or
    ``todo/write`` without saying which one restarts it, a pass proving runs in bulk hands over every such event, as
    the exact pass does; told the plan's interest, it leaves out the plan events before the last that replaces the
    plan, and none after it."""
    header, lines = session_lines
    proven = 0
    prove = bulk.prove

    def counted(*args: Any, **kwargs: Any) -> bulk.Proven | None:
        nonlocal proven
        result = prove(*args, **kwargs)
        proven += result is not None
        return result

    def handed(log: Path, wanted: Interest) -> list[int]:
        seen: list[int] = []

        def observe(events: list[dict[str, Any]], _types: list[Any]) -> None:
            seen.extend(event["seq"] for event in events if event["type"] in wanted.types)

        before = proven
        reading.scan_log(log, keep=False, observe=observe, wanted=wanted)
        assert proven > before
        return seen

    monkeypatch.setattr(scan, "BULK_MIN", 0)
    monkeypatch.setattr(scan, "prove", counted)
    for zstd in (False, True):
        log = _write(tmp_path / "--w--" / "s", header, lines, zstd)
        every = reading.scan_log(log).events
        assert every is not None
        with monkeypatch.context() as small:
            small.setattr(reading, "CHUNK_SIZE", 1000)  # runs between v4's stored ranges, which the proof leaves
            for wanted in (Interest(frozenset({"step/end"})), Interest(frozenset({"todo/write"}))):
                assert handed(log, wanted) == [event["seq"] for event in every if event["type"] in wanted.types]
        if b'"version":0,' in header:  # one run for the whole log (a v4 log's ranges leave runs to the exact pass)
            plan = [event["seq"] for event in every if event["type"] in PLAN_EVENT_TYPES]
            last = max(event["seq"] for event in every if replaces_plan(event))
            opened = max(event["seq"] for event in every if event["type"] == "turn/start")
            assert handed(log, PLAN_INTEREST) == [seq for seq in plan if seq >= min(last, opened)]
