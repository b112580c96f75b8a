// A session as a row of the list and a card of the board: title, project, last write, standing plan, state.
// Everything here comes from `session.list` rows and push frames; model-written text (titles, tasks, ids, paths)
// goes in through el() as text only.

import { el, statusGlyph } from './dom.js';
import { locale } from './i18n.js';
import { openCount } from './plan.js';

export const STATES = ['live', 'ended', 'interrupted', 'aborted', 'error', 'refused', 'idle'];
const ACTIVE_SHOWN = 3;
const KNOWN_STATUSES = new Set(['completed', 'in_progress', 'pending']);
// Each agent's name as its users know it (the badge); an agent not listed here shows its own name.
export const AGENT_NAMES = { claude: 'Claude Code', codex: 'Codex', gemini: 'Gemini CLI', opencode: 'opencode' };
const STOPPED_STATES = new Set(['ended', 'interrupted', 'aborted', 'error']);

function projectName(cwd) {
  if (typeof cwd !== 'string' || cwd === '') return '';
  const parts = cwd.split(/[\\/]+/).filter((part) => part !== '');
  return parts.length ? parts[parts.length - 1] : cwd;
}

// The row a `session.list` answer carries, as the page reads it (unknown or missing fields degrade, never throw).
export function rowModel(row) {
  const id = String(row.sessionId);
  const title = typeof row.title === 'string' && row.title !== '' ? row.title : null;
  const block = row.projections && typeof row.projections === 'object' ? row.projections : null;
  const values = block && block.values && typeof block.values === 'object' ? block.values : null;
  const todos = values && Array.isArray(values.todos) ? values.todos.filter((item) => item && typeof item === 'object') : null;
  let state = typeof row.state === 'string' && STATES.includes(row.state) ? row.state : null;
  if (state === null) state = row.error ? 'refused' : row.live ? 'live' : 'idle';
  const at = Number.isInteger(row.lastEventAt) ? row.lastEventAt : Number.isInteger(row.createdAt) ? row.createdAt : null;
  const done = todos ? todos.filter((item) => item.status === 'completed').length : 0;
  const active = todos ? todos.filter((item) => item.status === 'in_progress')
    .map((item) => (typeof item.content === 'string' ? item.content : '')) : [];
  return {
    id, title, label: title ?? id, cwd: typeof row.cwd === 'string' ? row.cwd : '', project: projectName(row.cwd),
    at, state, turnEnd: typeof row.turnEnd === 'string' ? row.turnEnd : null,
    reason: row.error && typeof row.error.message === 'string' ? row.error.message : null,
    todos, done, total: todos ? todos.length : 0, active,
    agent: typeof row.agent === 'string' && row.agent !== '' ? row.agent : null,
    parentId: typeof row.parentId === 'string' && row.parentId !== '' ? row.parentId : null,
    turnOpen: typeof row.turnOpen === 'boolean' ? row.turnOpen : null,
    waiting: row.waiting === true,
    open: openCount(todos),
  };
}

// What a session needs of the person, if anything: it stopped with items open (its last turn ended, its plan did
// not), it waits on them (an approval or a question its log records), or it has had an item in progress and no
// write for longer than `idleAfterMs`. `{stopped, waiting, idleMinutes}`, each 0/false when not so.
export function needsOf(model, idleAfterMs, now = Date.now()) {
  const ended = model.agent !== null ? model.turnOpen === false : STOPPED_STATES.has(model.state);
  const stopped = ended && model.open > 0 ? model.open : 0;
  const waiting = model.waiting && !ended;
  let idleMinutes = 0;
  if (!stopped && !waiting && model.active.length > 0 && model.at !== null && Number.isFinite(idleAfterMs)
      && now - model.at > idleAfterMs) {
    idleMinutes = Math.floor((now - model.at) / 60000);
  }
  return { stopped, waiting, idleMinutes };
}

export function needsMe(needs) {
  return needs.stopped > 0 || needs.waiting || needs.idleMinutes > 0;
}

