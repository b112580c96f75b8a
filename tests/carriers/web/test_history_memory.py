"""A history page costs the server the page, not the log (issue 22 item 6).

The page is cut from one pass of the reader that keeps no events: a window of the last events (what the page can
reach) and the projections' fold. Measured on a real ``dsh-todo web`` subprocess with its RSS from /proc; the pages
themselves are checked against the cut the whole log gives (``page_bounds``) on a shorter log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dsh_todo.carriers.web.history import HistorySource, history_page, page_bounds
from dsh_todo.logview import read_session
from dsh_todo.standard import open_runtime
from dsh_todo.testing import memory_kb, stop
from tests.long_logs import EVENTS_PER_TURN, SESSION_ID, long_log

MEMORY_BOUND_KB = 64 << 10
"""What one history page may add to the idle server's resident size, whatever the log's size."""


def history(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"type": "client-request", "rpcId": "r", "method": "session.history",
                       "payload": payload}).encode()
    request = urllib.request.Request(url + "api/session.history", data=body,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer["result"]["value"]


@pytest.mark.slow
def test_the_tail_page_of_a_long_log_costs_the_page_not_the_log(tmp_path: Path) -> None:
    """Repro: a 100 MB log took ``dsh-todo web`` from 39 to 588 MB for one 602-event tail page (the whole log was
    read and kept to cut one page). Here a 38 MB log (240,000 events): the tail page and an earlier page each add
    at most 64 MB to the idle server's resident size."""
    root = tmp_path / "sessions"
    long_log(root, 16_000)
    small = open_runtime(root)
    small.sessions.create("small", cwd="/small").append("turn/start", {"turn": 1})
    small.dispose()
    process = subprocess.Popen([sys.executable, "-m", "dsh_todo.cli", "web", "--port", "0", "--root", str(root)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        history(url, {"sessionId": "small"})  # the code a page runs, imported and warm
        time.sleep(0.2)
        idle = memory_kb(process.pid)
        tail = history(url, {"sessionId": SESSION_ID})
        assert tail["events"][-1]["event"]["seq"] == 16_000 * EVENTS_PER_TURN - 1
        assert tail["projections"]["asOfSeq"] == 16_000 * EVENTS_PER_TURN - 1
        assert tail["hasMore"] is True
        earlier = history(url, {"sessionId": SESSION_ID, "beforeSeq": 1_000, "maxMessages": 2_000})
        assert earlier["events"][0]["event"]["seq"] == 0 and earlier["events"][-1]["event"]["seq"] == 999
        peak = memory_kb(process.pid, "VmHWM")
        assert peak - idle <= MEMORY_BOUND_KB, f"idle {idle} kB, peak {peak} kB"
    finally:
        stop(process)


@pytest.mark.parametrize(("before", "max_messages"), [(None, 1), (None, 7), (None, 50), (None, 5_000), (0, 3),
                                                      (1, 1), (16, 1), (300, 4), (301, 9), (10_000, 2)])
def test_each_page_is_the_cut_of_the_whole_log(tmp_path: Path, before: int | None, max_messages: int) -> None:
    """The window a page is cut from while the log streams by gives the very page the whole log gives."""
    root = tmp_path / "sessions"
    long_log(root, 40)
    ctx = open_runtime(root)
    try:
        source = HistorySource(ctx)
        events = read_session(SESSION_ID, backend=source.backend).stored
        start, end = page_bounds(events, before, max_messages)
        page = history_page(source, SESSION_ID, before=before, max_messages=max_messages)
        assert [item["event"] for item in page["events"]] == events[start:end]
        assert page["hasMore"] is (start > 0)
        if before is None:
            assert page["projections"] == ctx.session_projections.fold_for(events).snapshot()
        else:
            assert "projections" not in page
    finally:
        ctx.dispose()


TURNS = 400
"""Enough for the log to come in several read pieces (256 KiB each), so the window lets events go before the end."""
LAST_RESULT = (TURNS - 1) * EVENTS_PER_TURN + 12
EARLIER_RESULT = LAST_RESULT - EVENTS_PER_TURN


@pytest.mark.parametrize(("before", "max_messages"), [(None, 1), (None, 3), (EARLIER_RESULT + 1, 1)])
def test_a_result_pointing_far_back_gets_its_whole_reach(tmp_path: Path, before: int | None,
                                                         max_messages: int) -> None:
    """A ``tool/result`` whose sources lie before what the window let go (a hand-written log: the harness puts a
    result's call in its own step) still gets the page the whole log gives: the page is read again."""
    root = tmp_path / "sessions"
    log = long_log(root, TURNS)
    lines = log.read_bytes().split(b"\n")
    for index, line in enumerate(lines):  # the last two results point back to seq 2
        if any(line.startswith(b'{"type":"tool/result","seq":%d,' % seq) for seq in (EARLIER_RESULT, LAST_RESULT)):
            row = json.loads(line)
            row["sourceEventSeqs"] = [2]
            lines[index] = json.dumps(row, separators=(",", ":")).encode()
    log.write_bytes(b"\n".join(lines))
    assert log.stat().st_size > 2 * (256 << 10)
    ctx = open_runtime(root)
    try:
        source = HistorySource(ctx)
        events = read_session(SESSION_ID, backend=source.backend).stored
        start, end = page_bounds(events, before, max_messages)
        assert start == 2
        page = history_page(source, SESSION_ID, before=before, max_messages=max_messages)
        assert [item["event"] for item in page["events"]] == events[start:end]
    finally:
        ctx.dispose()
