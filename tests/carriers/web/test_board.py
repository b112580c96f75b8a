"""Every agent's plan at a glance (issue 23), in Chromium: session rows, the board at ``/``, turn markers.

Repro (before): the list was a column of bare ids ("demo-20261204-034…"), with no time, plan or state; the page's
"● Live" was its own connection's state, shown on sessions that had ended long ago; a turn's end was not shown; and
``/`` was an empty page asking to choose a session.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from dsh_todo.harness import Context
from dsh_todo.harness.session import Session
from tests.carriers.web.conftest import Web
from tests.crafted import copied_elsewhere

PAGE_CARDS = 48
"""Cards the board shows before "Show more" (``PAGE_CARDS`` in ``static/board.js``)."""
PLAN = [{"content": "read the code", "status": "completed"}, {"content": "write the fix", "status": "in_progress"},
        {"content": "watch the build", "status": "in_progress"}, {"content": "ship it", "status": "pending"}]


def user(session: Session, text: str) -> None:
    session.append("user/message", {"content": [{"type": "text", "text": text}], "source": {"kind": "user"},
                                    "role": "user", "id": f"u{session.seq}"}, surface_op="append")


def agent(ctx: Context, session_id: str, prompt: str | None, todos: list[dict[str, str]] | None,
          end: dict[str, Any] | None, *, cwd: str = "/home/dev/shop", release: bool = True) -> Session:
    """A session as an agent leaves it: one turn, its plan, how the turn ended; its writer gone or still there."""
    session = ctx.sessions.create(session_id, cwd=cwd)
    session.append("turn/start", {"turn": 1})
    if prompt is not None:
        user(session, prompt)
    if todos is not None:
        session.append("todo/write", {"todos": todos})
    if end is not None:
        session.append("turn/end", {"turn": 1, "reason": end})
    ctx.session_persistence.flush()
    if release:
        ctx.session_persistence.release(session_id)
    return session


def open_board(page: Any, web: Web, count: int) -> None:
    page.goto(web.url("/"))
    expect(page.locator("body")).to_have_attribute("data-view", "board")
    expect(page.get_by_test_id("card")).to_have_count(count)


def card_ids(page: Any, expected: list[str]) -> None:
    """Wait until the board's cards are these sessions, in this order."""
    page.wait_for_function("""expected => JSON.stringify([...document.querySelectorAll('[data-testid=card]')]
        .map(n => n.dataset.sessionId)) === JSON.stringify(expected)""", arg=expected)


def card(page: Any, session_id: str) -> Any:
    return page.locator(f'[data-testid=card][data-session-id="{session_id}"]')


def test_session_rows_carry_title_project_time_plan_and_state(web: Web, new_page: Any) -> None:
    writer = web.other_process()
    agent(writer, "uuid-ended", "Add rate limiting", PLAN, {"kind": "completed"})
    agent(writer, "uuid-live", "Fix the flaky test", PLAN, None, cwd="/home/dev/api", release=False)
    agent(writer, "uuid-aborted", None, None, {"kind": "aborted", "reason": {"kind": "user"}})
    copied_elsewhere(web.root)
    page = new_page("en-US", viewport={"width": 1280, "height": 720})
    page.goto(web.url("/?session=uuid-ended"))
    rows = page.locator("[data-testid=session-list] a")
    expect(rows).to_have_count(5)

    def row(session_id: str) -> Any:
        return page.locator(f'[data-testid=session-list] a[data-session-id="{session_id}"]')

    expect(row("uuid-ended").get_by_test_id("row-title")).to_have_text("Add rate limiting")
    expect(row("uuid-ended").get_by_test_id("row-state")).to_have_text("ended")
    expect(row("uuid-ended").get_by_test_id("row-project")).to_have_text("shop")
    expect(row("uuid-ended").get_by_test_id("row-project")).to_have_attribute("title", "/home/dev/shop")
    expect(row("uuid-ended").get_by_test_id("plan-count")).to_have_text("1/4")
    expect(row("uuid-ended").get_by_test_id("row-active")).to_have_text("write the fix")
    expect(row("uuid-ended").get_by_test_id("row-more")).to_have_text("+1")
    time = row("uuid-ended").get_by_test_id("row-time")
    expect(time).to_have_text("now")
    assert time.get_attribute("title")  # the exact time on hover
    assert time.get_attribute("datetime").endswith("Z")
    expect(row("uuid-live").get_by_test_id("row-state")).to_have_text("live")
    expect(row("uuid-aborted").get_by_test_id("row-title")).to_have_text("uuid-aborted")  # no user message: the id
    expect(row("uuid-aborted").get_by_test_id("row-state")).to_have_text("aborted")
    expect(row("a-copy").get_by_test_id("row-state")).to_have_text("refused")
    expect(row("a-copy").get_by_test_id("row-reason")).to_contain_text("is not where its header puts it")
    page.get_by_test_id("nav-board").click()
    expect(card(page, "a-copy")).to_have_attribute("data-state", "refused")
    expect(card(page, "a-copy").get_by_test_id("card-reason")).to_contain_text("is not where its header puts it")
    expect(card(page, "uuid-live").get_by_test_id("row-state")).to_have_text("live")
    page.goto(web.url("/?session=uuid-ended"))
    # The connection indicator says what it is, and never reads as a session's state.
    expect(page.get_by_test_id("connection")).to_have_text("Connected")


