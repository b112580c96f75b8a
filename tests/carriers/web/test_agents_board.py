"""Every agent's plan on one board (issue 36), in Chromium: other agents' cards with their plans as written,
subagents under their parent, what needs the person, a change on screen within a second, and plan writes as diffs.

Repro (before): the board showed DSH sessions only, each on its own (a subagent beside its parent, its open items
counted nowhere); nothing said which session was waiting on the person or had stopped with its plan unfinished; and a
todo_write row showed only the counts of the list it wrote, not what it changed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from dsh_todo.carriers.web.server import BackgroundServer
from dsh_todo.harness import Context
from dsh_todo.standard import open_runtime
from dsh_todo.testing import reply, todo_call
from tests.carriers.web.agent_fixtures import use_fixture_readers, write, write_session
from tests.carriers.web.conftest import Web, run_turn

pytestmark = pytest.mark.browser

CLAUDE_PLAN = (("Read the failing test", "completed"), ("Fix the parser", "in_progress"), ("Run the suite", "pending"))
CODEX_PLAN = (("Inspect the schema", "completed"), ("Write the migration", "pending"))
GEMINI_PLAN = (("Draft the page", "completed"), ("Old approach", "cancelled"), ("Ship it", "in_progress"))
CHILD_PLAN = [{"content": "look up the grammar", "status": "completed"},
              {"content": "summarize the cases", "status": "pending"}]


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


@pytest.fixture
def homes(tmp_path: Path) -> dict[str, Path]:
    return {agent: tmp_path / "homes" / agent for agent in ("claude", "codex", "gemini", "opencode")}


@pytest.fixture
def board(tmp_path: Path, homes: dict[str, Path]) -> Iterator[Web]:
    """DSH sessions (a parent that stopped with items open, and its subagent) and three agents' sessions: Claude
    Code's waits on the person (and has a subagent that stopped), Codex's has been idle 20 minutes with an item in
    progress, Gemini CLI's works on (a status of its own: cancelled)."""
    now = time.time()
    write_session(homes["claude"], "claude-main", [write("TodoWrite", *CLAUDE_PLAN)], project="/home/dev/parser",
                  title="Fix the parser", turnOpen=True, waiting=True)
    write_session(homes["claude"], "claude-sub", [write("TodoWrite", ("Find the callers", "in_progress"))],
                  project="/home/dev/parser", title="Find callers", parent="claude-main", turnOpen=False)
    write_session(homes["codex"], "codex-1", [write("update_plan", ("Inspect the schema", "in_progress")),
                                              write("update_plan", *CODEX_PLAN)],
                  project="/home/dev/db", title="Add the migration", turnOpen=True, updated=now - 20 * 60)
    write_session(homes["codex"], "codex-1", [write("update_plan", *CODEX_PLAN)], project="/home/dev/db",
                  title="Add the migration", turnOpen=True, updated=now - 20 * 60)
    write_session(homes["gemini"], "gemini-1", [write("write_todos", *GEMINI_PLAN)], project="/home/dev/site",
                  title="Build the page", turnOpen=True)
    root = tmp_path / "sessions"
    writer = open_runtime(root, batch_delay_ms=5)
    dsh_session(writer, "dsh-parent", [{"content": "split the work", "status": "completed"},
                                       {"content": "merge the results", "status": "pending"},
                                       {"content": "report", "status": "pending"}], ended=True)
    dsh_session(writer, "dsh-child", CHILD_PLAN, ended=True, parentSession="dsh-parent", origin="subagent",
                delegationDepth=1)
    writer.dispose()
    with use_fixture_readers():
        ctx = open_runtime(root, batch_delay_ms=5)
        server = BackgroundServer(ctx, agents=["claude", "codex", "gemini", "opencode"], agent_homes=homes)
        web = Web(ctx, root, server, "")
        try:
            web.base = server.start().split("?", 1)[0]
            yield web
        finally:
            server.stop()
            ctx.dispose()


def card(page: Any, session_id: str) -> Any:
    return page.locator(f'[data-testid=card][data-session-id="{session_id}"]')


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


def test_every_agents_plan_is_on_the_board_exactly_nested_and_flagged(board: Web, new_page: Any,
                                                                        artifacts: Path) -> None:
    page = new_page("en-US", viewport={"width": 1280, "height": 900})
    page.goto(board.url("/"))
    # Top-level cards only: each subagent sits under its parent.
    expect(page.get_by_test_id("card")).to_have_count(4)
    for session_id in ("claude:claude-sub", "dsh-child"):
        expect(card(page, session_id)).to_have_count(0)

    claude = card(page, "claude:claude-main")
    expect(badge(claude)).to_have_text("Claude Code")
    assert plan_of(claude) == list(CLAUDE_PLAN)
    expect(needs(claude)).to_have_text(["waiting on you"])
    expect(claude.get_by_test_id("card-children-open")).to_have_text("1 open in subagents")

    codex = card(page, "codex:codex-1")
    expect(badge(codex)).to_have_text("Codex")
    assert plan_of(codex) == list(CODEX_PLAN)
    expect(needs(codex)).to_have_count(0)  # idle needs an item in progress: Codex's has none

    gemini = card(page, "gemini:gemini-1")
    expect(badge(gemini)).to_have_text("Gemini CLI")
    assert plan_of(gemini) == list(GEMINI_PLAN)  # "cancelled" shown as written, with a neutral mark
    expect(gemini.get_by_test_id("plan-status")).to_have_text(["cancelled"])
    expect(gemini.locator("li[data-status=cancelled] .glyph-other")).to_have_count(1)

    parent = card(page, "dsh-parent")
    expect(badge(parent)).to_have_count(0)
    expect(needs(parent)).to_have_text(["stopped with 2 open"])
    expect(parent.get_by_test_id("card-children-open")).to_have_text("1 open in subagents")
    child = parent.locator('[data-testid=child][data-session-id="dsh-child"]')
    expect(child).to_be_hidden()  # folded until asked for
    parent.get_by_test_id("card-children").locator("summary").click()
    expect(child).to_be_visible()
    assert plan_of(child) == [(item["content"], item["status"]) for item in CHILD_PLAN]
    expect(needs(child)).to_have_text(["stopped with 1 open"])
    claude.get_by_test_id("card-children").locator("summary").click()
    claude_child = claude.locator('[data-testid=child][data-session-id="claude:claude-sub"]')
    assert plan_of(claude_child) == [("Find the callers", "in_progress")]
    expect(needs(claude_child)).to_have_text(["stopped with 1 open"])
    page.screenshot(path=str(artifacts / "board-agents.png"))

    # "Needs me": the sessions that stopped with items open or wait on the person (or have such a subagent).
    page.get_by_test_id("board-needs").check()
    expect(page.get_by_test_id("card")).to_have_count(2)
    expect(card(page, "claude:claude-main")).to_have_count(1)
    expect(card(page, "dsh-parent")).to_have_count(1)
    page.get_by_test_id("board-needs").uncheck()
    expect(page.get_by_test_id("card")).to_have_count(4)