function needsBadges(needs, t) {
  const badges = [];
  if (needs.waiting) badges.push(el('span', { class: 'needs needs-waiting', 'data-testid': 'needs', 'data-needs': 'waiting' }, t('needs.waiting')));
  if (needs.stopped > 0) {
    badges.push(el('span', { class: 'needs needs-stopped', 'data-testid': 'needs', 'data-needs': 'stopped' },
      t('needs.stopped', { count: needs.stopped })));
  }
  if (needs.idleMinutes > 0) {
    badges.push(el('span', { class: 'needs needs-idle', 'data-testid': 'needs', 'data-needs': 'idle' },
      t('needs.idle', { minutes: needs.idleMinutes })));
  }
  return badges.length ? el('div', { class: 'card-needs' }, ...badges) : null;
}

export function agentBadge(model) {
  if (model.agent === null) return null;
  return el('span', { class: `agent agent-${model.agent}`, 'data-testid': 'card-agent', 'data-agent': model.agent },
    AGENT_NAMES[model.agent] ?? model.agent);
}

// A whole plan, each status as written: ours with their glyphs, any other (e.g. cancelled) with a neutral mark and
// its own word.
export function planList(todos) {
  return el('ul', { class: 'card-plan', 'data-testid': 'card-plan' }, ...(todos ?? []).map((item) => {
    const status = typeof item.status === 'string' ? item.status : String(item.status);
    const content = typeof item.content === 'string' ? item.content : '';
    const known = KNOWN_STATUSES.has(status);
    return el('li', { 'data-status': status, class: known ? 'plan-item' : 'plan-item status-other' },
      el('span', { class: 'glyph-cell' }, known ? statusGlyph(status) : el('span', { class: 'glyph glyph-other', 'aria-hidden': 'true' })),
      el('span', { class: 'card-task', 'data-testid': 'plan-content', title: content }, content),
      known ? null : el('span', { class: 'status-word', 'data-testid': 'plan-status' }, status));
  }));
}

// "3 min ago" in the page's language; the exact time goes in the element's title.
export function relativeTime(ms, now = Date.now()) {
  const seconds = Math.round((ms - now) / 1000);
  const format = new Intl.RelativeTimeFormat(locale() === 'zh' ? 'zh-CN' : 'en', { numeric: 'auto' });
  const units = [['year', 31536000], ['month', 2592000], ['week', 604800], ['day', 86400], ['hour', 3600],
    ['minute', 60]];
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size) return format.format(Math.trunc(seconds / size), unit);
  }
  return format.format(Math.abs(seconds) < 10 ? 0 : seconds, 'second');
}

export function exactTime(ms) {
  return new Date(ms).toLocaleString(locale() === 'zh' ? 'zh-CN' : 'en');
}

function timeNode(model) {
  if (model.at === null) return null;
  return el('time', {
    class: 'when', 'data-testid': 'row-time', datetime: new Date(model.at).toISOString(), title: exactTime(model.at),
  }, relativeTime(model.at));
}

export function stateBadge(model, t) {
  const label = t(`state.${model.state}`);
  const detail = model.state === 'ended' && model.turnEnd && model.turnEnd !== 'completed' ? ` (${model.turnEnd})` : '';
  return el('span', {
    class: `state state-${model.state}`, 'data-testid': 'row-state', 'data-state': model.state,
    title: model.reason ?? (label + detail),
  }, label);
}

function progressBar(model, t) {
  const fill = el('span', { class: 'bar-fill' });
  fill.style.width = model.total ? `${(100 * model.done) / model.total}%` : '0%';
  return el('span', { class: 'plan-progress' },
    el('span', {
      class: 'bar', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': String(model.total),
      'aria-valuenow': String(model.done), 'aria-label': t('todo.title'),
    }, fill),
    el('span', { class: 'plan-count', 'data-testid': 'plan-count' }, `${model.done}/${model.total}`));
}

// One line of the sidebar list: title and state, project and time, the plan's bar with its first active task.
export function listRow(model, t, { current, onOpen, href }) {
  const meta = el('span', { class: 'srow-meta' },
    model.project ? el('span', { class: 'project', 'data-testid': 'row-project', title: model.cwd }, model.project) : null,
    timeNode(model));
  let plan = null;
  if (model.state === 'refused') {
    plan = el('span', { class: 'srow-reason', 'data-testid': 'row-reason', title: model.reason ?? '' }, model.reason ?? '');
  } else if (model.total > 0) {
    const first = model.active.find((text) => text.trim() !== '');
    plan = el('span', { class: 'srow-plan' }, progressBar(model, t),
      first !== undefined ? el('span', { class: 'srow-active', 'data-testid': 'row-active', title: first }, first) : null,
      model.active.length > 1 ? el('span', { class: 'more', 'data-testid': 'row-more' }, `+${model.active.length - 1}`) : null);
  }
  const link = el('a', {
    class: 'srow', href, 'data-session-id': model.id, 'data-state': model.state,
    'aria-current': current ? 'page' : null, onclick: onOpen,
  },
  el('span', { class: 'srow-head' },
    el('span', { class: 'srow-title', 'data-testid': 'row-title', title: model.label }, model.label),
    agentBadge(model), stateBadge(model, t)),
  meta, plan);
  return el('li', null, link);
}

