"""The client's pure rules, run in Chromium: the projection store (SPEC §6.3) and the plan/row texts (SPEC §9)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.carriers.web.conftest import Web


@pytest.fixture
def page(web: Web, new_page: Any) -> Any:
    page = new_page("en-US")
    page.goto(web.url("/"))
    page.wait_for_selector("body[data-history=loaded]")
    return page


def run(page: Any, module: str, body: str) -> Any:
    """Evaluate ``body`` (an async function of the imported module ``m``)."""
    return page.evaluate(f"async () => {{ const m = await import('/static/{module}'); return ({body})(m); }}")


def test_frames_apply_only_when_their_seq_is_higher(page: Any) -> None:
    result = run(page, "store.js", """m => {
      const s = new m.ProjectionStore(); const out = [];
      out.push(s.get('todos') === undefined);                 // capability absent
      out.push(s.applyFrame('todos', [{content: 'a', status: 'pending'}], 5));
      out.push(s.applyFrame('todos', null, 5));                // same seq: ignored
      out.push(s.applyFrame('todos', null, 4));                // older: ignored
      out.push(JSON.stringify(s.get('todos')));
      out.push(s.applyFrame('todos', null, 6));                // newer: applied, null = no standing plan
      out.push(s.get('todos'));
      out.push(s.applyFrame('', 1, 9), s.applyFrame('todos', 1, -1), s.applyFrame('todos', 1, 1.5));
      return out;
    }""")
    assert result == [True, True, False, False, '[{"content":"a","status":"pending"}]', True, None, False, False,
                      False]


def test_a_baseline_seeds_its_keys_and_deletes_only_older_rows_it_lacks(page: Any) -> None:
    result = run(page, "store.js", """m => {
      const s = new m.ProjectionStore();
      s.applyFrame('todos', 'frame@12', 12);     // newer than the baseline below: survives
      s.applyFrame('goal', 'goal@3', 3);         // older and absent from the baseline: deleted
      s.applyFrame('queue', 'queue@20', 20);     // newer and absent: kept
      const seen = [];
      s.subscribe(keys => seen.push(keys.slice().sort().join(',')));
      s.seedBaseline({asOfSeq: 10, values: {todos: 'base@10', extra: 'x'}});
      const after = [s.get('todos'), s.seqOf('todos'), s.get('goal'), s.get('queue'), s.get('extra'), s.seqOf('extra')];
      s.seedBaseline({asOfSeq: 15, values: {todos: 'base@15'}});
      const later = [s.get('todos'), s.seqOf('todos'), s.get('extra'), s.get('queue')];
      s.dropAfter(15);                            // session/subscribed with lastSeq 15: rows beyond it go
      return {after, later, dropped: [s.get('queue'), s.get('todos')], seen};
    }""")
    assert result["after"] == ["frame@12", 12, None, "queue@20", "x", 10]
    assert result["later"] == ["base@15", 15, None, "queue@20"]
    assert result["dropped"] == [None, "base@15"]
    assert result["seen"] == ["extra,goal", "extra,todos", "queue"]


def test_plan_summary_matches_the_reference_cases(page: Any) -> None:
    result = run(page, "plan.js", """m => {
      const L = [{content: '搭骨架', status: 'completed'}, {content: '写组件', status: 'in_progress'},
                 {content: '补测试', status: 'pending'}];
      const five = [L[0], L[1], {content: '读源码', status: 'in_progress'},
                    {content: '跑后台构建', status: 'in_progress'}, L[2]];
      return [
        m.planSummary(L), m.planSummary(five), m.planSummary([{content: '都完了', status: 'completed'}]),
        m.planSummary([{status: 'in_progress'}, {content: 'x', status: 'in_progress'}]),
        m.planSummary([{content: 42, status: 'in_progress'}]),
        m.planSummary([{content: '', status: 'in_progress'}]),
        m.planSummary([{content: '   ', status: 'in_progress'}, {content: 'y', status: 'in_progress'}]),
        m.planSummary([{content: '  padded  ', status: 'in_progress'}]),
        m.planSummary([]),
      ];
    }""")
    none = {"activeContent": None, "activeExtra": 0}
    assert result == [
        {"done": 1, "total": 3, "activeContent": "写组件", "activeExtra": 0},
        {"done": 1, "total": 5, "activeContent": "写组件", "activeExtra": 2},
        {"done": 1, "total": 1, **none},
        {"done": 0, "total": 2, **none},
        {"done": 0, "total": 1, **none},
        {"done": 0, "total": 1, **none},
        {"done": 0, "total": 2, **none},
        {"done": 0, "total": 1, "activeContent": "  padded  ", "activeExtra": 0},
        {"done": 0, "total": 0, **none},
    ]


def test_row_texts_and_generic_fallbacks(page: Any) -> None:
    result = run(page, "plan.js", """m => {
      const labels = {'todo.rowTitle': 'Update to-do list', 'todo.completed': '{done}/{total} completed'};
      const t = (key, vars) => labels[key].replace(/\\{(\\w+)\\}/g, (_, k) => String(vars[k]));
      const row = (argsRaw, result = {text: 'ok', isError: false, code: null}, callId = 'c1') =>
        m.rowText({callId, name: 'todo_write', argsRaw, result}, t);
      return [
        row('{"todos":[{"content":"a","status":"completed"},{"content":" b ","status":"in_progress"},'
            + '{"content":"c","status":"in_progress"}]}'),
        row('not json'), row('{"other":1}'), row('null'), row('42'), row('{"todos":[null]}'), row('{"todos":[[]]}'),
        row('', {text: 'x', isError: false, code: null}),
        row('\\n{"k":"first string"}'),
        row('{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}',
            {text: 'Error: invalid todos: duplicate content "a"\\nmore', isError: true, code: null}),
        row('not json', {text: '', isError: true, code: null}),
        row('{"todos":[]}', {text: 'Error: tool call aborted', isError: true, code: 'ABORTED'}),
        row('{"todos":[]}', null),
      ].map(r => [r.state, r.title, r.summary, r.suffix]);
    }""")
    title = "Update to-do list"
    assert result == [
        ["ok", title, "1/3 completed ·  b ", "+1"],
        ["ok", title, "todo_write · not json", None],
        ["ok", title, 'todo_write · {"other":1}', None],
        ["ok", title, "todo_write · null", None],
        ["ok", title, "todo_write · 42", None],
        ["ok", title, 'todo_write · {"todos":[null]}', None],
        ["ok", title, "0/1 completed", None],  # an array item counts as an object here
        ["ok", title, "todo_write · c1", None],
        ["ok", title, "todo_write · first string", None],
        ["error", title, 'Error: invalid todos: duplicate content "a"', None],
        ["error", title, "todo_write · not json", None],
        ["stopped", title, "Error: tool call aborted", None],
        ["running", title, "0/0 completed", None],
    ]


def test_strip_labels_join_with_en_spaces_and_skip_zero_counts(page: Any) -> None:
    result = run(page, "plan.js", """m => {
      const en = {'todo.progress.done': '{done} completed', 'todo.progress.active': '{active} in progress',
                  'todo.progress.pending': '{pending} pending'};
      const t = (key, vars) => en[key].replace(/\\{(\\w+)\\}/g, (_, k) => String(vars[k]));
      const item = status => ({content: status + Math.random(), status});
      return [
        m.progressLabel([item('completed'), item('in_progress'), item('in_progress'), item('pending')], t),
        m.progressLabel([item('in_progress'), item('pending')], t),
        m.progressLabel([item('completed')], t),
        m.progressLabel([item('pending'), item('pending')], t),
      ];
    }""")
    assert result == ["1 completed\u2002·\u20022 in progress\u2002·\u20021 pending",
                      "1 in progress\u2002·\u20021 pending", "1 completed", "2 pending"]
