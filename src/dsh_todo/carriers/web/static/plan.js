// Pure presentation rules for plans and todo_write rows (SPEC §9.1, §9.2). No DOM here: strings in, strings out.

export const STATUSES = ['completed', 'in_progress', 'pending'];

// Separators are interface facts (SPEC §13.15): the strip joins with U+2002 · U+2002, the row with plain spaces.
export const STRIP_SEPARATOR = '\u2002·\u2002';
export const ROW_SEPARATOR = ' · ';

export function progressCounts(todos) {
  let done = 0;
  let active = 0;
  for (const item of todos) {
    if (item && item.status === 'completed') done += 1;
    else if (item && item.status === 'in_progress') active += 1;
  }
  return { done, active, pending: todos.length - done - active };
}

// The strip header: completed, in progress, pending; zero counts left out.
export function progressLabel(todos, t) {
  const { done, active, pending } = progressCounts(todos);
  const parts = [];
  if (done > 0) parts.push(t('todo.progress.done', { done }));
  if (active > 0) parts.push(t('todo.progress.active', { active }));
  if (pending > 0) parts.push(t('todo.progress.pending', { pending }));
  return parts.join(STRIP_SEPARATOR);
}

function isObject(value) {
  return typeof value === 'object' && value !== null;
}

// `planSummary` of the reference: the first in_progress item names the row when its content is usable (non-blank
// after trimming; shown untrimmed); otherwise the row drops the active clause rather than skipping ahead.
export function planSummary(todos) {
  let done = 0;
  let activeCount = 0;
  let firstActive;
  for (const item of todos) {
    if (!isObject(item)) continue;
    if (item.status === 'completed') done += 1;
    if (item.status === 'in_progress') {
      activeCount += 1;
      if (firstActive === undefined) firstActive = item;
    }
  }
  const content = firstActive === undefined ? undefined : firstActive.content;
  const activeContent = typeof content === 'string' && content.trim() !== '' ? content : null;
  return { done, total: todos.length, activeContent, activeExtra: activeContent !== null ? activeCount - 1 : 0 };
}

// The todos of a call's raw arguments, or null when the generic summary must be used instead.
export function todosOfArgs(argsRaw) {
  if (typeof argsRaw !== 'string') return null;
  let parsed;
  try {
    parsed = JSON.parse(argsRaw);
  } catch {
    return null;
  }
  if (!isObject(parsed) || !Array.isArray(parsed.todos)) return null;
  if (!parsed.todos.every(isObject)) return null;
  return parsed.todos;
}

export function firstLine(text) {
  if (typeof text !== 'string') return '';
  return text.split(/\r\n|\r|\n/, 1)[0];
}

// The generic row's base text: the first line of the raw arguments, else the first non-empty string value of the
// parsed object, else the call id (for example when the page cut the call off).
export function genericBase(argsRaw, callId) {
  if (typeof argsRaw === 'string' && argsRaw !== '') {
    const line = firstLine(argsRaw);
    if (line.trim() !== '') return line;
    try {
      const parsed = JSON.parse(argsRaw);
      if (isObject(parsed)) {
        for (const value of Object.values(parsed)) {
          if (typeof value === 'string' && value.trim() !== '') return value;
        }
      }
    } catch {
      // not JSON: nothing better than the call id
    }
  }
  return typeof callId === 'string' ? callId : '';
}

// Stopped rather than failed: the call was cut short (interrupted turn, abort), so it must not read as an update.
export const STOPPED_CODES = new Set([
  'interrupted', 'ABORTED', 'ABORTED_BEFORE_DISPATCH', 'TOOL_OUTCOME_UNKNOWN', 'TOOL_NOT_STARTED',
]);

export function rowState(result) {
  if (!result) return 'running';
  if (result.code && STOPPED_CODES.has(result.code)) return 'stopped';
  return result.isError ? 'error' : 'ok';
}

// Title, summary and suffix of one tool row (SPEC §9.2). `call` = {callId, name, argsRaw, result}.
export function rowText(call, t) {
  const state = rowState(call.result);
  const isTodo = call.name === 'todo_write';
  const title = isTodo ? t('todo.rowTitle') : (call.name || 'tool');
  let summary;
  let suffix = null;
  let count = null;
  const todos = isTodo ? todosOfArgs(call.argsRaw) : null;
  if (todos !== null) {
    const plan = planSummary(todos);
    summary = t('todo.completed', { done: plan.done, total: plan.total });
    if (plan.activeContent !== null) {
      count = summary + ROW_SEPARATOR;
      summary += ROW_SEPARATOR + plan.activeContent;
    }
    if (plan.activeExtra > 0) suffix = `+${plan.activeExtra}`;
  } else {
    const base = genericBase(call.argsRaw, call.callId);
    summary = isTodo ? `todo_write${ROW_SEPARATOR}${base}` : base;
  }
  if (state === 'error' || state === 'stopped') {
    const line = call.result ? firstLine(call.result.text) : '';
    if (line !== '') {
      summary = line;
      count = null;
    }
    suffix = null;
  }
  // `count` is the summary's leading `{done}/{total} completed · ` when a task follows it: a narrow row keeps it
  // whole and gives the ellipsis to the task.
  return { state, title, summary, suffix, count };
}

// IN: the arguments pretty-printed (or raw when they are not JSON); OUT: the flattened result text.
export function prettyArgs(argsRaw) {
  if (typeof argsRaw !== 'string') return '';
  try {
    return JSON.stringify(JSON.parse(argsRaw), null, 2);
  } catch {
    return argsRaw;
  }
}

// The statuses that leave an item open ("stopped with N open"): anything but completed (and Gemini's cancelled,
// which is closed without being done).
export const CLOSED = new Set(['completed', 'cancelled']);

export function openCount(todos) {
  if (!Array.isArray(todos)) return 0;
  return todos.filter((item) => isObject(item) && !CLOSED.has(item.status)).length;
}

// A plan write as a diff against the previous one, in order: each item of the new list as `same`, `added` or
// `status` (its status changed: `from` is the old one), with each item the new list dropped (`removed`) placed before
// the first new item that came after it in the old list. Items are matched by their text (a repeated text matches
// its occurrences in order). `before` null or absent: no earlier write, every item is added.
export function planDiff(before, after) {
  const old = Array.isArray(before) ? before.filter(isObject) : [];
  const fresh = Array.isArray(after) ? after.filter(isObject) : [];
  const used = new Array(old.length).fill(false);
  const matches = fresh.map((item) => {
    const index = old.findIndex((candidate, at) => !used[at] && candidate.content === item.content);
    if (index >= 0) used[index] = true;
    return index;
  });
  const out = [];
  let flushed = 0;
  const flush = (upTo) => {
    for (; flushed < upTo; flushed += 1) {
      if (!used[flushed]) out.push({ kind: 'removed', content: old[flushed].content, status: old[flushed].status });
    }
  };
  fresh.forEach((item, at) => {
    const index = matches[at];
    if (index < 0) {
      out.push({ kind: 'added', content: item.content, status: item.status });
      return;
    }
    flush(index);
    const from = old[index].status;
    out.push(from === item.status ? { kind: 'same', content: item.content, status: item.status }
      : { kind: 'status', content: item.content, status: item.status, from });
  });
  flush(old.length);
  return out;
}
