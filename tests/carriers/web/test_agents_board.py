"""Every agent's plan on one board (issue 36), in Chromium, read from the files the pinned CLIs wrote (copies of
the saved runs, through each agent's real reader): each agent's card with its plan exactly as its reader returns it,
subagents under their parent, what needs the person, a change on screen within a second, and plan writes as diffs.

Repro (before): the board showed DSH sessions only, each on its own (a subagent beside its parent, its open items
counted nowhere); nothing said which session was waiting on the person or had stopped with its plan unfinished; and a
todo_write row showed only the counts of the list it wrote, not what it changed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from dsh_todo.carriers.web.server import BackgroundServer
from dsh_todo.coding_agents.base import AgentSession
from dsh_todo.coding_agents.discover import discover
from dsh_todo.harness import Context
from dsh_todo.standard import open_runtime
from dsh_todo.testing import reply, todo_call
from tests.carriers.web.agent_fixtures import CLAUDE_TASKS_HOME, REAL_HOMES, copy_real_homes
from tests.carriers.web.conftest import Web, run_turn

pytestmark = pytest.mark.browser

AGENTS = ["claude", "codex", "gemini", "opencode"]
CLAUDE_MAIN, CLAUDE_SUB = "dae93792-d946-4018-8bd9-43cedd786c3b", "a0971d554bb514d87"
CODEX_MAIN, CODEX_SUB = "01a249d7-c122-77e2-9066-cfa59a513547", "01a249d7-c1d6-78d0-9b24-b2b8027b04a6"
GEMINI_MAIN, GEMINI_SUB = "ef5e5846-aa2f-477d-9169-af826a016186", "0b87159c-5f83-4ebe-ba36-339c8f9ebe58"
OPENCODE_MAIN, OPENCODE_SUB = "ses_db6288be3ffetQBij5NFdY90vd", "ses_db6286e56fferwqUWz8KY5sh3H"
PARENTS = {f"claude:{CLAUDE_SUB}": f"claude:{CLAUDE_MAIN}", f"codex:{CODEX_SUB}": f"codex:{CODEX_MAIN}",
           f"gemini:{GEMINI_SUB}": f"gemini:{GEMINI_MAIN}", f"opencode:{OPENCODE_SUB}": f"opencode:{OPENCODE_MAIN}"}
"""Each saved run's subagent (Claude Code's side-chain, Codex's spawned thread, Gemini CLI's subagent chat,
opencode's child session) and the session that delegated it."""
CHILD_PLAN = [{"content": "look up the grammar", "status": "completed"},
              {"content": "summarize the cases", "status": "pending"}]
CODEX_ROLLOUT = "sessions/2026/12/06/rollout-2026-12-06T05-33-26-{}.jsonl"
CODEX_CUT = 14
"""The Codex main rollout's lines up to its second accepted ``update_plan`` (and its output): its turn still open."""


def dsh_session(ctx: Context, session_id: str, todos: list[dict[str, str]] | None, *, ended: bool,
                **header: Any) -> None:
    session = ctx.sessions.create(session_id, cwd="/home/dev/shop", **header)
    session.append("turn/start", {"turn": 1})
    session.append("user/message", {"content": [{"type": "text", "text": f"task of {session_id}"}],
                                    "source": {"kind": "user"}, "role": "user", "id": "u1"}, surface_op="append")
    if todos is not None:
        session.append("todo/write", {"todos": todos})
    if ended:
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    ctx.session_persistence.flush()
    ctx.session_persistence.release(session_id)


def ask_the_person(home: Path) -> None:
    """Append to the saved Claude Code transcript what Claude Code 2.1.332 writes when its model asks the person a
    question (an ``AskUserQuestion`` call, the turn stopped for it, no result yet): no scripted run stops there, since
    a headless run answers or refuses it at once."""
    path = home / "projects" / "-home-dev-project" / f"{CLAUDE_MAIN}.jsonl"
    record = {"type": "assistant", "sessionId": CLAUDE_MAIN, "cwd": "/home/dev/project", "message": {
        "role": "assistant", "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "toolu_ask", "name": "AskUserQuestion",
                     "input": {"questions": [{"question": "Which parser?"}]}}]}}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def codex_lines(source: Path, session_id: str) -> list[str]:
    return (source / CODEX_ROLLOUT.format(session_id)).read_text(encoding="utf-8").splitlines(keepends=True)


