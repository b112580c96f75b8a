"""Narrow screens (issue 23): at 390 px nothing is clipped or wrapped inside a word, and the counts stay whole.

Repro (before): at 390 px the brand wrapped to "dsh-/todo" and the strip's counts were cut to "1 in progres…",
hiding what was pending. Checked through the DOM (a box that holds its text has ``scrollWidth <= clientWidth``; a
line that did not wrap is one client rect tall), with screenshots at 1280 and 390 px left in ``test-artifacts/`` for
a person to look at; only boxes are compared, never pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.carriers.web.conftest import Web, build_fixture_session
from tests.carriers.web.test_board import agent

LONG = "Migrate every legacy payment adapter to the new settlement pipeline and document the rollback"

FITS = """selector => [...document.querySelectorAll(selector)].map(node => ({
    text: node.textContent, fits: node.scrollWidth <= node.clientWidth + 0.5,
    lines: node.getClientRects().length,
    height: node.getBoundingClientRect().height,
    lineHeight: parseFloat(getComputedStyle(node).lineHeight) || 20,
    ellipsis: getComputedStyle(node).textOverflow === 'ellipsis' && node.scrollWidth > node.clientWidth + 0.5,
}))"""

NO_PAGE_OVERFLOW = """() => ({page: document.documentElement.scrollWidth <= document.documentElement.clientWidth,
    overflowing: [...document.querySelectorAll('body *')].filter(n => {
        const r = n.getBoundingClientRect();
        return r.width > 0 && getComputedStyle(n).visibility !== 'hidden' && r.right > window.innerWidth + 0.5;
    }).map(n => n.className || n.tagName)})"""


def whole(page: Any, selector: str, expected: int | None = None) -> list[dict[str, Any]]:
    """Every element matching ``selector`` holds its text on one line, unclipped (once ``expected`` are there: the
    list arrives on its own request)."""
    if expected is not None:
        expect(page.locator(selector)).to_have_count(expected)
    boxes: list[dict[str, Any]] = page.evaluate(FITS, selector)
    if expected is not None:
        assert len(boxes) == expected, boxes
    for box in boxes:
        assert box["fits"] and not box["ellipsis"], box
        assert box["height"] < 1.6 * box["lineHeight"], box  # one line: not wrapped
    return boxes


def no_overflow(page: Any) -> None:
    assert page.evaluate(NO_PAGE_OVERFLOW) == {"page": True, "overflowing": []}


def board_root(web: Web) -> None:
    writer = web.other_process()
    agent(writer, "parallel", LONG, [{"content": "read the adapters", "status": "completed"},
                                     {"content": LONG, "status": "in_progress"},
                                     {"content": "watch the background build", "status": "in_progress"},
                                     {"content": "ship it", "status": "pending"}], None, release=False,
          cwd="/home/dev/" + "very-long-project-directory-name-" * 3)
    agent(writer, "done", "Write the release notes", [{"content": "draft", "status": "completed"}],
          {"kind": "completed"})
    agent(writer, "0123456789abcdef0123456789abcdef0123456789abcdef", None, None, {"kind": "interrupted"})


@pytest.mark.parametrize("width", [1280, 390, 320])
def test_the_board_fits_any_width(web: Web, new_page: Any, artifacts: Path, width: int) -> None:
    board_root(web)
    page = new_page("en-US", viewport={"width": width, "height": 800})
    page.goto(web.url("/"))
    cards = page.get_by_test_id("card")
    expect(cards).to_have_count(3)
    whole(page, "[data-testid=brand]", 1)
    whole(page, "[data-testid=plan-count]", 2)
    whole(page, "[data-testid=row-state]", 3)
    whole(page, "[data-testid=board-count]", 1)
    no_overflow(page)
    boxes = cards.evaluate_all("nodes => nodes.map(n => n.getBoundingClientRect().toJSON())")
    for box in boxes:
        assert box["left"] >= 0 and box["right"] <= width + 0.5
    if width >= 1280:
        assert boxes[0]["top"] == boxes[1]["top"]  # side by side
    else:
        assert boxes[1]["top"] >= boxes[0]["bottom"]  # one column
    page.screenshot(path=str(artifacts / f"board-{width}.png"), full_page=True)
    zh = new_page("zh-CN", viewport={"width": width, "height": 800})
    zh.goto(web.url("/"))
    expect(zh.get_by_test_id("card")).to_have_count(3)
    whole(zh, "[data-testid=row-state]", 3)
    whole(zh, "[data-testid=plan-count]", 2)
    no_overflow(zh)
    zh.screenshot(path=str(artifacts / f"board-{width}-zh.png"), full_page=True)


@pytest.mark.parametrize("width", [1280, 390, 320])
def test_a_session_page_fits_any_width_and_its_counts_stay_whole(web: Web, new_page: Any, artifacts: Path,
                                                                  width: int) -> None:
    build_fixture_session(web.ctx)
    for locale, expected in (("en-US", "1 completed\u2002·\u20022 in progress\u2002·\u20021 pending"),
                             ("zh-CN", "1 已完成\u2002·\u20022 进行中\u2002·\u20021 待处理")):
        page = new_page(locale, viewport={"width": width, "height": 800})
        page.goto(web.url("/?session=fx-alpha"))
        expect(page.locator("body")).to_have_attribute("data-stream", "open")
        expect(page.get_by_test_id("todo-progress")).to_have_text(expected)
        whole(page, "[data-testid=brand]", 1)
        whole(page, ".todo-seg", 3)  # each count on one line, never cut: "1 in progres…" is gone
        progress = page.evaluate(FITS, "[data-testid=todo-progress]")[0]
        assert progress["fits"] and not progress["ellipsis"], progress
        whole(page, "[data-testid=session-list] [data-testid=row-state]", 1)
        whole(page, "[data-testid=session-list] [data-testid=plan-count]", 1)
        whole(page, "[data-testid=tool-suffix]", 1)
        whole(page, "[data-testid=tool-summary] .tool-count", 1)  # "1/4 completed · " whole, the task clipped
        whole(page, ".turn-end-label", 1)
        no_overflow(page)
        page.get_by_test_id("todo-toggle").click()
        expect(page.locator("li[data-status]")).to_have_count(4)
        no_overflow(page)
        page.screenshot(path=str(artifacts / f"session-{width}-{locale}.png"))


def test_the_page_names_a_cjk_font_stack(web: Web, new_page: Any) -> None:
    """Repro (before): the stack named two CJK faces after the Latin ones only; a Chinese page now puts its CJK
    faces first (the README names the Debian package that provides the first one)."""
    families = {}
    for locale in ("en-US", "zh-CN"):
        page = new_page(locale)
        page.goto(web.url("/"))
        expect(page.locator("body")).to_have_attribute("data-view", "board")
        families[locale] = [name.strip().strip('"') for name in
                            page.evaluate("() => getComputedStyle(document.body).fontFamily").split(",")]
    for stack in families.values():
        assert {"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei"} <= set(stack)
        assert stack[-1] == "sans-serif"
    assert families["zh-CN"][0] == "Noto Sans CJK SC"
    assert families["en-US"][0] == "system-ui"
