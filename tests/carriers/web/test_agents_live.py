"""Goal 5 of issue 36, live: the board open in Chromium with one agent chosen while that pinned CLI runs headless
against its scripted model into the home the board watches: Claude Code (``TodoWrite``) and Codex (``update_plan``)
as :mod:`tests.coding_agents.drive` plays them, Gemini CLI (``write_todos``) as :mod:`tests.coding_agents.drive_gemini`
does and opencode (``todowrite``) as :mod:`tests.coding_agents.drive_opencode` does: plan writes, one refused, a
subagent with a plan of its own, a last write. Each plan must appear on the board exactly as that CLI's reader reads
the files, the subagent's under its parent, within a second of the file changing to hold it.

"When the file changed" is when a thread of this test, stat'ing the home every 5 ms (a SQLite store's ``-wal``
too), saw the change that first made the reader return that plan (so at most 5 ms late); "on the board" is when a
``MutationObserver`` in the page saw the card show it. Both are wall-clock times of this machine. A missing CLI
stops through ``tests.needs`` (fails in CI, skips elsewhere). A case costs 2 s (Codex, Claude Code) to 7 s
(opencode) on a loaded 2-core machine, about 17 s for the four.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from dsh_todo.carriers.web.server import BackgroundServer
from dsh_todo.coding_agents.base import Reader, reader
from dsh_todo.standard import open_runtime
from tests.carriers.mcp.agents.common import Run
from tests.coding_agents import drive, drive_gemini, drive_opencode
from tests.coding_agents.common import CLAUDE_VERSION, CODEX_VERSION, cli
from tests.coding_agents.test_readers import SUB_PLAN, WRITES

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(180)]

Plan = tuple[tuple[str, str], ...]
Plans = Sequence[Sequence[tuple[str, str]]]


def _finished(name: str, run: Run) -> None:
    assert run.returncode == 0 and run.stdout.strip().endswith(drive.FINAL), (
        f"{name} did not finish the script\nstdout:\n{run.stdout}\nstderr:\n{run.stderr[-3000:]}")


def _claude(cli_path: Path, folder: Path) -> Path:
    home, run = drive.run_claude(folder, cli_path, tasks=False)
    _finished(f"Claude Code {CLAUDE_VERSION}", run)
    return home


def _codex(cli_path: Path, folder: Path) -> Path:
    home, run = drive.run_codex(folder, cli_path)
    _finished(f"Codex {CODEX_VERSION}", run)
    return home


def _gemini(cli_path: Path, folder: Path) -> Path:
    return drive_gemini.run_gemini(cli_path, folder)  # it checks the run finished


def _opencode(cli_path: Path, folder: Path) -> Path:
    return drive_opencode.run_opencode(cli_path, folder)  # it checks the run finished


def _written(script: Sequence[tuple[str, dict[str, Any]]], text: str, *numbers: int) -> list[list[tuple[str, str]]]:
    """The plans of the calls ``numbers`` of a script (the writes its CLI accepts)."""
    return [[(todo[text], todo["status"]) for todo in script[number][1]["todos"]] for number in numbers]


@dataclass(frozen=True)
class Case:
    """One CLI's live run: how to drive it, where its home is under the run's folder, and the plans its reader must
    read (every accepted write, in order; the last is the standing plan)."""

    agent: str
    version: str
    run: Callable[[Path, Path], Path]
    home: str
    main: Plans
    sub: Plans

    @property
    def children_open(self) -> int:
        """What the parent's card counts: its subagent's items left pending or in progress."""
        return sum(status in ("pending", "in_progress") for _, status in self.sub[-1])


CASES = [
    Case("claude", f"Claude Code {CLAUDE_VERSION}", _claude, "home/.claude", WRITES, [SUB_PLAN]),
    Case("codex", f"Codex {CODEX_VERSION}", _codex, "home/.codex", WRITES, [SUB_PLAN]),
    Case("gemini", f"Gemini CLI {drive_gemini.VERSION}", _gemini, "home/.gemini",
         [*_written(drive_gemini.MAIN, "description", 0, 1), drive_gemini.MAIN_PLAN],
         _written(drive_gemini.SUB, "description", 0, 1)),
    Case("opencode", f"opencode {drive_opencode.VERSION}", _opencode, "home/.local/share/opencode",
         [*_written(drive_opencode.MAIN, "content", 0, 1), drive_opencode.MAIN_PLAN],
         _written(drive_opencode.SUB, "content", 0, 1)),
]
"""Each CLI's plans as its driver scripts them (the refused write left out); its reader must read these."""


RECORDER = """(prefix) => {
  window.__seen = [];
  const last = new Map();
  const look = () => {
    const now = Date.now() / 1000;
    for (const node of document.querySelectorAll('[data-testid=card], [data-testid=child]')) {
      const id = node.dataset.sessionId;
      if (!id || !id.startsWith(prefix)) continue;
      // Its own plan only: a card without one (yet) holds its subagents' plans further down.
      const own = [...node.querySelectorAll('[data-testid=card-plan]')]
        .find((list) => list.closest('[data-testid=card], [data-testid=child]') === node);
      const plan = own ? [...own.querySelectorAll('li')].map((li) => [
        li.querySelector('[data-testid=plan-content]').textContent, li.dataset.status]) : [];
      const parent = node.dataset.testid === 'child'
        ? node.parentElement.closest('[data-testid=card]').dataset.sessionId : null;
      const key = JSON.stringify([plan, parent]);
      if (last.get(id) !== key) { last.set(id, key); window.__seen.push({ id, t: now, plan, parent }); }
    }
  };
  new MutationObserver(look).observe(document.body, { subtree: true, childList: true, attributes: true,
                                                      characterData: true });
  look();
}"""
"""Records every plan a card of the agent (or a subagent's block) shows, with when it first showed it and under
whom."""