def cut_codex(home: Path) -> None:
    """The Codex home as it stood mid-run: the main rollout up to its second plan write, the subagent not spawned."""
    head = codex_lines(REAL_HOMES["codex"], CODEX_MAIN)[:CODEX_CUT]
    (home / CODEX_ROLLOUT.format(CODEX_MAIN)).write_text("".join(head), encoding="utf-8")
    (home / CODEX_ROLLOUT.format(CODEX_SUB)).unlink()


def finish_codex(home: Path) -> None:
    """What Codex 0.171.0 appended after that: the refused write, the spawn, the last write, the end of the turn (one
    append, as its writer flushes), then the subagent's rollout."""
    with (home / CODEX_ROLLOUT.format(CODEX_MAIN)).open("a", encoding="utf-8") as handle:
        handle.write("".join(codex_lines(REAL_HOMES["codex"], CODEX_MAIN)[CODEX_CUT:]))
    shutil.copyfile(REAL_HOMES["codex"] / CODEX_ROLLOUT.format(CODEX_SUB), home / CODEX_ROLLOUT.format(CODEX_SUB))


@contextmanager
def serving(tmp_path: Path, homes: dict[str, Path]) -> Iterator[Web]:
    """A server over the DSH sessions under ``tmp_path/sessions`` that also reads ``homes``."""
    root = tmp_path / "sessions"
    ctx = open_runtime(root, batch_delay_ms=5)
    server = BackgroundServer(ctx, agents=list(homes), agent_homes=homes)
    web = Web(ctx, root, server, "")
    try:
        web.base = server.start().split("?", 1)[0]
        yield web
    finally:
        server.stop()
        ctx.dispose()


@pytest.fixture
def homes(tmp_path: Path) -> dict[str, Path]:
    """Copies of the four saved homes; Claude Code's main session waits on the person (:func:`ask_the_person`)."""
    copied = copy_real_homes(tmp_path / "homes")
    ask_the_person(copied["claude"])
    return copied


@pytest.fixture
def board(tmp_path: Path, homes: dict[str, Path]) -> Iterator[Web]:
    """The four agents' saved runs, and DSH sessions: a parent that stopped with items open and its subagent, and a
    session that finished its plan (the one card "Needs me" hides)."""
    writer = open_runtime(tmp_path / "sessions", batch_delay_ms=5)
    dsh_session(writer, "dsh-parent", [{"content": "split the work", "status": "completed"},
                                       {"content": "merge the results", "status": "pending"},
                                       {"content": "report", "status": "pending"}], ended=True)
    dsh_session(writer, "dsh-child", CHILD_PLAN, ended=True, parentSession="dsh-parent", origin="subagent",
                delegationDepth=1)
    dsh_session(writer, "dsh-done", [{"content": "ship", "status": "completed"}], ended=True)
    writer.dispose()
    with serving(tmp_path, homes) as web:
        yield web


def card(page: Any, session_id: str) -> Any:
    return page.locator(f'[data-testid=card][data-session-id="{session_id}"]')


def child_of(locator: Any, session_id: str) -> Any:
    return locator.locator(f'[data-testid=child][data-session-id="{session_id}"]')


def badge(locator: Any) -> Any:
    """The card's own agent badge (a subagent's block has its own)."""
    return locator.locator(":scope > header [data-testid=card-agent]")


def needs(locator: Any) -> Any:
    """The card's own needs-me badges (a subagent's are in its block)."""
    return locator.locator(":scope > .card-needs > [data-testid=needs]")


def plan_of(locator: Any) -> list[tuple[str, str]]:
    items = locator.locator("[data-testid=card-plan]").first.locator("li")
    return [(items.nth(i).locator("[data-testid=plan-content]").inner_text(), items.nth(i).get_attribute("data-status"))
            for i in range(items.count())]


def pairs(session: AgentSession) -> list[tuple[str, str]]:
    return [(item.content, item.status) for item in session.plan or ()]


def as_read(homes: dict[str, Path]) -> dict[str, AgentSession]:
    """Every session of ``homes`` as its agent's reader returns it, by board id."""
    return {f"{session.agent}:{session.id}": session for session in discover(list(homes), homes)}