def test_idle_with_an_item_in_progress_is_flagged_after_the_threshold(board: Web, homes: dict[str, Path],
                                                                       new_page: Any) -> None:
    write_session(homes["codex"], "codex-1", [write("update_plan", ("Inspect the schema", "in_progress"))],
                  project="/home/dev/db", title="Add the migration", turnOpen=True, updated=time.time() - 20 * 60)
    page = new_page("en-US", viewport={"width": 1280, "height": 900})
    page.goto(board.url("/"))
    codex = card(page, "codex:codex-1")
    expect(needs(codex)).to_have_text(["idle 20 min with an item in progress"])
    expect(card(page, "gemini:gemini-1").get_by_test_id("needs")).to_have_count(0)  # active, written just now
    page.get_by_test_id("board-needs").check()
    expect(page.get_by_test_id("card")).to_have_count(3)


def test_a_change_to_an_agents_file_is_on_screen_within_a_second(board: Web, homes: dict[str, Path],
                                                                  new_page: Any) -> None:
    page = new_page("en-US", viewport={"width": 1280, "height": 900})
    page.goto(board.url("/"))
    gemini = card(page, "gemini:gemini-1")
    assert plan_of(gemini) == list(GEMINI_PLAN)
    page.wait_for_function("() => document.querySelector('[data-testid=card]') !== null")
    time.sleep(0.3)  # the board's connection is open by now (it opens with the first list)
    started = time.monotonic()
    write_session(homes["gemini"], "gemini-1", [write("write_todos", *GEMINI_PLAN),
                                                write("write_todos", ("Draft the page", "completed"),
                                                      ("Ship it", "completed"))],
                  project="/home/dev/site", title="Build the page", turnOpen=False)
    page.wait_for_function("""() => {
        const card = document.querySelector('[data-testid=card][data-session-id="gemini:gemini-1"]');
        return card && card.querySelectorAll('[data-testid=card-plan] li').length === 2; }""", timeout=5000)
    elapsed = time.monotonic() - started
    assert plan_of(card(page, "gemini:gemini-1")) == [("Draft the page", "completed"), ("Ship it", "completed")]
    assert elapsed < 1.0, f"the change took {elapsed:.2f} s to reach the page"
    # A new subagent appears under its parent as it is written.
    write_session(homes["gemini"], "gemini-sub", [write("write_todos", ("Check links", "in_progress"))],
                  parent="gemini-1", turnOpen=True)
    expect(card(page, "gemini:gemini-1").get_by_test_id("card-children")).to_have_count(1)
    expect(page.get_by_test_id("card")).to_have_count(4)


def test_an_agents_page_shows_its_plan_writes_as_diffs(board: Web, new_page: Any) -> None:
    page = new_page("en-US", viewport={"width": 1100, "height": 700})
    page.goto(board.url("/?session=codex%3Acodex-1"))
    expect(page.locator("body")).to_have_attribute("data-history", "loaded")
    rows = page.locator('[data-tool="update_plan"]')
    expect(rows).to_have_count(1)
    diff = rows.first.get_by_test_id("plan-diff").locator("li")
    expect(diff).to_have_count(2)
    assert [diff.nth(i).get_attribute("data-change") for i in range(2)] == ["added", "added"]
    expect(rows.first.get_by_test_id("tool-summary")).to_have_text("1/2 completed")
    expect(page.get_by_test_id("todo-panel")).to_be_visible()


def test_an_agents_page_follows_its_new_writes(board: Web, homes: dict[str, Path], new_page: Any) -> None:
    page = new_page("en-US", viewport={"width": 1100, "height": 700})
    page.goto(board.url("/?session=gemini%3Agemini-1"))
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    expect(page.locator('[data-tool="write_todos"]')).to_have_count(1)
    write_session(homes["gemini"], "gemini-1", [write("write_todos", *GEMINI_PLAN),
                                                write("write_todos", ("Draft the page", "completed"),
                                                      ("Ship it", "completed"))],
                  project="/home/dev/site", title="Build the page", turnOpen=False)
    rows = page.locator('[data-tool="write_todos"]')
    expect(rows).to_have_count(2)
    diff = rows.nth(1).get_by_test_id("plan-diff").locator("li")
    expect(diff).to_have_count(3)
    assert [diff.nth(i).get_attribute("data-change") for i in range(3)] == ["same", "removed", "status"]
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
