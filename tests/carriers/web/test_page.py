"""The page in a real browser (Debian's Chromium through Playwright): strip, rows, live updates, reload, locales."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from dsh_todo.harness import Agent
from dsh_todo.harness.session import Session
from dsh_todo.jsonutil import dumps
from tests.carriers.web.conftest import Web, build_fixture_session, reply, run_async, run_turn, todo_call

# SPEC §9.3, byte for byte: U+2002 around the strip's dots, plain spaces in the row's summary, no trailing newline.
EXPECTED_EN = (
    "row=todo_write\n"
    "title=Update to-do list\n"
    "summary=1/4 completed · 实现 fixture 样本\n"
    "suffix=+1\n"
    "panel=1 completed\u2002·\u20022 in progress\u2002·\u20021 pending\n"
    "item=completed 梳理需求\n"
    "item=in_progress 实现 fixture 样本\n"
    "item=in_progress 跑后台构建\n"
    "item=pending 浏览器验收"
)
EXPECTED_ZH = (
    "row=todo_write\n"
    "title=更新任务清单\n"
    "summary=1/4 已完成 · 实现 fixture 样本\n"
    "suffix=+1\n"
    "panel=1 已完成\u2002·\u20022 进行中\u2002·\u20021 待处理\n"
    "item=completed 梳理需求\n"
    "item=in_progress 实现 fixture 样本\n"
    "item=in_progress 跑后台构建\n"
    "item=pending 浏览器验收"
)

ASSEMBLE = """() => {
  const row = document.querySelector('[data-tool="todo_write"]');
  const summary = row.querySelector('[data-testid=tool-summary]');
  const suffix = row.querySelector('[data-testid=tool-suffix]');
  if (suffix && summary.contains(suffix)) throw new Error('the suffix must not sit inside the summary');
  const lines = ['row=' + row.getAttribute('data-tool'),
                 'title=' + row.querySelector('[data-testid=tool-title]').textContent,
                 'summary=' + summary.textContent];
  if (suffix) lines.push('suffix=' + suffix.textContent);
  const panel = document.querySelector('[data-testid=todo-panel]');
  lines.push('panel=' + panel.querySelector('[data-testid=todo-progress]').textContent);
  for (const li of panel.querySelectorAll('li[data-status]')) {
    lines.push('item=' + li.getAttribute('data-status') + ' ' + li.textContent);
  }
  return lines.join('\\n');
}"""


def open_session(page: Any, web: Web, session_id: str) -> None:
    page.goto(web.url("/?" + "session=" + session_id))
    expect(page.locator("body")).to_have_attribute("data-history", "loaded")
    expect(page.locator("body")).to_have_attribute("data-stream", "open")


def expand_strip(page: Any) -> None:
    toggle = page.get_by_test_id("todo-toggle")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")


def test_the_fixture_session_renders_the_reference_snapshot(web: Web, new_page: Any, artifacts: Path) -> None:
    writer = web.other_process()
    build_fixture_session(writer)
    writer.session_persistence.flush()

    page = new_page("en-US", viewport={"width": 1100, "height": 640})
    open_session(page, web, "fx-alpha")
    expect(page.locator('[data-tool="todo_write"]')).to_have_count(1)
    panel = page.get_by_test_id("todo-panel")
    expect(panel).to_be_visible()
    expect(panel).to_have_attribute("aria-label", "To-dos")
    expect(page.get_by_test_id("todo-list")).to_have_count(0)  # starts collapsed: counts only
    expand_strip(page)
    expect(page.locator("li[data-status]")).to_have_count(4)
    assert page.evaluate(ASSEMBLE) == EXPECTED_EN
    assert page.locator(".glyph-active").count() == 2  # two spinners at once
    panel.screenshot(path=str(artifacts / "plan-strip-expanded.png"))
    page.screenshot(path=str(artifacts / "page-fixture-session.png"))

    # The same session with a Chinese browser: the labels follow the browser's language.
    zh = new_page("zh-CN", viewport={"width": 1100, "height": 640})
    open_session(zh, web, "fx-alpha")
    expect(zh.get_by_test_id("todo-title")).to_have_text("任务")
    expand_strip(zh)
    expect(zh.locator("li[data-status]")).to_have_count(4)
    assert zh.evaluate(ASSEMBLE) == EXPECTED_ZH
    zh.get_by_test_id("todo-panel").screenshot(path=str(artifacts / "plan-strip-expanded-zh.png"))


def test_the_language_switch_relabels_and_is_remembered(web: Web, new_page: Any) -> None:
    build_fixture_session(web.ctx)
    page = new_page("zh-CN")
    open_session(page, web, "fx-alpha")
    expect(page.get_by_test_id("tool-title")).to_have_text("更新任务清单")
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    page.get_by_test_id("lang-switch").select_option("en")
    expect(page.get_by_test_id("tool-title")).to_have_text("Update to-do list")
    expect(page.get_by_test_id("todo-progress")).to_have_text(
        "1 completed\u2002·\u20022 in progress\u2002·\u20021 pending")
    page.reload()
    expect(page.get_by_test_id("tool-summary")).to_have_text("1/4 completed · 实现 fixture 样本")


def write(ctx: Any, session: Session, *items: tuple[str, str]) -> None:
    """A real todo_write call on the live session (the tool appends the todo/write)."""
    todos = [{"content": c, "status": s} for c, s in items]
    result = run_async(lambda: ctx.tools.execute("todo_write", {"todos": todos}, agent=Agent("live", session)))
    assert not result.is_error, result.text


def test_live_writes_update_the_strip_the_next_turn_hides_it_and_reload_restores_it(web: Web,
                                                                                     new_page: Any) -> None:
    session = web.ctx.sessions.create("live")
    session.append("turn/start", {"turn": 1})
    page = new_page("en-US")
    open_session(page, web, "live")
    panel = page.get_by_test_id("todo-panel")
    expect(panel).to_have_count(0)

    write(web.ctx, session, ("read the code", "in_progress"), ("write the fix", "pending"))
    expect(page.get_by_test_id("todo-progress")).to_have_text("1 in progress\u2002·\u20021 pending")
    expect(page.get_by_test_id("todo-list")).to_have_count(0)
    expand_strip(page)
    write(web.ctx, session, ("read the code", "completed"), ("write the fix", "in_progress"),
          ("watch the build", "in_progress"))
    expect(page.get_by_test_id("todo-progress")).to_have_text("1 completed\u2002·\u20022 in progress")
    expect(page.locator("li[data-status]")).to_have_count(3)
    expect(page.locator("li[data-status=in_progress]")).to_have_text(["write the fix", "watch the build"])

    end = session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    expect(page.locator("body")).to_have_attribute("data-last-seq", str(end["seq"]))
    expect(panel).to_be_visible()  # stays through turn/end: the reader is still reading the answer
    expect(page.locator("li[data-status]")).to_have_count(3)

    session.append("turn/start", {"turn": 2})
    expect(panel).to_have_count(0)

    write(web.ctx, session, ("ship it", "in_progress"))
    expect(page.get_by_test_id("todo-progress")).to_have_text("1 in progress")
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-history", "loaded")
    expect(page.get_by_test_id("todo-progress")).to_have_text("1 in progress")
    expect(page.get_by_test_id("todo-toggle")).to_have_attribute("aria-expanded", "false")

    write(web.ctx, session)  # an explicit empty list hides the strip too
    expect(panel).to_have_count(0)


def test_a_running_agent_turn_shows_its_rows_live(web: Web, new_page: Any) -> None:
    session = web.ctx.sessions.create("agent")
    page = new_page("en-US")
    open_session(page, web, "agent")
    run_turn(web.ctx, session, "fix the flaky test", [
        reply("Planning.", todo_call("c1", ("inspect the failing test", "in_progress"),
                                     ("watch the background build", "in_progress"), ("apply the fix", "pending"))),
        reply("", todo_call("c2", ("inspect the failing test", "completed"),
                            ("watch the background build", "completed"), ("apply the fix", "in_progress"))),
        reply("Fixed."),
    ])
    rows = page.locator('[data-tool="todo_write"]')
    expect(rows).to_have_count(2)
    expect(rows.nth(0).get_by_test_id("tool-summary")).to_have_text("0/3 completed · inspect the failing test")
    expect(rows.nth(0).get_by_test_id("tool-suffix")).to_have_text("+1")
    expect(rows.nth(1).get_by_test_id("tool-summary")).to_have_text("2/3 completed · apply the fix")
    expect(rows.nth(1).get_by_test_id("tool-suffix")).to_have_count(0)
    expect(rows.nth(0)).to_have_attribute("data-state", "ok")
    expect(rows.nth(1)).to_have_attribute("data-state", "ok")
    expect(page.locator(".msg-user .msg-body")).to_have_text("fix the flaky test")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text(["Planning.", "Fixed."])
    expect(page.get_by_test_id("todo-progress")).to_have_text("2 completed\u2002·\u20021 in progress")


def test_a_log_written_by_another_process_updates_the_page(web: Web, new_page: Any) -> None:
    writer = web.other_process()
    session = writer.sessions.create("remote")
    session.append("turn/start", {"turn": 1})
    writer.session_persistence.flush()
    page = new_page("en-US")
    open_session(page, web, "remote")
    write(writer, session, ("tail the log", "in_progress"))
    writer.session_persistence.flush()
    expect(page.get_by_test_id("todo-progress")).to_have_text("1 in progress")
    session.append("turn/start", {"turn": 2})
    writer.session_persistence.flush()
    expect(page.get_by_test_id("todo-panel")).to_have_count(0)


def call(session: Session, call_id: str, arguments: str, *, result: str | None = None, is_error: bool = False,
         error: dict[str, str] | None = None) -> None:
    """Hand-written tool/call (+ tool/result) events, as another harness might have logged them."""
    event = session.append("tool/call", {"turn": 1, "step": 1, "callId": call_id, "name": "todo_write",
                                         "arguments": arguments})
    if result is None and not is_error:
        return
    content = [] if result is None else [{"type": "text", "text": result}]
    data: dict[str, Any] = {"turn": 1, "step": 1, "message": {
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": is_error}],
        "role": "user", "id": f"id-{call_id}"}}
    if error is not None:
        data["error"] = error
    session.append("tool/result", data, surface_op="append", source_event_seqs=[event["seq"]])


def plan_args(*items: Any) -> str:
    return dumps({"todos": [item if isinstance(item, dict) else {"content": item[0], "status": item[1]}
                            for item in items]})


def test_tool_rows_follow_the_summary_fallback_and_state_rules(web: Web, new_page: Any) -> None:
    session = web.ctx.sessions.create("rows")
    session.append("turn/start", {"turn": 1})
    five = plan_args(("搭骨架", "completed"), ("写组件", "in_progress"), ("读源码", "in_progress"),
                     ("跑后台构建", "in_progress"), ("补测试", "pending"))
    call(session, "c1", five, result="Updated todo list: 1 pending, 3 in progress, 1 completed.")
    call(session, "c2", "not json")  # still running
    call(session, "c3", '{"other":1}', is_error=True)  # failed, no result text: the generic summary stays
    call(session, "c4", plan_args(("a", "in_progress"), ("a", "in_progress")),
         result='Error: invalid todos: duplicate content "a"\nsecond line', is_error=True)
    call(session, "c5", plan_args(("x", "in_progress")), result="Error: tool outcome unknown", is_error=True,
         error={"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"})
    call(session, "c6", plan_args(("done", "completed"), {"content": 42, "status": "in_progress"}),
         result="ok")
    call(session, "c7", '{"todos":[]}', result="Updated todo list: 0 pending, 0 in progress, 0 completed.")
    call(session, "c8", "null", result="Error: invalid arguments", is_error=True)
    call(session, "c9", "", result="x")

    page = new_page("zh-CN")
    open_session(page, web, "rows")

    def row(call_id: str) -> Any:
        return page.locator(f'[data-call-id="{call_id}"]')

    expect(row("c1").get_by_test_id("tool-summary")).to_have_text("1/5 已完成 · 写组件")
    expect(row("c1").get_by_test_id("tool-suffix")).to_have_text("+2")
    expect(row("c1")).to_have_attribute("data-state", "ok")
    expect(row("c1").locator(".tool-head")).to_have_text("更新任务清单·1/5 已完成 · 写组件+2")
    expect(row("c2")).to_have_attribute("data-state", "running")
    expect(row("c2").get_by_test_id("tool-summary")).to_have_text("todo_write · not json")
    expect(row("c2").locator(".visually-hidden")).to_have_text("运行中")
    expect(row("c3")).to_have_attribute("data-state", "error")
    expect(row("c3").get_by_test_id("tool-summary")).to_have_text('todo_write · {"other":1}')
    expect(row("c3").locator(".visually-hidden")).to_have_text("失败")
    expect(row("c4")).to_have_attribute("data-state", "error")
    expect(row("c4").get_by_test_id("tool-summary")).to_have_text('Error: invalid todos: duplicate content "a"')
    expect(row("c4").get_by_test_id("tool-suffix")).to_have_count(0)
    expect(row("c5")).to_have_attribute("data-state", "stopped")
    expect(row("c5").locator(".visually-hidden")).to_have_text("已停止")
    expect(row("c6").get_by_test_id("tool-summary")).to_have_text("1/2 已完成")
    expect(row("c6")).not_to_contain_text("+")
    expect(row("c7").get_by_test_id("tool-summary")).to_have_text("0/0 已完成")
    expect(row("c9").get_by_test_id("tool-summary")).to_have_text("todo_write · c9")

    head = row("c1").get_by_test_id("tool-head")
    expect(head).to_have_attribute("aria-expanded", "false")
    head.click()
    expect(head).to_have_attribute("aria-expanded", "true")
    expect(row("c1").get_by_test_id("tool-in")).to_have_text(json.dumps(json.loads(five), indent=2,
                                                                        ensure_ascii=False))
    expect(row("c1").get_by_test_id("tool-out")).to_have_text(
        "Updated todo list: 1 pending, 3 in progress, 1 completed.")
    head.click()
    expect(row("c1").get_by_test_id("tool-body")).to_have_count(0)

    other = row("c2").get_by_test_id("tool-head")
    other.focus()
    page.keyboard.press("Enter")
    expect(other).to_have_attribute("aria-expanded", "true")
    expect(row("c2").get_by_test_id("tool-in")).to_have_text("not json")
    page.keyboard.press(" ")
    expect(other).to_have_attribute("aria-expanded", "false")


def test_the_ellipsis_clips_the_summary_never_the_suffix(web: Web, new_page: Any) -> None:
    session = web.ctx.sessions.create("narrow")
    session.append("turn/start", {"turn": 1})
    long_task = "migrate every legacy payment adapter to the new settlement pipeline " * 3
    call(session, "c1", plan_args((long_task.strip(), "in_progress"), ("b", "in_progress"), ("c", "in_progress")),
         result="ok")
    page = new_page("en-US", viewport={"width": 760, "height": 600})
    open_session(page, web, "narrow")
    summary = page.get_by_test_id("tool-summary")
    suffix = page.get_by_test_id("tool-suffix")
    expect(suffix).to_have_text("+2")
    geometry = page.evaluate("""() => {
      const s = document.querySelector('[data-testid=tool-summary] .tool-rest');
      const c = document.querySelector('[data-testid=tool-summary] .tool-count');
      const x = document.querySelector('[data-testid=tool-suffix]');
      const head = document.querySelector('[data-testid=tool-head]');
      const sx = x.getBoundingClientRect(), hx = head.getBoundingClientRect();
      return {clipped: s.scrollWidth > s.clientWidth, suffixWhole: x.scrollWidth <= x.clientWidth + 1,
              countWhole: c.scrollWidth <= c.clientWidth + 1,
              inside: sx.right <= hx.right + 0.5 && sx.left >= hx.left, width: sx.width};
    }""")
    # The task takes the ellipsis; the count before it and the +N after it stay whole.
    assert geometry == {"clipped": True, "suffixWhole": True, "countWhole": True, "inside": True,
                        "width": geometry["width"]}
    assert geometry["width"] > 5
    expect(summary).to_have_text("0/3 completed · " + long_task.strip())


def test_sessions_are_listed_and_opened_from_the_list(web: Web, new_page: Any) -> None:
    build_fixture_session(web.ctx)
    other = web.ctx.sessions.create("second")
    run_turn(web.ctx, other, "hello there", [reply("General Kenobi.")])
    page = new_page("en-US")
    page.goto(web.url("/"))
    expect(page.get_by_test_id("card")).to_have_count(2)  # the board
    page.locator('[data-testid=card][data-session-id="second"] [data-testid=card-title]').click()
    expect(page).to_have_url(web.url("/?session=second"))
    links = page.locator("[data-testid=session-list] a")
    expect(links).to_have_count(2)
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("General Kenobi.")
    expect(page.get_by_test_id("todo-panel")).to_have_count(0)
    page.locator('[data-testid=session-list] [data-session-id="fx-alpha"]').click()
    expect(page.get_by_test_id("todo-panel")).to_be_visible()
    page.go_back()
    expect(page).to_have_url(web.url("/?session=second"))
    expect(page.get_by_test_id("todo-panel")).to_have_count(0)
    expect(page.locator('[data-testid=session-list] [data-session-id="second"]')).to_have_attribute(
        "aria-current", "page")


def test_a_long_session_loads_earlier_pages_on_demand(web: Web, new_page: Any) -> None:
    session = web.ctx.sessions.create("long")
    for index in range(230):
        session.append("user/message", {"content": [{"type": "text", "text": f"message {index}"}],
                                        "source": {"kind": "user"}, "role": "user", "id": f"m{index}"},
                       surface_op="append")
    page = new_page("en-US")
    open_session(page, web, "long")
    messages = page.locator(".msg-user .msg-body")
    expect(messages).to_have_count(200)
    expect(messages.first).to_have_text("message 30")
    page.get_by_test_id("load-earlier").click()
    expect(messages).to_have_count(230)
    expect(messages.first).to_have_text("message 0")
    expect(page.get_by_test_id("load-earlier")).to_have_count(0)


def test_a_session_that_starts_after_the_page_opened_appears(web: Web, new_page: Any) -> None:
    page = new_page("en-US")
    open_session(page, web, "soon")
    expect(page.get_by_test_id("not-found")).to_be_visible()
    session = web.ctx.sessions.create("soon")
    session.append("turn/start", {"turn": 1})
    write(web.ctx, session, ("arrive late", "in_progress"))
    expect(page.get_by_test_id("todo-progress")).to_have_text("1 in progress")
    expect(page.get_by_test_id("not-found")).to_have_count(0)


def drop_connections(web: Web, session_id: str) -> None:
    """Drop every mux connection of ``session_id`` as the server drops one that fell a page behind."""
    hub, loop = web.server.app.hub, web.server.app.loop
    assert hub is not None and loop is not None

    def drop() -> None:
        for subscriber in list(hub._targeted.get(session_id, ())):
            subscriber.dropped = True
            subscriber.close()

    loop.call_soon_threadsafe(drop)


def test_a_dropped_page_resumes_from_its_last_seq_and_reads_the_tail_after_a_gap(web: Web, new_page: Any) -> None:
    """Repro (before): EventSource reconnected with the afterSeq it first subscribed with, so a page the server
    dropped was replayed its whole backlog again, and a page further behind than a replay had a hole in its log."""
    from dsh_todo.carriers.web.frames import REPLAY_LIMIT

    session = web.ctx.sessions.create("dropped")
    session.append("turn/start", {"turn": 1})
    page = new_page()
    open_session(page, web, "dropped")
    body = page.locator("body")
    drop_connections(web, "dropped")
    expect(body).to_have_attribute("data-stream", "connecting")
    last = session.append("todo/write", {"todos": [{"content": "after a drop", "status": "in_progress"}]})
    expect(body).to_have_attribute("data-stream", "open")
    expect(body).to_have_attribute("data-last-seq", str(last["seq"]))
    expand_strip(page)
    expect(page.get_by_test_id("todo-list")).to_contain_text("after a drop")

    drop_connections(web, "dropped")
    expect(body).to_have_attribute("data-stream", "connecting")
    for number in range(REPLAY_LIMIT + 50):  # more than a replay, while the page is away
        last = session.append("todo/write", {"todos": [{"content": f"step {number}", "status": "in_progress"}]})
    expect(body).to_have_attribute("data-last-seq", str(last["seq"]))
    expect(body).to_have_attribute("data-stream", "open")
    if page.get_by_test_id("todo-toggle").get_attribute("aria-expanded") == "false":  # the page was reopened
        expand_strip(page)
    expect(page.get_by_test_id("todo-list")).to_contain_text(f"step {REPLAY_LIMIT + 49}")