def test_every_agents_plan_is_on_the_board_exactly_nested_and_flagged(board: Web, homes: dict[str, Path],
                                                                        new_page: Any, artifacts: Path) -> None:
    sessions = as_read(homes)
    assert {board_id for board_id, session in sessions.items() if session.parent} == set(PARENTS)
    page = new_page("en-US", viewport={"width": 1280, "height": 900})
    page.goto(board.url("/"))
    # Top-level cards only: each subagent sits under its parent.
    expect(page.get_by_test_id("card")).to_have_count(6)
    for board_id in [*PARENTS, "dsh-child"]:
        expect(card(page, board_id)).to_have_count(0)

    # Each plan exactly as its agent's reader returns it, statuses as written; each subagent's under its parent.
    for board_id, session in sessions.items():
        where = card(page, board_id) if board_id not in PARENTS else child_of(card(page, PARENTS[board_id]), board_id)
        if board_id in PARENTS:
            card(page, PARENTS[board_id]).get_by_test_id("card-children").locator("summary").click()
            expect(where).to_be_visible()
        if session.plan:
            assert plan_of(where) == pairs(session), board_id
    names = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI", "opencode": "opencode"}
    for board_id in {parent for parent in PARENTS.values()}:
        expect(badge(card(page, board_id))).to_have_text(names[board_id.split(":")[0]])

    claude = card(page, f"claude:{CLAUDE_MAIN}")
    assert plan_of(claude) == [("Reproduce the bug", "completed"), ("Fix the parser", "completed")]
    expect(needs(claude)).to_have_text(["waiting on you"])
    expect(claude.get_by_test_id("card-children-open")).to_have_text("2 open in subagents")
    expect(needs(child_of(claude, f"claude:{CLAUDE_SUB}"))).to_have_text(["stopped with 2 open"])

    codex = card(page, f"codex:{CODEX_MAIN}")
    expect(needs(codex)).to_have_count(0)  # its plan is done; its spawned thread's is not
    expect(codex.get_by_test_id("card-children-open")).to_have_text("2 open in subagents")
    assert plan_of(child_of(codex, f"codex:{CODEX_SUB}")) == [("Run the tests", "in_progress"),
                                                              ("Report the result", "pending")]

    for board_id in (f"gemini:{GEMINI_MAIN}", f"opencode:{OPENCODE_MAIN}"):
        own = card(page, board_id)
        # Gemini CLI's and opencode's own words, shown as written with a neutral mark; "blocked" is still open.
        assert plan_of(own) == [("Read the bug report", "completed"), ("Fix the parser", "cancelled"),
                                ("Run the tests", "blocked")]
        expect(own.get_by_test_id("plan-status").first).to_have_text("cancelled")
        expect(own.locator("li[data-status=cancelled] .glyph-other").first).to_be_visible()
        expect(needs(own)).to_have_text(["stopped with 1 open"])
        expect(own.get_by_test_id("card-children-open")).to_have_count(0)  # its subagent finished

    parent = card(page, "dsh-parent")
    expect(badge(parent)).to_have_count(0)
    expect(needs(parent)).to_have_text(["stopped with 2 open"])
    expect(parent.get_by_test_id("card-children-open")).to_have_text("1 open in subagents")
    child = child_of(parent, "dsh-child")
    expect(child).to_be_hidden()  # folded until asked for
    parent.get_by_test_id("card-children").locator("summary").click()
    expect(child).to_be_visible()
    assert plan_of(child) == [(item["content"], item["status"]) for item in CHILD_PLAN]
    expect(needs(child)).to_have_text(["stopped with 1 open"])
    page.screenshot(path=str(artifacts / "board-agents.png"), full_page=True)

    # "Needs me": the sessions that stopped with items open or wait on the person (or have such a subagent).
    page.get_by_test_id("board-needs").check()
    expect(page.get_by_test_id("card")).to_have_count(5)
    expect(card(page, "dsh-done")).to_have_count(0)
    page.get_by_test_id("board-needs").uncheck()
    expect(page.get_by_test_id("card")).to_have_count(6)


