"""Every model-visible error text of SPEC §2, pinned in full, plus the §13 porting traps and cancellation (§1.4)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_todo.harness import Agent, Context
from dsh_todo.harness.session import Event, Session
from dsh_todo.harness.tools import AbortSignal
from tests.conftest import BootFactory, todo_writes

pytestmark = pytest.mark.anyio

ARGS_INFO = {"name": "ToolArgsError", "code": "INVALID_ARGS"}
ENUM = '["pending","in_progress","completed"]'


def item(content: Any, status: Any = "pending") -> dict[str, Any]:
    return {"content": content, "status": status}


async def call(ctx: Context, arguments: Any, *, agent: bool = True) -> tuple[Any, Session | None]:
    session = ctx.sessions.create(f"s{len(ctx.sessions.list())}") if agent else None
    owner = Agent("agent", session) if session is not None else None
    result = await ctx.tools.execute("todo_write", arguments, agent=owner)
    return result, session


# -- §2.1: argument schema (ToolArgsError) ---------------------------------------------------------------------

SCHEMA_CASES: list[Any] = [
    pytest.param({}, 'missing required property "todos"', id="todos-missing"),
    pytest.param({"todos": None}, '"todos" must be an array', id="todos-null"),
    pytest.param({"todos": "nope"}, '"todos" must be an array', id="todos-string"),
    pytest.param({"todos": {"0": item("a")}}, '"todos" must be an array', id="todos-object"),
    pytest.param([], '"arguments" must be an object', id="root-array"),
    pytest.param(None, '"arguments" must be an object', id="root-null"),
    pytest.param("nope", '"arguments" must be an object', id="root-string"),
    pytest.param(42, '"arguments" must be an object', id="root-number"),
    pytest.param(True, '"arguments" must be an object', id="root-bool"),
    pytest.param('{"todos": [', '"arguments" must be an object', id="unparseable-raw-string"),
    pytest.param({"todos": [None]}, '"todos[0]" must be an object', id="item-null"),
    pytest.param({"todos": [[]]}, '"todos[0]" must be an object', id="item-array"),
    pytest.param({"todos": [item("a"), "b"]}, '"todos[1]" must be an object', id="item-string"),
    pytest.param({"todos": [{}]},
                 'missing required property "todos[0].content"; missing required property "todos[0].status"',
                 id="item-empty"),
    pytest.param({"todos": [{"status": "pending"}]}, 'missing required property "todos[0].content"',
                 id="content-missing"),
    pytest.param({"todos": [{"content": "a"}]}, 'missing required property "todos[0].status"',
                 id="status-missing"),
    pytest.param({"todos": [item("x", "doing")]}, f'"todos[0].status" must be one of {ENUM}', id="status-enum"),
    pytest.param({"todos": [item("x", "PENDING")]}, f'"todos[0].status" must be one of {ENUM}',
                 id="status-enum-case"),
    pytest.param({"todos": [item(1)]}, '"todos[0].content" must be a string', id="content-number"),
    pytest.param({"todos": [item(None)]}, '"todos[0].content" must be a string', id="content-null"),
    pytest.param({"todos": [item(True)]}, '"todos[0].content" must be a string', id="content-bool"),
    pytest.param({"todos": [item("x", 42)]}, '"todos[0].status" must be a string', id="status-number"),
    pytest.param({"todos": [item("x", None)]}, '"todos[0].status" must be a string', id="status-null"),
    pytest.param({"todos": [{"content": "a", "status": "pending", "children": []}]},
                 '"todos[0].children" is not a declared property (additionalProperties: false)', id="undeclared"),
    pytest.param({"todos": [{"status": "bad", "extra": 1, "zeta": 2}, {"content": 5}]},
                 'missing required property "todos[0].content"; '
                 f'"todos[0].status" must be one of {ENUM}; '
                 '"todos[0].extra" is not a declared property (additionalProperties: false); '
                 '"todos[0].zeta" is not a declared property (additionalProperties: false); '
                 'missing required property "todos[1].status"; '
                 '"todos[1].content" must be a string', id="walk-order"),
    pytest.param({"todos": [{"zeta": 1, "content": 2, "alpha": 3, "status": 4}]},
                 '"todos[0].content" must be a string; "todos[0].status" must be a string; '
                 '"todos[0].zeta" is not a declared property (additionalProperties: false); '
                 '"todos[0].alpha" is not a declared property (additionalProperties: false)',
                 id="declared-before-undeclared-in-json-order"),
    pytest.param({"todos": [{"status": 1, "content": 2}]},
                 '"todos[0].content" must be a string; "todos[0].status" must be a string',
                 id="declared-order-not-json-order"),
]


@pytest.mark.parametrize(("arguments", "violations"), SCHEMA_CASES)
async def test_argument_schema_violations(make_ctx: BootFactory, arguments: Any, violations: str) -> None:
    for agent in (True, False):
        result, session = await call(make_ctx(allow_parallel=True), arguments, agent=agent)
        assert result.is_error
        assert result.text == f"Error: invalid arguments: {violations}"
        assert result.content == [{"type": "text", "text": result.text}]
        assert result.error == ARGS_INFO
        assert result.value is None
        assert session is None or session.seq == 0


async def test_schema_errors_come_before_value_rules(make_ctx: BootFactory) -> None:
    result, session = await call(make_ctx(allow_parallel=False),
                                 {"todos": [item("", "in_progress"), item("", "doing")]})
    assert result.text == f'Error: invalid arguments: "todos[1].status" must be one of {ENUM}'
    assert session is not None and session.seq == 0


# -- §2.2: value rules (plain errors: no structured info) ------------------------------------------------------

VALUE_CASES: list[Any] = [
    pytest.param(True, [item("")], "Error: invalid todo: `content` must be a non-empty string", id="empty"),
    pytest.param(True, [item(" \t\n ")], "Error: invalid todo: `content` must be a non-empty string", id="blank"),
    pytest.param(True, [item("a"), item("a", "completed")], 'Error: invalid todos: duplicate content "a"',
                 id="duplicate"),
    pytest.param(True, [item("a"), item(" a ")], 'Error: invalid todos: duplicate content "a"',
                 id="duplicate-after-trim"),
    pytest.param(True, [item('say "hi"'), item('say "hi"')],
                 'Error: invalid todos: duplicate content "say \\"hi\\""', id="duplicate-quoted"),
    pytest.param(False, [item("a", "in_progress"), item("b", "in_progress")],
                 "Error: invalid todos: at most one task may be in_progress (got 2)", id="cap-2"),
    pytest.param(False, [item("a", "in_progress"), item("b", "in_progress"), item("c", "in_progress")],
                 "Error: invalid todos: at most one task may be in_progress (got 3)", id="cap-3"),
    # §13.3: the order in which the value rules are checked.
    pytest.param(False, [item("a", "in_progress"), item("a", "in_progress")],
                 'Error: invalid todos: duplicate content "a"', id="duplicate-before-cap"),
    pytest.param(True, [item(""), item("a"), item("a")],
                 "Error: invalid todo: `content` must be a non-empty string", id="empty-first-wins"),
    pytest.param(True, [item("a"), item("a"), item("")], 'Error: invalid todos: duplicate content "a"',
                 id="duplicate-first-wins"),
    pytest.param(False, [item("a", "in_progress"), item("b", "in_progress"), item("")],
                 "Error: invalid todo: `content` must be a non-empty string", id="empty-before-cap"),
]


@pytest.mark.parametrize(("allow", "todos", "text"), VALUE_CASES)
async def test_value_rule_errors(make_ctx: BootFactory, allow: bool, todos: list[Any], text: str) -> None:
    result, session = await call(make_ctx(allow_parallel=allow), {"todos": todos})
    assert result.is_error
    assert result.text == text
    assert result.error is None
    assert result.value is None
    assert session is not None and session.seq == 0


async def test_duplicates_are_case_sensitive(make_ctx: BootFactory) -> None:
    result, session = await call(make_ctx(allow_parallel=True), {"todos": [item("a"), item("A")]})
    assert not result.is_error
    assert session is not None
    assert todo_writes(session) == [[item("a"), item("A")]]


# -- §2.3 / §13.3: the owner check comes after list validation ---------------------------------------------------

async def test_no_agent_reports_the_owner_error(make_ctx: BootFactory) -> None:
    result, _ = await call(make_ctx(allow_parallel=True), {"todos": [item("a")]}, agent=False)
    assert result.text == "Error: todo_write requires an owning agent session"
    assert result.error is None


@pytest.mark.parametrize(("allow", "todos", "text"), [
    pytest.param(True, [item("  ")], "Error: invalid todo: `content` must be a non-empty string", id="empty"),
    pytest.param(True, [item("a"), item("a")], 'Error: invalid todos: duplicate content "a"', id="duplicate"),
    pytest.param(False, [item("a", "in_progress"), item("b", "in_progress")],
                 "Error: invalid todos: at most one task may be in_progress (got 2)", id="cap"),
])
async def test_no_agent_still_reports_the_list_error_first(make_ctx: BootFactory, allow: bool,
                                                          todos: list[Any], text: str) -> None:
    result, _ = await call(make_ctx(allow_parallel=allow), {"todos": todos}, agent=False)
    assert result.text == text


async def test_empty_list_is_valid_and_clears(make_ctx: BootFactory) -> None:
    result, session = await call(make_ctx(allow_parallel=True), {"todos": []})
    assert not result.is_error
    assert result.text == "Updated todo list: 0 pending, 0 in progress, 0 completed."
    assert result.value == {"todos": [], "counts": {"pending": 0, "inProgress": 0, "completed": 0}}
    assert session is not None and todo_writes(session) == [[]]


async def test_identical_lists_still_append(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    agent = Agent("a", ctx.sessions.create("a"))
    for _ in range(2):
        result = await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=agent)
        assert not result.is_error
    assert todo_writes(agent.session) == [[item("a")], [item("a")]]


async def test_counts_wording_never_switches_to_singular(make_ctx: BootFactory) -> None:
    todos = [item("a", "pending"), item("b", "in_progress"), item("c", "completed")]
    result, _ = await call(make_ctx(allow_parallel=True), {"todos": todos})
    assert result.text == "Updated todo list: 1 pending, 1 in progress, 1 completed."


async def test_logged_items_have_exactly_content_then_status(make_ctx: BootFactory) -> None:
    result, session = await call(make_ctx(allow_parallel=True), {"todos": [{"status": "pending", "content": " x "}]})
    assert not result.is_error
    assert session is not None
    logged = session.events[-1]["data"]["todos"][0]
    assert list(logged) == ["content", "status"]
    assert list(result.value["todos"][0]) == ["content", "status"]


# -- §13.1: JavaScript's trim, not str.strip ----------------------------------------------------------------------

JS_TRIMMED = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
              "\u2028\u2029\u202f\u205f\u3000\ufeff")
KEPT = ("\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u180e", "\u200b")


@pytest.mark.parametrize("char", list(JS_TRIMMED), ids=lambda c: f"U+{ord(c):04X}")
async def test_javascript_whitespace_is_trimmed(make_ctx: BootFactory, char: str) -> None:
    result, session = await call(make_ctx(allow_parallel=True), {"todos": [item(f"{char}x{char}")]})
    assert not result.is_error
    assert session is not None and todo_writes(session) == [[item("x")]]
    only, _ = await call(make_ctx(allow_parallel=True), {"todos": [item(char * 3)]})
    assert only.text == "Error: invalid todo: `content` must be a non-empty string"


@pytest.mark.parametrize("char", KEPT, ids=lambda c: f"U+{ord(c):04X}")
async def test_characters_python_strips_but_javascript_keeps(make_ctx: BootFactory, char: str) -> None:
    result, session = await call(make_ctx(allow_parallel=True), {"todos": [item(f" {char}x{char} ")]})
    assert not result.is_error
    assert session is not None and todo_writes(session) == [[item(f"{char}x{char}")]]
    alone, session = await call(make_ctx(allow_parallel=True), {"todos": [item(char)]})
    assert not alone.is_error
    assert session is not None and todo_writes(session) == [[item(char)]]


async def test_bom_trimmed_and_nel_kept_in_one_list(make_ctx: BootFactory) -> None:
    todos = [item("\ufeffbom\ufeff"), item("\u0085nel"), item("\x1cfs")]
    result, session = await call(make_ctx(allow_parallel=True), {"todos": todos})
    assert not result.is_error
    assert session is not None
    assert todo_writes(session) == [[item("bom"), item("\u0085nel"), item("\x1cfs")]]


# -- §13.2: JSON.stringify quoting in messages ---------------------------------------------------------------------

@pytest.mark.parametrize(("content", "quoted"), [
    pytest.param("a", '"a"', id="plain"),
    pytest.param('say "hi"', '"say \\"hi\\""', id="quotes"),
    pytest.param("back\\slash", '"back\\\\slash"', id="backslash"),
    pytest.param("a\nb", '"a\\nb"', id="newline"),
    pytest.param("tab\there", '"tab\\there"', id="tab"),
    pytest.param("nul \x00 in", '"nul \\u0000 in"', id="nul"),
    pytest.param("ctl \x01\x1f", '"ctl \\u0001\\u001f"', id="controls"),
    pytest.param("del \x7f", '"del \x7f"', id="del-raw"),
    pytest.param("中文任务", '"中文任务"', id="non-ascii-raw"),
    pytest.param("a\u2028b\u2029c", '"a\u2028b\u2029c"', id="line-separators-raw"),
    pytest.param("lone \ud800 high", '"lone \\ud800 high"', id="lone-high-surrogate"),
    pytest.param("lone \udfff low", '"lone \\udfff low"', id="lone-low-surrogate"),
    pytest.param("emoji 😀", '"emoji 😀"', id="astral-raw"),
    pytest.param("'single' `back` $d", '"\'single\' `back` $d"', id="other-quotes"),
])
async def test_duplicate_message_uses_json_stringify(make_ctx: BootFactory, content: str, quoted: str) -> None:
    result, _ = await call(make_ctx(allow_parallel=True), {"todos": [item(content), item(f" {content}\n")]})
    assert result.text == f"Error: invalid todos: duplicate content {quoted}"


# -- §13.4: the root object is open --------------------------------------------------------------------------------

async def test_extra_top_level_keys_are_accepted_and_ignored(make_ctx: BootFactory) -> None:
    todos = [item("a"), item("b", "in_progress")]
    result, session = await call(make_ctx(allow_parallel=True), {"todos": todos, "foo": 1, "todo": [None]})
    assert not result.is_error
    assert result.value == {"todos": todos, "counts": {"pending": 1, "inProgress": 1, "completed": 0}}
    assert session is not None
    assert [event["data"] for event in session.events] == [{"todos": todos}]


# -- lossless snapshot of the arguments ----------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [-0.0, float("inf"), float("nan")], ids=["negative-zero", "inf", "nan"])
async def test_numbers_json_cannot_carry_are_refused_first(make_ctx: BootFactory, bad: float) -> None:
    result, session = await call(make_ctx(allow_parallel=True), {"todos": [item("")], "x": bad})
    assert result.text == "Error: tool execution arguments must be losslessly JSON-serializable"
    assert result.error is None
    assert session is not None and session.seq == 0


async def test_the_callers_arguments_are_left_untouched(make_ctx: BootFactory) -> None:
    args = {"todos": [{"content": " a ", "status": "pending"}], "extra": [1]}
    result, _ = await call(make_ctx(allow_parallel=True), args)
    assert not result.is_error
    assert args == {"todos": [{"content": " a ", "status": "pending"}], "extra": [1]}


# -- §1.4 cancellation ---------------------------------------------------------------------------------------------

async def test_abort_before_dispatch_writes_nothing(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    signal = AbortSignal()
    signal.abort("user")
    result = await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=Agent("a", session),
                                     signal=signal)
    assert result.is_error
    assert result.text == "Error: tool call aborted before dispatch"
    assert result.error == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    assert result.value is None
    assert session.seq == 0


async def test_abort_after_the_body_keeps_the_logged_write(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    signal = AbortSignal()

    def abort_on_write(_s: Session, event: Event) -> None:
        if event["type"] == "todo/write":
            signal.abort("user")

    ctx.sessions.listen(abort_on_write)
    result = await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=Agent("a", session),
                                     signal=signal)
    assert result.is_error
    assert result.text == "Error: tool call aborted"
    assert result.error == {"name": "AbortError", "code": "ABORTED"}
    assert result.value is None
    # §13.5: the log already holds the write, and the projection follows the log.
    assert todo_writes(session) == [[item("a")]]
    assert ctx.session_projections.snapshot(session)["values"]["todos"] == [item("a")]


async def test_an_unaborted_signal_changes_nothing(make_ctx: BootFactory) -> None:
    ctx = make_ctx(allow_parallel=True)
    session = ctx.sessions.create("s")
    result = await ctx.tools.execute("todo_write", {"todos": [item("a")]}, agent=Agent("a", session),
                                     signal=AbortSignal())
    assert not result.is_error
    assert session.seq == 1
