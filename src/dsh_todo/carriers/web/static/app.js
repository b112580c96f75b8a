// The page: a session list, the conversation (user and assistant text, tool rows) and the plan strip, kept live
// over the server's SSE mux. History comes from `session.history` (the tail page carries the projections baseline);
// the strip is drawn from the projection store only, never from todo/write events (SPEC §6.3, §12.4).

import { detectLocale, locale, setLocale, t } from './i18n.js';
import { el } from './dom.js';
import { ProjectionStore } from './store.js';
import { Board } from './board.js';
import { listRow, rowModel } from './sessions.js';
import { PlanStrip } from './strip.js';
import { ToolRow } from './toolrow.js';

const PAGE_MESSAGES = 200;
const LIST_REFRESH_MS = 5000;
const LIST_LOAD_SHARE = 5; // the list is read again after at least this many times what the last reading took
const LIST_ROWS = 100; // rows of the sidebar list in the DOM at a time
const RECONNECT_MS = 1000;

const $ = (id) => document.getElementById(id);

let rpcCounter = 0;

async function rpc(method, payload) {
  rpcCounter += 1;
  const response = await fetch(`/api/${method}`, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'client-request', rpcId: `r${Date.now().toString(36)}-${rpcCounter}`, method, payload }),
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    // a non-JSON answer (a proxy, a crash): reported below
  }
  const result = body && body.result;
  if (!result || result.ok !== true) {
    const error = new Error((result && result.error && result.error.message) || `HTTP ${response.status}`);
    error.code = result && result.error ? result.error.code : 'http';
    throw error;
  }
  return result.value;
}

function textOfBlocks(blocks) {
  if (typeof blocks === 'string') return blocks;
  if (!Array.isArray(blocks)) return '';
  return blocks.filter((b) => b && b.type === 'text' && typeof b.text === 'string').map((b) => b.text).join('');
}

// One open session: its events (by seq), its tool rows (by call id) and its projection store.
class SessionView {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.events = new Map();
    this.firstSeq = Infinity;
    this.lastSeq = -1;
    this.hasMore = false;
    this.missing = false;
    this.store = new ProjectionStore();
    this.rows = new Map();
    this.expanded = new Set();
    this.resetPlans();
  }

  // Which plan write each plan row shows: the rows of plan tools waiting for the `todo/write` that follows their
  // call, and the list the last write left (the next row's diff is against it).
  resetPlans() {
    this.planRows = [];
    this.lastPlan = null;
    this.lastRow = null;
  }
}

// The plan tools whose rows show a diff (DSH's own and the other agents', as their pages name them).
const PLAN_TOOLS = new Set(['todo_write', 'TodoWrite', 'update_plan', 'write_todos', 'todowrite']);

class App {
  constructor() {
    this.conversation = $('conversation');
    this.dock = $('dock');
    this.list = $('session-list');
    this.connection = $('conn');
    this.strip = new PlanStrip(this.dock, t);
    this.board = new Board($('board'), t, {
      hrefFor: (id) => this.urlFor(id),
      onOpen: (id) => this.open(id, { push: true }),
      onConnected: () => this.refreshList(),
    });
    this.view = null;
    this.source = null;
    this.generation = 0;
    this.sessions = [];
  }

  start() {
    setLocale(detectLocale());
    const select = $('lang');
    select.value = locale();
    select.addEventListener('change', () => {
      setLocale(select.value, { remember: true });
      this.relabel();
    });
    const params = new URLSearchParams(window.location.search);
    if (params.has('token')) {
      // The server has set its cookie by now; keep the secret out of the address bar and history.
      params.delete('token');
      window.history.replaceState(null, '', this.urlFor(params.get('session')));
    }
    window.addEventListener('popstate', () => {
      this.open(new URLSearchParams(window.location.search).get('session'), { push: false });
    });
    for (const link of [$('brand'), $('nav-board')]) {
      link.addEventListener('click', (event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        this.open(null, { push: true });
      });
    }
    this.relabelStatic();
    this.listRows = LIST_ROWS;
    this.pollList();
    this.open(params.get('session'), { push: false });
  }