def test_claude_codes_task_tools_plan_is_on_its_card(tmp_path: Path, new_page: Any) -> None:
    """Claude Code's default Task tools: the plan is its task files (the subagent had none of those tools)."""
    homes = copy_real_homes(tmp_path / "homes", {"claude": CLAUDE_TASKS_HOME})
    with serving(tmp_path, homes) as web:
        page = new_page("en-US", viewport={"width": 1280, "height": 900})
        page.goto(web.url("/"))
        main = card(page, "claude:d71ef276-a88b-4757-9106-bb44ae7fa6d2")
        expect(main).to_have_count(1)
        assert plan_of(main) == [("Reproduce the bug", "completed"), ("Fix the parser", "in_progress")]
        expect(needs(main)).to_have_text(["stopped with 1 open"])
        expect(main.get_by_test_id("card-children")).to_have_count(1)
        expect(page.get_by_test_id("card")).to_have_count(1)


def test_idle_with_an_item_in_progress_is_flagged_after_the_threshold(tmp_path: Path, homes: dict[str, Path],
                                                                       new_page: Any) -> None:
    """The Codex subagent's turn reopened (its rollout's ``task_started``, as Codex writes it) with its item in
    progress, and nothing written for 20 minutes: no saved run sat idle, so the file's time is set back (before the
    server starts: this is about the badge, not about following a change)."""
    path = homes["codex"] / CODEX_ROLLOUT.format(CODEX_SUB)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"timestamp": "2026-12-06T05:40:00.000Z", "type": "event_msg",
                                 "payload": {"type": "task_started"}}) + "\n")
    ago = time.time() - 20 * 60
    os.utime(path, (ago, ago))
    with serving(tmp_path, homes) as web:
        page = new_page("en-US", viewport={"width": 1280, "height": 900})
        page.goto(web.url("/"))
        codex = card(page, f"codex:{CODEX_MAIN}")
        codex.get_by_test_id("card-children").locator("summary").click()
        expect(needs(child_of(codex, f"codex:{CODEX_SUB}"))).to_have_text(["idle 20 min with an item in progress"])
        page.get_by_test_id("board-needs").check()
        expect(card(page, f"codex:{CODEX_MAIN}")).to_have_count(1)  # kept for its subagent


def test_a_change_to_an_agents_file_is_on_screen_within_a_second(tmp_path: Path, new_page: Any) -> None:
    homes = copy_real_homes(tmp_path / "homes", {"codex": REAL_HOMES["codex"]})
    cut_codex(homes["codex"])
    with serving(tmp_path, homes) as web:
        page = new_page("en-US", viewport={"width": 1280, "height": 900})
        page.goto(web.url("/"))
        codex = card(page, f"codex:{CODEX_MAIN}")
        expect(codex).to_have_count(1)
        assert plan_of(codex) == [("Reproduce the bug", "completed"), ("Fix the parser", "in_progress")]
        time.sleep(0.3)  # the board's connection is open by now (it opens with the first list)
        started = time.monotonic()
        finish_codex(homes["codex"])
        page.wait_for_function(f"""() => {{
            const card = document.querySelector('[data-testid=card][data-session-id="codex:{CODEX_MAIN}"]');
            const items = card ? [...card.querySelectorAll('[data-testid=card-plan]')[0].querySelectorAll('li')] : [];
            return items.length === 2 && items.every((li) => li.dataset.status === 'completed'); }}""", timeout=5000)
        elapsed = time.monotonic() - started
        assert plan_of(codex) == [("Reproduce the bug", "completed"), ("Fix the parser", "completed")]
        assert elapsed < 1.0, f"the change took {elapsed:.2f} s to reach the page"
        # The spawned thread appears under its parent as it is written.
        expect(codex.get_by_test_id("card-children")).to_have_count(1)
        expect(page.get_by_test_id("card")).to_have_count(1)


def test_an_agents_page_shows_its_plan_writes_as_diffs(board: Web, new_page: Any) -> None:
    page = new_page("en-US", viewport={"width": 1100, "height": 700})
    page.goto(board.url(f"/?session=codex%3A{CODEX_MAIN}"))
    expect(page.locator("body")).to_have_attribute("data-history", "loaded")
    rows = page.locator('[data-tool="update_plan"]')
    expect(rows).to_have_count(3)  # the refused write (status "done") is not a write
    changes = []
    for index in range(3):
        diff = rows.nth(index).get_by_test_id("plan-diff").locator("li")
        changes.append([diff.nth(i).get_attribute("data-change") for i in range(diff.count())])
    assert changes == [["added", "added"], ["status", "status"], ["same", "status"]]
    expect(rows.nth(1).get_by_test_id("diff-status")).to_have_text(["in_progress → completed",
                                                                     "pending → in_progress"])
    expect(rows.nth(2).get_by_test_id("tool-summary")).to_have_text("2/2 completed")
    rows.nth(2).get_by_test_id("tool-inspect").click()
    expect(rows.nth(2).get_by_test_id("tool-in")).to_contain_text("Fix the parser")
    expect(page.get_by_test_id("todo-panel")).to_be_visible()