class Watcher:
    """Stats the agent's session files (and a SQLite store's ``-wal``) every 5 ms; on each change of one, reads it
    with the agent's reader and keeps, per board id, the first time each plan was read (and the parent it was read
    with)."""

    def __init__(self, agent: str, home: Path) -> None:
        self.agent, self.home = agent, home
        self.reader: Reader = reader(agent)
        self.read: dict[str, dict[Plan, float]] = {}
        self.parents: dict[str, str | None] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _stat(self, path: Path) -> tuple[int, ...] | None:
        found: tuple[int, ...] = ()
        for each in (path, Path(f"{path}-wal")):
            try:
                stat = each.stat()
            except FileNotFoundError:
                if each == path:
                    return None
                continue
            found += (stat.st_mtime_ns, stat.st_size)
        return found

    def _run(self) -> None:
        seen: dict[Path, tuple[int, ...]] = {}
        while not self.stopped.wait(0.005):
            for path in self.reader.session_paths(self.home):
                stat = self._stat(path)
                if stat is None or seen.get(path) == stat:
                    continue
                changed = time.time()
                seen[path] = stat
                try:
                    sessions = self.reader.read(path)
                except (ValueError, sqlite3.Error):
                    continue  # caught mid-write (its first line, the store's first tables)
                for session in sessions:
                    board_id = f"{self.agent}:{session.id}"
                    plan = tuple((item.content, item.status) for item in session.plan or ())
                    self.read.setdefault(board_id, {}).setdefault(plan, changed)
                    self.parents[board_id] = None if session.parent is None else f"{self.agent}:{session.parent}"

    def __enter__(self) -> Watcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)


@pytest.fixture(params=CASES, ids=[case.agent for case in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    chosen: Case = request.param
    return chosen


@pytest.fixture
def board(case: Case, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A board over an empty DSH root reading the (not yet written) home of the run: its URL and that home."""
    home = tmp_path / "run" / case.home
    home.mkdir(parents=True)
    ctx = open_runtime(tmp_path / "sessions", batch_delay_ms=5)
    server = BackgroundServer(ctx, agents=[case.agent], agent_homes={case.agent: home})
    try:
        yield server.start(), home
    finally:
        server.stop()
        ctx.dispose()


def test_a_real_run_appears_on_the_board_exactly_and_within_a_second(
        case: Case, board: tuple[str, Path], tmp_path: Path, new_page: Any) -> None:
    binary = cli(case.agent)
    url, home = board
    page = new_page("en-US", viewport={"width": 1280, "height": 900})
    page.goto(url)
    expect(page.get_by_test_id("board-needs")).to_be_visible()
    page.evaluate(RECORDER, f"{case.agent}:")
    time.sleep(0.5)  # the board's connection is open by now (it opens with the first list)
    with Watcher(case.agent, home) as watcher:
        assert case.run(binary, tmp_path / "run") == home
        files = watcher.reader.session_paths(home)
        final = {board_id: max(plans, key=plans.__getitem__) for board_id, plans in watcher.read.items()}
        main = [board_id for board_id, parent in watcher.parents.items() if parent is None]
        assert len(main) == 1, f"{case.version} wrote {files}: one top-level session"
        [main_id] = main
        subs = [board_id for board_id, parent in watcher.parents.items() if parent == main_id]
        assert len(subs) == 1, f"{case.version} wrote {files}: one subagent"
        [sub_id] = subs
        assert list(final[main_id]) == list(case.main[-1]) and list(final[sub_id]) == list(case.sub[-1]), (
            f"{case.version}: read {final} from {files}")
        page.wait_for_function("""([main, sub, plan, subPlan]) => {
            const seen = (id, want, parent) => window.__seen.some((s) => s.id === id && s.parent === parent
              && JSON.stringify(s.plan) === JSON.stringify(want));
            return seen(main, plan, null) && seen(sub, subPlan, main); }""",
                               arg=[main_id, sub_id, case.main[-1], case.sub[-1]], timeout=5000)
    shown: list[dict[str, Any]] = page.evaluate("() => window.__seen")
    for board_id, parent, written in ((main_id, None, case.main), (sub_id, main_id, case.sub)):
        mine = [entry for entry in shown if entry["id"] == board_id]
        # Every plan the board showed is one the script wrote and the CLI accepted (or none yet, before the first
        # write): nothing made up, nothing half-read.
        for entry in mine:
            plan = [tuple(pair) for pair in entry["plan"]]
            assert plan in [list(each) for each in written] or not plan, f"{board_id}: the board showed {plan}"
        first = min(entry["t"] for entry in mine
                    if tuple(tuple(pair) for pair in entry["plan"]) == final[board_id] and entry["parent"] == parent)
        late = first - watcher.read[board_id][final[board_id]]
        assert late < 1.0, f"{case.version}, {board_id}: its plan reached the board {late:.2f} s after the file changed"
    # The board ends as the files do: one card, the subagent folded under it, its open items counted.
    assert page.get_by_test_id("card").count() == 1
    card = page.locator(f'[data-testid=card][data-session-id="{main_id}"]')
    if case.children_open:
        expect(card.get_by_test_id("card-children-open")).to_have_text(f"{case.children_open} open in subagents")
    else:
        expect(card.get_by_test_id("card-children-open")).to_have_count(0)