  urlFor(sessionId) {
    if (sessionId === null || sessionId === undefined) return window.location.pathname;
    return `${window.location.pathname}?${new URLSearchParams({ session: sessionId })}`;
  }

  // -- session list --------------------------------------------------------------------------------------------

  // Read the list now, and again after LIST_REFRESH_MS, or longer when a reading is slow (a root of thousands of
  // logs): an open page never keeps the server busier than 1/LIST_LOAD_SHARE of the time. Live sessions need no
  // reading: their frames arrive as they happen.
  async pollList() {
    const started = performance.now();
    if (document.visibilityState === 'visible') await this.refreshList();
    const took = performance.now() - started;
    window.setTimeout(() => this.pollList(), Math.max(LIST_REFRESH_MS, LIST_LOAD_SHARE * took));
  }

  async refreshList() {
    let value;
    try {
      value = await rpc('session.list', {});
      this.sessions = Array.isArray(value.sessions) ? value.sessions : [];
    } catch {
      return;
    }
    this.renderList();
    this.markRecoveredEnd();
    this.board.setOptions({ agents: value.agents, idleAfterMs: value.idleAfterMs });
    this.board.setRows(this.sessions);
    document.body.dataset.listed = String(this.sessions.length);
  }

  renderList() {
    const current = this.view ? this.view.sessionId : null;
    if (this.sessions.length === 0) {
      this.list.replaceChildren(el('li', { class: 'empty' }, t('ui.noSessions')));
      return;
    }
    if (!this.view) { // the board shows them; the list is for a session's page
      this.list.replaceChildren();
      return;
    }
    const models = this.sessions.map(rowModel).sort((a, b) => (b.at ?? 0) - (a.at ?? 0));
    const shown = models.slice(0, this.listRows);
    const open = models.find((model) => model.id === current);
    if (open && !shown.includes(open)) shown.push(open);
    const items = shown.map((model) => listRow(model, t, {
      current: model.id === current,
      href: this.urlFor(model.id),
      onOpen: (event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        this.open(model.id, { push: true });
      },
    }));
    if (models.length > shown.length) {
      items.push(el('li', { class: 'list-more' }, el('button', {
        type: 'button', class: 'board-more', 'data-testid': 'list-more',
        onclick: () => { this.listRows += LIST_ROWS; this.renderList(); },
      }, t('board.more', { count: models.length - shown.length }))));
    }
    this.list.replaceChildren(...items);
  }

  // -- opening a session ---------------------------------------------------------------------------------------

  async open(sessionId, { push }) {
    this.generation += 1;
    const generation = this.generation;
    this.closeStream();
    this.strip.reset();
    document.body.dataset.history = 'loading';
    if (push) window.history.pushState(null, '', this.urlFor(sessionId));
    if (sessionId === null || sessionId === undefined || sessionId === '') {
      this.view = null;
      document.body.removeAttribute('data-session');
      document.body.dataset.view = 'board';
      $('session-name').textContent = '';
      document.title = 'dsh-todo';
      this.conversation.replaceChildren();
      this.renderList();
      this.board.start();
      document.body.dataset.history = 'loaded';
      return;
    }
    this.board.stop();
    document.body.dataset.view = 'session';
    const view = new SessionView(sessionId);
    this.view = view;
    document.body.dataset.session = sessionId;
    $('session-name').textContent = sessionId;
    document.title = `${sessionId} · dsh-todo`;
    view.store.subscribe(() => {
      if (this.view === view) this.strip.render(view.store.get('todos'));
    });
    this.renderList();
    try {
      const page = await rpc('session.history', { sessionId, maxMessages: PAGE_MESSAGES });
      if (generation !== this.generation) return;
      this.addPage(view, page);
      if (page.projections) view.store.seedBaseline(page.projections);
    } catch (error) {
      if (generation !== this.generation) return;
      if (error.code === 'not-found') view.missing = true;
      else view.error = error.message;
    }
    this.renderConversation();
    this.strip.render(view.store.get('todos'));
    document.body.dataset.lastSeq = String(view.lastSeq);
    document.body.dataset.history = 'loaded';
    this.connect(view, generation);
  }