def test_an_agents_page_follows_its_new_writes(tmp_path: Path, new_page: Any) -> None:
    homes = copy_real_homes(tmp_path / "homes", {"codex": REAL_HOMES["codex"]})
    cut_codex(homes["codex"])
    with serving(tmp_path, homes) as web:
        page = new_page("en-US", viewport={"width": 1100, "height": 700})
        page.goto(web.url(f"/?session=codex%3A{CODEX_MAIN}"))
        expect(page.locator("body")).to_have_attribute("data-stream", "open")
        expect(page.locator('[data-tool="update_plan"]')).to_have_count(2)
        finish_codex(homes["codex"])
        rows = page.locator('[data-tool="update_plan"]')
        expect(rows).to_have_count(3)
        diff = rows.nth(2).get_by_test_id("plan-diff").locator("li")
        expect(diff).to_have_count(2)
        assert [diff.nth(i).get_attribute("data-change") for i in range(2)] == ["same", "status"]
        expect(page.get_by_test_id("todo-progress")).to_have_text("2 completed")


# -- diff rows of DSH's own todo_write --------------------------------------------------------------------------


def test_todo_write_rows_show_the_diff_against_the_previous_write(web: Web, new_page: Any, artifacts: Path) -> None:
    writer = web.other_process()
    session = writer.sessions.create("fx-diff", cwd="/home/dev/shop")
    run_turn(writer, session, "plan it", [
        reply("first", todo_call("call_1", ("read", "in_progress"), ("write", "pending"), ("drop me", "pending"))),
        reply("second", todo_call("call_2", ("read", "completed"), ("test", "pending"), ("write", "in_progress"))),
        reply("done"),
    ])
    writer.session_persistence.flush()
    page = new_page("en-US", viewport={"width": 1100, "height": 700})
    page.goto(web.url("/?session=fx-diff"))
    rows = page.locator('[data-tool="todo_write"]')
    expect(rows).to_have_count(2)
    first = rows.nth(0).get_by_test_id("plan-diff").locator("li")
    expect(first).to_have_count(3)
    assert [first.nth(i).get_attribute("data-change") for i in range(3)] == ["added"] * 3
    second = rows.nth(1).get_by_test_id("plan-diff").locator("li")
    expect(second).to_have_count(4)
    changes = [(second.nth(i).get_attribute("data-change"), second.nth(i).locator(".diff-content").inner_text())
               for i in range(4)]
    assert changes == [("status", "read"), ("added", "test"), ("status", "write"), ("removed", "drop me")]
    expect(rows.nth(1).get_by_test_id("diff-status")).to_have_text(["in_progress → completed", "pending → in_progress"])
    # The raw arguments and result are behind "Inspect".
    inspect = rows.nth(1).get_by_test_id("tool-inspect")
    expect(inspect).to_have_text("Inspect")
    expect(rows.nth(1).get_by_test_id("tool-in")).to_have_count(0)
    inspect.click()
    expect(rows.nth(1).get_by_test_id("tool-in")).to_contain_text('"content": "test"')
    expect(rows.nth(1).get_by_test_id("tool-out")).to_be_visible()
    expect(rows.nth(1).get_by_test_id("tool-inspect")).to_have_attribute("aria-expanded", "true")
    page.screenshot(path=str(artifacts / "plan-diff-rows.png"))