// One card of the board: the same facts, with every active task (another agent's card: its whole plan), what the
// session needs of the person, and its subagents' cards folded under it.
export function boardCard(model, t, { onOpen, href, needs, children = [], childOpen = 0, expanded = false,
  onToggle = null, childCard = null }) {
  const body = [];
  if (model.state === 'refused') {
    body.push(el('p', { class: 'card-reason', 'data-testid': 'card-reason' }, model.reason ?? ''));
  } else if (model.todos === null || model.total === 0) {
    body.push(el('p', { class: 'card-empty' }, t('board.noPlan')));
  } else if (model.agent !== null) {
    body.push(progressBar(model, t), planList(model.todos));
  } else {
    body.push(progressBar(model, t));
    const shown = model.active.slice(0, ACTIVE_SHOWN);
    if (shown.length) {
      body.push(el('ul', { class: 'card-active', 'data-testid': 'card-active' }, ...shown.map((text) => el('li', null,
        el('span', { class: 'glyph-cell' }, statusGlyph('in_progress')),
        el('span', { class: 'card-task', title: text }, text)))));
      if (model.active.length > ACTIVE_SHOWN) {
        body.push(el('p', { class: 'card-more' }, t('board.moreActive', { count: model.active.length - ACTIVE_SHOWN })));
      }
    } else {
      body.push(el('p', { class: 'card-empty' }, t(model.done === model.total ? 'board.allDone' : 'board.noneActive')));
    }
  }
  let nested = null;
  if (children.length) {
    const details = el('details', { class: 'card-children', 'data-testid': 'card-children' },
      el('summary', null, t('board.children', { count: children.length }),
        childOpen > 0 ? [' · ', el('span', { 'data-testid': 'card-children-open' }, t('board.childrenOpen', { open: childOpen }))] : null),
      ...children.map((child) => childCard(child)));
    if (expanded) details.setAttribute('open', '');
    if (onToggle) details.addEventListener('toggle', () => onToggle(details.open));
    nested = details;
  }
  return el('article', {
    class: 'card', 'data-session-id': model.id, 'data-state': model.state, 'data-testid': 'card',
    'data-agent': model.agent ?? 'dsh', 'data-needs': needs && needsMe(needs) ? 'yes' : null,
  },
  el('header', { class: 'card-head' },
    el('a', { class: model.title === null ? 'card-title untitled' : 'card-title', href, onclick: onOpen, 'data-testid': 'card-title', title: model.label }, model.label),
    agentBadge(model),
    stateBadge(model, t)),
  el('div', { class: 'card-meta' },
    model.project ? el('span', { class: 'project', title: model.cwd }, model.project) : null, timeNode(model)),
  needs ? needsBadges(needs, t) : null,
  ...body, nested);
}

// A subagent under its parent's card: its title, state, what it needs, and its whole plan.
export function childBlock(model, t, { onOpen, href, needs }) {
  return el('div', { class: 'child', 'data-testid': 'child', 'data-session-id': model.id, 'data-state': model.state },
    el('div', { class: 'card-head' },
      el('a', { class: 'card-title', href, onclick: onOpen, title: model.label }, model.label),
      agentBadge(model), stateBadge(model, t)),
    needs ? needsBadges(needs, t) : null,
    model.todos && model.total ? planList(model.todos) : el('p', { class: 'card-empty' }, t('board.noPlan')));
}

// What the board's search matches: the title, the id, the project and every task's text.
export function searchText(model) {
  const parts = [model.label, model.id, model.cwd];
  for (const item of model.todos ?? []) if (typeof item.content === 'string') parts.push(item.content);
  return parts.join('\n').toLocaleLowerCase();
}