  addPage(view, page) {
    for (const entry of page.events || []) {
      const event = entry && entry.event;
      if (event && Number.isInteger(event.seq) && !view.events.has(event.seq)) {
        view.events.set(event.seq, event);
        view.firstSeq = Math.min(view.firstSeq, event.seq);
        view.lastSeq = Math.max(view.lastSeq, event.seq);
      }
    }
    view.hasMore = Boolean(page.hasMore);
  }

  async loadEarlier() {
    const view = this.view;
    if (!view || !view.hasMore || !Number.isFinite(view.firstSeq)) return;
    const generation = this.generation;
    const page = await rpc('session.history', {
      sessionId: view.sessionId, beforeSeq: view.firstSeq, maxMessages: PAGE_MESSAGES,
    });
    if (generation !== this.generation) return;
    const height = this.conversation.scrollHeight;
    this.addPage(view, page);
    view.hasMore = Boolean(page.hasMore);
    this.renderConversation({ keepBottomOffset: height });
  }

  // -- live feed -----------------------------------------------------------------------------------------------

  connect(view, generation) {
    const query = new URLSearchParams({ sessionId: view.sessionId, afterSeq: String(view.lastSeq) });
    const source = new EventSource(`/api/events.mux?${query}`);
    this.source = source;
    this.setConnection('connecting');
    source.onopen = () => {
      if (generation === this.generation) this.setConnection('open');
    };
    source.onerror = () => {
      // Reconnect with the last seq this page has, not the one it first subscribed with: a connection the server
      // dropped because it fell behind resumes where it stopped (the replay is deduplicated by seq).
      source.close();
      if (this.source === source) this.source = null;
      if (generation !== this.generation) return;
      this.setConnection('connecting');
      window.setTimeout(() => {
        if (generation === this.generation && this.source === null) this.connect(view, generation);
      }, RECONNECT_MS);
    };
    source.onmessage = (message) => {
      if (generation !== this.generation) return;
      let envelope;
      try {
        envelope = JSON.parse(message.data);
      } catch {
        return;
      }
      if (!envelope || envelope.type !== 'server-request' || !envelope.payload) return;
      this.onFrame(view, envelope.payload);
    };
  }

  closeStream() {
    if (this.source) {
      this.source.close();
      this.source = null;
    }
    this.setConnection('idle');
  }

  setConnection(state) {
    document.body.dataset.stream = state;
    this.connection.dataset.state = state;
    this.connection.textContent = state === 'open' ? t('ui.connected') : state === 'connecting' ? t('ui.connecting') : '';
  }

  onFrame(view, frame) {
    if (frame.sessionId !== view.sessionId) return;
    if (frame.type === 'session/event') {
      this.onEvent(view, frame.event);
    } else if (frame.type === 'session/projection') {
      view.store.applyFrame(frame.key, frame.value, frame.seq);
    } else if (frame.type === 'session/subscribed' && Number.isInteger(frame.lastSeq)) {
      view.store.dropAfter(frame.lastSeq);
    }
  }

  onEvent(view, event) {
    if (!event || !Number.isInteger(event.seq) || view.events.has(event.seq)) return;
    if (view.lastSeq >= 0 && event.seq > view.lastSeq + 1) {
      // The server replays at most a page: this page was further behind, so it reads the history tail page again.
      this.open(view.sessionId, { push: false });
      return;
    }
    const inOrder = event.seq > view.lastSeq;
    view.events.set(event.seq, event);
    view.firstSeq = Math.min(view.firstSeq, event.seq);
    view.lastSeq = Math.max(view.lastSeq, event.seq);
    document.body.dataset.lastSeq = String(view.lastSeq);
    if (view.missing) {
      view.missing = false;
      this.renderConversation();
      this.refreshList();
      return;
    }
    if (!inOrder) {
      this.renderConversation();
      return;
    }
    const stick = this.nearBottom();
    for (const node of this.conversation.querySelectorAll('[data-recovered]')) node.remove();
    this.appendEvent(view, event, this.conversation);
    if (stick) this.scrollToBottom();
  }