def test_the_plan_strip_stays_pinned_while_the_rows_scroll(web: Web, new_page: Any) -> None:
    writer = web.other_process()
    session = writer.sessions.create("fx-long", cwd="/home/dev/shop")
    replies = [reply(f"step {n}", todo_call(f"call_{n}", *((f"task {k}", "completed" if k < n else "pending")
                                                          for k in range(12)))) for n in range(12)]
    run_turn(writer, session, "a long plan", [*replies, reply("done")])
    writer.session_persistence.flush()
    page = new_page("en-US", viewport={"width": 1000, "height": 600})
    page.goto(web.url("/?session=fx-long"))
    panel = page.get_by_test_id("todo-panel")
    expect(panel).to_be_visible()
    assert page.evaluate("() => getComputedStyle(document.getElementById('dock')).position") == "sticky"
    before = panel.bounding_box()
    for top in (0, 400, 100_000):
        page.evaluate(f"() => {{ document.getElementById('conversation').scrollTop = {top}; }}")
        box = panel.bounding_box()
        assert box == before and box["y"] + box["height"] <= 600


def test_the_diff_rule_in_order(web: Web, new_page: Any) -> None:
    """The rule itself (``planDiff`` in ``static/plan.js``), pinned: added, removed where it stood, status changes,
    repeated texts matched in order, no earlier write."""
    page = new_page("en-US")
    page.goto(web.url("/"))
    cases = page.evaluate("""async () => {
        const { planDiff } = await import('/static/plan.js');
        const i = (content, status) => ({ content, status });
        const brief = (diff) => diff.map((d) => `${d.kind}:${d.content}:${d.from ? `${d.from}>` : ''}${d.status}`);
        return [
          brief(planDiff(null, [i('a', 'pending')])),
          brief(planDiff([i('a', 'pending'), i('b', 'pending'), i('c', 'pending')],
                         [i('a', 'completed'), i('c', 'in_progress'), i('d', 'pending')])),
          brief(planDiff([i('x', 'pending'), i('x', 'completed')], [i('x', 'completed'), i('x', 'completed')])),
          brief(planDiff([i('a', 'pending'), i('b', 'pending')], [])),
          brief(planDiff([i('a', 'pending'), i('b', 'pending')], [i('b', 'pending'), i('a', 'pending')])),
          brief(planDiff([i('a', 'weird')], [i('a', 'cancelled')])),
        ]; }""")
    assert cases == [
        ["added:a:pending"],
        ["status:a:pending>completed", "removed:b:pending", "status:c:pending>in_progress", "added:d:pending"],
        ["status:x:pending>completed", "same:x:completed"],
        ["removed:a:pending", "removed:b:pending"],
        ["same:b:pending", "same:a:pending"],
        ["status:a:weird>cancelled"],
    ]


def test_a_change_read_before_the_boards_connection_opened_is_on_screen_once_it_opens(tmp_path: Path,
                                                                                       new_page: Any) -> None:
    """Repro: the board lists, then opens its ``agents=1`` connection, which carries changes from then on; a change
    read in between (or while the connection reconnects) reached the page only with the next list, 5 s later. The
    connection is held here until the server has read the change, then let through."""
    homes = copy_real_homes(tmp_path / "homes", {"codex": REAL_HOMES["codex"]})
    cut_codex(homes["codex"])
    with serving(tmp_path, homes) as web:
        page = new_page("en-US", viewport={"width": 1280, "height": 900})
        held: list[Any] = []

        def hold_the_first(route: Any) -> None:
            if held:
                route.continue_()
            else:
                held.append(route)

        page.route("**/api/events.mux*", hold_the_first)
        page.goto(web.url("/"))
        codex = card(page, f"codex:{CODEX_MAIN}")
        expect(codex).to_have_count(1)
        while not held:
            page.wait_for_timeout(20)
        finish_codex(homes["codex"])
        time.sleep(0.8)  # read by the server (every 250 ms) and sent to no one
        assert plan_of(codex) == [("Reproduce the bug", "completed"), ("Fix the parser", "in_progress")]
        started = time.monotonic()
        held[0].continue_()
        page.wait_for_function(f"""() => {{
            const card = document.querySelector('[data-testid=card][data-session-id="codex:{CODEX_MAIN}"]');
            const items = card ? [...card.querySelectorAll('[data-testid=card-plan]')[0].querySelectorAll('li')] : [];
            return items.length === 2 && items.every((li) => li.dataset.status === 'completed'); }}""", timeout=6000)
        elapsed = time.monotonic() - started
        assert elapsed < 1.0, f"the change took {elapsed:.2f} s to reach the page once its connection opened"
