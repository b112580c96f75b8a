"""Model-written text is text (USERS.md #7): a corpus of XSS payloads as todos, arguments, results, messages and
session ids, rendered by Chromium, must never execute and must read back exactly as written.

The page runs with its Content-Security-Policy *bypassed*, so what is proven here is the client's own discipline
(text nodes only), not the policy's second wall. A canary at the end shows the corpus is live: the same payloads do
execute when something does put them into ``innerHTML``.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from dsh_todo.jsonutil import dumps
from tests.carriers.web.conftest import Web, reply, run_turn, todo_call
from tests.carriers.web.test_page import call

MARK = "window.__xss=(window.__xss||0)+1"
PAYLOADS = [
    f'<img src=x onerror="{MARK}">',
    f"<svg onload={MARK}>",
    f'"><img src=x onerror={MARK}>',
    f"<script>{MARK}</script>",
    '<iframe srcdoc="<script>parent.__xss=(parent.__xss||0)+1</script>"></iframe>',
    f'<details open ontoggle="{MARK}">x</details>',
    f'<svg><animate onbegin="{MARK}" attributeName="x" dur="1s"/></svg>',
    f'<a href="javascript:{MARK}">click me</a>',
    f"javascript:{MARK}",
    f'<math><mtext><table><mglyph><style><img src=x onerror="{MARK}">',
    f"{{{{constructor.constructor('{MARK}')()}}}}",
    f"${{{MARK}}}",
    f'<input autofocus onfocus="{MARK}">',
    f'<object data="javascript:{MARK}"></object>',
    f'<body onload="{MARK}">',
    f"<style>@import 'javascript:{MARK}';</style>",
    "line one\nline two\u2028after LS\u2029after PS",
    "&lt;b&gt;entities stay text&lt;/b&gt; &amp; <b>bold?</b>",
]
ACTIVE = PAYLOADS[0]


def hostile_session(web: Web, session_id: str) -> None:
    session = web.ctx.sessions.create(session_id)
    todos = [(payload, "completed") for payload in PAYLOADS[2:]] + [(PAYLOADS[1], "pending")]
    run_turn(web.ctx, session, PAYLOADS[0] + " " + PAYLOADS[3], [
        reply(PAYLOADS[5], todo_call("call_plan", (ACTIVE, "in_progress"), *todos)),
        # A duplicate makes the tool's own error text carry a payload: the row shows it as its error line.
        reply("", todo_call("call_dup", (PAYLOADS[6], "pending"), (PAYLOADS[6], "completed"))),
        reply(PAYLOADS[9]),
    ])
    call(session, "call_raw", PAYLOADS[2] + "\n" + PAYLOADS[7])  # not JSON: the generic summary shows its first line
    call(session, "call_obj", dumps({"other": PAYLOADS[4]}), result=PAYLOADS[8], is_error=True)


def assert_nothing_ran(page: Any) -> None:
    assert page.evaluate("() => window.__xss === undefined && window.parent.__xss === undefined")
    injected = page.evaluate("""() => document.querySelectorAll(
        'img, iframe, object, embed, details:not([data-testid=card-children]),'
            + ' input:not([data-testid=board-search]):not([data-testid=board-needs]), math, a[href^="javascript"],'
        + ' [onerror], [onload], [onfocus],'
        + ' [ontoggle], [onbegin], style:not(head style)').length""")
    assert injected == 0
    assert page.evaluate("() => document.scripts.length") == 1  # the page's own module only


def test_xss_payloads_render_as_text_and_never_execute(web: Web, new_page: Any) -> None:
    hostile_id = PAYLOADS[0]
    hostile_session(web, hostile_id)
    dialogs: list[str] = []
    page = new_page("en-US", bypass_csp=True)
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    # A second session whose id, project and tasks are payloads, with no user message (its id is its title).
    other = web.ctx.sessions.create(PAYLOADS[7], cwd="/srv/" + PAYLOADS[6])
    other.append("turn/start", {"turn": 1})
    other.append("todo/write", {"todos": [{"content": PAYLOADS[12], "status": "in_progress"},
                                          {"content": PAYLOADS[15], "status": "in_progress"}]})
    page.goto(web.url("/"))

    # The board: titles, projects and task text are text.
    title = PAYLOADS[0] + " " + PAYLOADS[3]
    hostile_card = page.locator("[data-testid=card]").filter(has_text=ACTIVE)
    expect(hostile_card.get_by_test_id("card-title")).to_have_text(title)
    expect(hostile_card.get_by_test_id("card-active")).to_have_text(ACTIVE)
    other_card = page.locator("[data-testid=card]").filter(has_text=PAYLOADS[12])
    expect(other_card.get_by_test_id("card-title")).to_have_text(PAYLOADS[7])
    expect(other_card.locator(".project")).to_have_attribute("title", "/srv/" + PAYLOADS[6])
    assert other_card.locator(".card-task").evaluate_all("nodes => nodes.map(n => n.textContent)") == [
        PAYLOADS[12], PAYLOADS[15]]
    page.get_by_test_id("board-search").fill(PAYLOADS[10])  # a task of the hostile plan, searched as text
    expect(page.get_by_test_id("card")).to_have_count(1)
    page.get_by_test_id("board-search").fill("")
    assert_nothing_ran(page)

    hostile_card.get_by_test_id("card-title").click()
    expect(page.locator("body")).to_have_attribute("data-stream", "open")
    row = page.locator(f'[data-testid=session-list] a[href="{page.url[len(web.url("")) - 1:]}"]')
    expect(row.get_by_test_id("row-title")).to_have_text(title)
    expect(row.get_by_test_id("row-active")).to_have_text(ACTIVE)

    expect(page.get_by_test_id("session-name")).to_have_text(hostile_id)
    expect(page.locator(".msg-user .msg-body")).to_have_text(PAYLOADS[0] + " " + PAYLOADS[3])
    expect(page.locator(".msg-assistant .msg-body")).to_have_text([PAYLOADS[5], PAYLOADS[9]])

    plan_row = page.locator('[data-call-id="call_plan"]')
    done = len(PAYLOADS) - 2
    expect(plan_row.get_by_test_id("tool-summary")).to_have_text(f"{done}/{len(PAYLOADS)} completed · {ACTIVE}")
    dup_row = page.locator('[data-call-id="call_dup"]')
    expect(dup_row.get_by_test_id("tool-summary")).to_have_text(
        "Error: invalid todos: duplicate content " + dumps(PAYLOADS[6]))
    raw_row = page.locator('[data-call-id="call_raw"]')
    expect(raw_row.get_by_test_id("tool-summary")).to_have_text("todo_write · " + PAYLOADS[2])
    obj_row = page.locator('[data-call-id="call_obj"]')
    expect(obj_row.get_by_test_id("tool-summary")).to_have_text(PAYLOADS[8])

    # Expand everything: the strip's items and every row's IN/OUT.
    page.get_by_test_id("todo-toggle").click()
    items = page.locator("li[data-status] .todo-content")
    expect(items).to_have_count(len(PAYLOADS))
    assert items.evaluate_all("nodes => nodes.map(n => n.textContent)") == [
        ACTIVE, *PAYLOADS[2:], PAYLOADS[1]]
    for row in (plan_row, dup_row, raw_row, obj_row):
        row.get_by_test_id("tool-head").click()
    expect(raw_row.get_by_test_id("tool-in")).to_have_text(PAYLOADS[2] + "\n" + PAYLOADS[7])
    expect(obj_row.get_by_test_id("tool-out")).to_have_text(PAYLOADS[8])

    # The same payloads live, over SSE.
    session = web.ctx.sessions.get(hostile_id)
    assert session is not None
    session.append("turn/start", {"turn": 2})
    live = [PAYLOADS[-2], PAYLOADS[13], PAYLOADS[14]]
    session.append("todo/write", {"todos": [{"content": text, "status": "in_progress"} for text in live]})
    expect(page.get_by_test_id("todo-toggle")).to_have_attribute("aria-expanded", "true")  # the reader's choice
    expect(items).to_have_text(live)
    page.get_by_test_id("lang-switch").select_option("zh")  # a full re-render from stored events
    expect(page.get_by_test_id("todo-title")).to_have_text("任务")
    page.locator("li[data-status]").first.hover()

    # Canary: the corpus is live. The same payloads, with their own marker, put into innerHTML, do run; once they
    # have, any handler our rendering could have created (queued earlier) would have run too.
    canaries = [payload.replace("__xss", "__canary") for payload in (PAYLOADS[0], PAYLOADS[5], PAYLOADS[6])]
    page.evaluate("""payloads => { for (const p of payloads) {
        const d = document.createElement('div'); d.className = 'canary'; d.innerHTML = p; document.body.append(d);
    } }""", canaries)
    page.wait_for_function("() => window.__canary >= 3")
    page.evaluate("() => document.querySelectorAll('.canary').forEach(node => node.remove())")

    assert dialogs == []
    assert_nothing_ran(page)