  // -- conversation --------------------------------------------------------------------------------------------

  renderConversation({ keepBottomOffset } = {}) {
    const view = this.view;
    const container = this.conversation;
    container.replaceChildren();
    if (!view) return;
    view.rows = new Map();
    view.resetPlans();
    if (view.hasMore) {
      container.append(el('button', {
        type: 'button', class: 'load-earlier', 'data-testid': 'load-earlier',
        onclick: () => { this.loadEarlier(); },
      }, t('ui.loadEarlier')));
    }
    if (view.missing && view.events.size === 0) {
      container.append(el('p', { class: 'placeholder', 'data-testid': 'not-found' }, t('ui.notFound')));
    } else if (view.error) {
      container.append(el('p', { class: 'placeholder error' }, t('ui.loadFailed', { message: view.error })));
    }
    const seqs = [...view.events.keys()].sort((a, b) => a - b);
    for (const seq of seqs) this.appendEvent(view, view.events.get(seq), container);
    this.markRecoveredEnd();
    if (keepBottomOffset !== undefined) {
      container.scrollTop = container.scrollHeight - keepBottomOffset;
    } else {
      this.scrollToBottom();
    }
  }

  appendEvent(view, event, container) {
    const data = event.data && typeof event.data === 'object' ? event.data : {};
    switch (event.type) {
      case 'user/message': {
        const body = textOfBlocks(data.content);
        if (body !== '') container.append(this.message('user', body, event.seq));
        break;
      }
      case 'assistant/message': {
        const message = data.message && typeof data.message === 'object' ? data.message : {};
        const body = textOfBlocks(message.content);
        if (body !== '') container.append(this.message('assistant', body, event.seq));
        break;
      }
      case 'tool/call': {
        const callId = typeof data.callId === 'string' ? data.callId : `seq-${event.seq}`;
        const row = new ToolRow({
          callId, name: typeof data.name === 'string' ? data.name : '',
          argsRaw: typeof data.arguments === 'string' ? data.arguments : '', result: null,
        }, t, view.expanded);
        view.rows.set(callId, row);
        view.lastRow = row;
        if (PLAN_TOOLS.has(row.call.name)) view.planRows.push(row);
        container.append(row.node);
        break;
      }
      case 'todo/write': {
        // The list a plan call left: the oldest plan row still waiting for one, else the call just before it.
        const todos = Array.isArray(data.todos) ? data.todos : null;
        const row = view.planRows.shift() ?? (view.lastRow && view.lastRow.call.after === undefined ? view.lastRow : null);
        if (row && todos !== null) {
          row.call.before = view.lastPlan;
          row.call.after = todos;
          row.render();
        }
        if (todos !== null) view.lastPlan = todos;
        break;
      }
      case 'tool/result': {
        const message = data.message && typeof data.message === 'object' ? data.message : {};
        // Format v4's tool-role message is the answer itself; v0's user message wraps a tool-result block.
        const block = message.role === 'tool' ? message : Array.isArray(message.content)
          ? message.content.find((b) => b && b.type === 'tool-result') : null;
        if (!block) break;
        const callId = typeof block.toolCallId === 'string' ? block.toolCallId : '';
        const result = {
          text: textOfBlocks(block.content),
          isError: block.isError === true,
          code: data.error && typeof data.error.code === 'string' ? data.error.code : null,
        };
        let row = view.rows.get(callId);
        if (row) view.planRows = view.planRows.filter((waiting) => waiting !== row); // a refused write left no list
        if (!row) {
          // The page cut the call off: a row from the result alone (the generic summary falls back to the id).
          row = new ToolRow({ callId, name: '', argsRaw: '', result }, t, view.expanded);
          view.rows.set(callId, row);
          container.append(row.node);
        } else {
          row.call.result = result;
          row.render();
        }
        break;
      }
      case 'turn/start':
        if (container.childElementCount > 0) {
          container.append(el('hr', { class: 'turn-sep', 'data-turn': String(data.turn ?? '') }));
        }
        break;
      case 'turn/end':
        container.append(this.turnMarker(data));
        break;
      default:
        break;
    }
  }

