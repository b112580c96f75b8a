"""The terminal view: counts in the strip's order, one-line deltas, and model text that cannot drive the terminal."""

from __future__ import annotations

from dsh_todo.carriers.terminal import plan_delta, plan_lines, progress_label, safe


def test_progress_label_order_and_zero_counts() -> None:
    plan = [{"content": "a", "status": "pending"}, {"content": "b", "status": "completed"},
            {"content": "c", "status": "in_progress"}, {"content": "d", "status": "in_progress"}]
    assert progress_label(plan) == "1 completed · 2 in progress · 1 pending"
    assert progress_label([{"content": "x", "status": "completed"}]) == "1 completed"


def test_plan_delta_names_every_active_task() -> None:
    plan = [{"content": "build", "status": "in_progress"}, {"content": "docs", "status": "in_progress"}]
    assert plan_delta(plan) == "plan: 2 in progress | now: build; docs"
    assert plan_delta(None) == "plan: none"
    assert plan_delta([]) == "plan: empty"


def test_escape_sequences_in_todos_are_shown_not_obeyed() -> None:
    hostile = "\x1b]0;owned\x07\x1b[2Jgone\nnext\u2028line"
    lines = plan_lines([{"content": hostile, "status": "pending"}])
    assert lines[1] == "  [ ] \\x1b]0;owned\\x07\\x1b[2Jgone\\x0anext\\u2028line"
    assert all("\x1b" not in line and "\n" not in line for line in lines)
    assert safe("plain text · 中文") == "plain text · 中文"


def test_lone_surrogates_and_bidi_controls_are_printed_escaped() -> None:
    """Repro: ``todo_write`` accepts ``"\\ud800"`` (a valid JSON escape, as in the reference), and ``dsh-todo plan``,
    ``watch`` and the demo's view then died with ``UnicodeEncodeError`` writing it to a UTF-8 terminal. Bidi
    overrides would silently reorder what a person reads."""
    plan = [{"content": "fix \ud800 now", "status": "in_progress"},
            {"content": "evil\u202etxt.exe", "status": "pending"}]
    lines = plan_lines(plan)
    assert lines[1:] == ["  [>] fix \\ud800 now", "  [ ] evil\\u202etxt.exe"]
    assert plan_delta(plan) == "plan: 1 in progress · 1 pending | now: fix \\ud800 now"
    for line in [*lines, plan_delta(plan)]:
        line.encode("utf-8")  # never raises
