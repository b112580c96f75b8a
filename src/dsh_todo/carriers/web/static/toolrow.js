// One tool call in the conversation (SPEC §9.2). For todo_write: the title, `{done}/{total} completed · <first
// active task>`, and a separate `+N` suffix that never shrinks, so the summary's ellipsis can never clip it. The row is
// a toggle: expanded, it shows the arguments (IN) and the result text (OUT). The durable list is the strip's job.
//
// A plan write (DSH's todo_write, or another agent's plan tool, whose page shows its writes as such rows) shows what
// it changed: the list it left (`call.after`, from the `todo/write` that followed the call) as a diff against the
// previous write (`call.before`), with the raw arguments and result behind "Inspect".

import { checklistIcon, el, stateDot, statusGlyph } from './dom.js';
import { planDiff, planSummary, prettyArgs, rowText, ROW_SEPARATOR } from './plan.js';

const DIFF_MARK = { added: '+', removed: '\u2212', status: '\u2192', same: '' };

// A status glyph that does not spin: a conversation may hold many old writes, and only the strip is "now".
function stillGlyph(status) {
  const glyph = statusGlyph(status);
  const known = ['completed', 'in_progress', 'pending'].includes(status);
  glyph.setAttribute('class', `glyph diff-glyph diff-glyph-${known ? status : 'other'}`);
  return glyph;
}

function diffList(before, after, t) {
  return el('ol', { class: 'plan-diff', 'data-testid': 'plan-diff' }, ...planDiff(before, after).map((line) => {
    const status = typeof line.status === 'string' ? line.status : '';
    const content = typeof line.content === 'string' ? line.content : '';
    return el('li', { class: `diff-${line.kind}`, 'data-change': line.kind, 'data-to': status },
      el('span', { class: 'diff-mark', 'aria-hidden': 'true' }, DIFF_MARK[line.kind]),
      el('span', { class: 'glyph-cell' }, stillGlyph(status)),
      el('span', { class: 'diff-content' }, content),
      line.kind === 'status' ? el('span', { class: 'diff-status', 'data-testid': 'diff-status' },
        t('diff.status', { from: String(line.from), to: status })) : null,
      line.kind === 'added' ? el('span', { class: 'visually-hidden' }, t('diff.added')) : null,
      line.kind === 'removed' ? el('span', { class: 'visually-hidden' }, t('diff.removed')) : null);
  }));
}

const STATUS_KEY = { running: 'tool.running', error: 'tool.failed', stopped: 'tool.stopped' };

export class ToolRow {
  // `expandedIds` (a Set shared by the session's rows) keeps a row open across re-renders of the conversation.
  constructor(call, t, expandedIds = new Set()) {
    this.call = call; // {callId, name, argsRaw, result: null | {text, isError, code}}
    this.t = t;
    this.expandedIds = expandedIds;
    this.expanded = expandedIds.has(call.callId);
    this.node = el('div', { class: 'tool-row' });
    this.render();
  }

  toggle() {
    this.expanded = !this.expanded;
    if (this.expanded) this.expandedIds.add(this.call.callId);
    else this.expandedIds.delete(this.call.callId);
    this.render();
  }

  render() {
    const { call, t } = this;
    const view = rowText(call, t);
    const plan = Array.isArray(call.after) && view.state === 'ok' ? call.after : null;
    if (plan !== null && call.name !== 'todo_write') { // another agent's plan tool: its name, the list it left
      const summary = planSummary(plan);
      view.summary = t('todo.completed', { done: summary.done, total: summary.total });
      view.count = null;
      if (summary.activeContent !== null) {
        view.count = view.summary + ROW_SEPARATOR;
        view.summary += ROW_SEPARATOR + summary.activeContent;
      }
      view.suffix = summary.activeExtra > 0 ? `+${summary.activeExtra}` : null;
    }
    const node = this.node;
    node.setAttribute('data-tool', call.name || '');
    node.setAttribute('data-state', view.state);
    node.setAttribute('data-call-id', call.callId || '');
    const icon = view.state === 'error' || view.state === 'stopped' ? stateDot(view.state) : checklistIcon('icon tool-icon');
    const head = el('div', {
      class: 'tool-head', role: 'button', tabindex: '0', 'aria-expanded': String(this.expanded),
      'data-testid': 'tool-head',
      onclick: () => this.toggle(),
      onkeydown: (event) => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          this.toggle();
        }
      },
    },
    icon,
    el('span', { class: 'tool-title', 'data-testid': 'tool-title' }, view.title),
    el('span', { class: 'tool-sep', 'aria-hidden': 'true' }, '·'),
    el('span', { class: 'tool-summary', 'data-testid': 'tool-summary', title: view.summary },
      view.count !== null && view.summary.length > view.count.length
        ? [el('span', { class: 'tool-count' }, view.count),
          el('span', { class: 'tool-rest' }, view.summary.slice(view.count.length))]
        : view.summary),
    view.suffix !== null ? el('span', { class: 'tool-suffix', 'data-testid': 'tool-suffix' }, view.suffix) : null,
    Object.hasOwn(STATUS_KEY, view.state) ? el('span', { class: 'visually-hidden' }, t(STATUS_KEY[view.state])) : null);
    const parts = [head];
    if (plan !== null) {
      parts.push(diffList(call.before, plan, t), el('button', {
        type: 'button', class: 'tool-inspect', 'data-testid': 'tool-inspect', 'aria-expanded': String(this.expanded),
        onclick: () => this.toggle(),
      }, t('tool.inspect')));
    }
    if (this.expanded) {
      const body = el('div', { class: 'tool-body', 'data-testid': 'tool-body' },
        el('div', { class: 'io-label' }, t('tool.in')),
        el('pre', { class: 'io', 'data-testid': 'tool-in' }, prettyArgs(call.argsRaw)));
      if (call.result) {
        body.append(el('div', { class: 'io-label' }, t('tool.out')),
          el('pre', { class: 'io', 'data-testid': 'tool-out' }, call.result.text));
      }
      parts.push(body);
    }
    const hadFocus = node.contains(document.activeElement);
    node.replaceChildren(...parts);
    if (hadFocus) head.focus();
  }
}