  // A stored turn left open by a writer that is gone has no turn/end in the log: the reader closes it in memory
  // (its verdict says so, and the row's state is `interrupted`), and the page shows that end where the log stops.
  markRecoveredEnd() {
    const view = this.view;
    for (const node of this.conversation.querySelectorAll('[data-recovered]')) node.remove();
    if (!view) return;
    const row = this.sessions.find((item) => String(item.sessionId) === view.sessionId);
    if (!row || row.state !== 'interrupted') return;
    let open = null;
    for (const seq of [...view.events.keys()].sort((a, b) => a - b)) {
      const event = view.events.get(seq);
      if (event.type === 'turn/start') open = event.data && Number.isInteger(event.data.turn) ? event.data.turn : '?';
      else if (event.type === 'turn/end') open = null;
    }
    if (open === null) return;
    const marker = this.turnMarker({ turn: open, reason: { kind: 'interrupted' } });
    marker.setAttribute('data-recovered', '');
    marker.setAttribute('title', typeof row.recovered === 'string' ? row.recovered : '');
    const stick = this.nearBottom();
    this.conversation.append(marker);
    if (stick) this.scrollToBottom();
  }

  // Where a turn ends, how it ended (SPEC §5.2's reason kinds; an unknown kind is shown as written).
  turnMarker(data) {
    const reason = data.reason && typeof data.reason === 'object' ? data.reason : {};
    const kind = typeof reason.kind === 'string' ? reason.kind : 'unknown';
    const known = ['completed', 'interrupted', 'aborted', 'error'].includes(kind);
    const turn = Number.isInteger(data.turn) ? data.turn : '?';
    const label = t(known ? `turn.end.${kind}` : 'turn.end.other', { turn, kind });
    let detail = '';
    if (kind === 'aborted' && reason.reason && typeof reason.reason.kind === 'string') detail = reason.reason.kind;
    if (kind === 'error' && reason.error && typeof reason.error.message === 'string') detail = reason.error.message;
    return el('div', { class: 'turn-end', 'data-testid': 'turn-end', 'data-kind': kind, role: 'note' },
      el('span', { class: 'turn-end-label' }, label),
      detail !== '' ? el('span', { class: 'turn-end-detail', title: detail }, detail) : null);
  }

  message(role, body, seq) {
    return el('div', { class: `msg msg-${role}`, 'data-role': role, 'data-seq': String(seq) },
      el('div', { class: 'msg-author' }, t(role === 'user' ? 'ui.you' : 'ui.assistant')),
      el('div', { class: 'msg-body' }, body));
  }

  nearBottom() {
    const c = this.conversation;
    return c.scrollHeight - c.scrollTop - c.clientHeight < 48;
  }

  scrollToBottom() {
    this.conversation.scrollTop = this.conversation.scrollHeight;
  }

  // -- labels ----------------------------------------------------------------------------------------------------

  relabelStatic() {
    for (const node of document.querySelectorAll('[data-i18n]')) node.textContent = t(node.getAttribute('data-i18n'));
    document.title = this.view ? `${this.view.sessionId} · dsh-todo` : 'dsh-todo';
  }

  relabel() {
    this.relabelStatic();
    this.renderList();
    this.setConnection(document.body.dataset.stream || 'idle');
    this.board.relabel();
    if (this.view) {
      this.renderConversation();
      this.strip.render(this.view.store.get('todos'));
    }
  }
}

new App().start();