def test_the_board_is_the_default_view_sorted_filtered_and_searched(web: Web, new_page: Any) -> None:
    writer = web.other_process()
    agent(writer, "first", "Add rate limiting", PLAN, {"kind": "completed"})
    agent(writer, "second", "Fix the flaky test",
          [{"content": "bisect the failure", "status": "in_progress"}], None, cwd="/home/dev/api", release=False)
    agent(writer, "third", "Write the release notes", [{"content": "draft", "status": "completed"}],
          {"kind": "completed"}, cwd="/home/dev/api")
    page = new_page("en-US", viewport={"width": 1280, "height": 720})
    open_board(page, web, 3)
    cards = page.get_by_test_id("card")
    card_ids(page, ["third", "second", "first"])  # last activity first
    expect(card(page, "second").get_by_test_id("card-active")).to_have_text("bisect the failure")
    expect(card(page, "third")).to_contain_text("Every task completed")
    expect(card(page, "first").get_by_test_id("plan-count")).to_have_text("1/4")
    expect(card(page, "first").get_by_test_id("card-active").locator("li")).to_have_text(
        ["write the fix", "watch the build"])

    page.get_by_test_id("board-state").select_option("live")
    card_ids(page, ["second"])
    page.get_by_test_id("board-state").select_option("")
    page.get_by_test_id("board-project").select_option("/home/dev/api")
    expect(cards).to_have_count(2)
    page.get_by_test_id("board-project").select_option("")
    page.get_by_test_id("board-search").fill("WATCH the")  # task text, any case
    card_ids(page, ["first"])
    page.get_by_test_id("board-search").fill("nothing like this")
    expect(page.get_by_test_id("board-empty")).to_have_text("No session matches.")
    page.get_by_test_id("board-search").fill("")
    expect(cards).to_have_count(3)

    card(page, "second").get_by_test_id("card-title").click()
    expect(page).to_have_url(web.url("/?session=second"))
    expect(page.locator("body")).to_have_attribute("data-view", "session")
    page.get_by_test_id("nav-board").click()
    expect(page).to_have_url(web.url("/"))
    expect(cards).to_have_count(3)


def test_the_board_follows_live_sessions_over_push_frames(web: Web, new_page: Any) -> None:
    writer = web.other_process()
    session = agent(writer, "worker", "Migrate the database", PLAN[:2], None, release=False)
    page = new_page("en-US")
    open_board(page, web, 1)
    expect(card(page, "worker").get_by_test_id("plan-count")).to_have_text("1/2")
    hub = web.server.app.hub
    assert hub is not None
    expect(page.locator("body")).to_have_attribute("data-listed", "1")
    for _ in range(50):  # the board subscribed to the live session (frames, not a poll of the list)
        if "worker" in hub._targeted:
            break
        page.wait_for_timeout(100)
    assert "worker" in hub._targeted
    session.append("todo/write", {"todos": [{**item, "status": "completed"} for item in PLAN[:2]]})
    writer.session_persistence.flush()
    expect(card(page, "worker").get_by_test_id("plan-count")).to_have_text("2/2")
    expect(card(page, "worker")).to_contain_text("Every task completed")


def test_the_board_shows_a_page_of_cards_and_more_on_demand(web: Web, new_page: Any) -> None:
    writer = web.other_process()
    for number in range(PAGE_CARDS + 5):
        agent(writer, f"s{number:03d}", f"task {number}", [{"content": f"step of {number}", "status": "in_progress"}],
              {"kind": "completed"})
    page = new_page("en-US", viewport={"width": 1280, "height": 720})
    page.goto(web.url("/"))
    expect(page.get_by_test_id("board-count")).to_have_text(f"{PAGE_CARDS} of {PAGE_CARDS + 5}")
    expect(page.get_by_test_id("card")).to_have_count(PAGE_CARDS)
    page.get_by_test_id("board-more").scroll_into_view_if_needed()
    expect(page.get_by_test_id("card")).to_have_count(PAGE_CARDS + 5)
    expect(page.get_by_test_id("board-more")).to_be_hidden()


def test_each_turn_shows_how_it_ended(web: Web, new_page: Any) -> None:
    session = web.ctx.sessions.create("turns")
    reasons = [{"kind": "completed"}, {"kind": "interrupted"}, {"kind": "aborted", "reason": {"kind": "user"}},
               {"kind": "error", "error": {"name": "ModelError", "message": "the model endpoint said 503"}},
               {"kind": "max-tokens"}]
    for turn, reason in enumerate(reasons, start=1):
        session.append("turn/start", {"turn": turn})
        user(session, f"prompt {turn}")
        session.append("turn/end", {"turn": turn, "reason": reason})
    page = new_page("en-US")
    page.goto(web.url("/?session=turns"))
    markers = page.get_by_test_id("turn-end")
    expect(markers).to_have_count(5)
    assert markers.evaluate_all("nodes => nodes.map(n => n.dataset.kind)") == [
        "completed", "interrupted", "aborted", "error", "max-tokens"]
    expect(markers.locator(".turn-end-label")).to_have_text(
        ["Turn 1 completed", "Turn 2 interrupted", "Turn 3 aborted", "Turn 4 failed", "Turn 5 ended: max-tokens"])
    expect(markers.nth(3).locator(".turn-end-detail")).to_have_text("the model endpoint said 503")
    # Each marker sits where its turn ends: after that turn's message, before the next turn's.
    order = page.evaluate("""() => [...document.querySelectorAll('.msg-user, [data-testid=turn-end]')]
        .map(n => n.dataset.kind || n.textContent.replace('You', ''))""")
    assert order == ["prompt 1", "completed", "prompt 2", "interrupted", "prompt 3", "aborted", "prompt 4", "error",
                     "prompt 5", "max-tokens"]
    session.append("turn/start", {"turn": 6})
    session.append("turn/end", {"turn": 6, "reason": {"kind": "completed"}})  # live, over the push frames
    expect(markers).to_have_count(6)
    zh = new_page("zh-CN")
    zh.goto(web.url("/?session=turns"))
    expect(zh.get_by_test_id("turn-end").first.locator(".turn-end-label")).to_have_text("第 1 轮已完成")


def test_a_turn_its_writer_left_open_shows_as_interrupted_where_the_log_stops(web: Web, new_page: Any) -> None:
    """The log has no turn/end (the writer was killed); the reader closes the turn in memory, and so does the page."""
    writer = web.other_process()
    agent(writer, "crashed", "Rebuild the index", PLAN, None)
    page = new_page("en-US")
    page.goto(web.url("/?session=crashed"))
    marker = page.get_by_test_id("turn-end")
    expect(marker).to_have_count(1)
    expect(marker).to_have_attribute("data-kind", "interrupted")
    expect(marker.locator(".turn-end-label")).to_have_text("Turn 1 interrupted")
    assert marker.get_attribute("title").startswith("recovered in memory")
    assert page.evaluate("() => document.querySelector('.conversation').lastElementChild.dataset.testid") == "turn-end"
