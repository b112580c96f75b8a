// The board (the page at `/`): every session's standing plan side by side, most recently active first, filtered by
// state and project, searched by task text. Rows come from `session.list`; the sessions that are live (a writer
// holds their lock) are watched over one mux connection (`?sessionId=a&sessionId=b…`), whose `session/projection`
// frames replace a card's plan by the store's rule (higher seq wins) and whose `session/event` frames move its last
// activity. Only a page of cards is in the DOM at a time; more are added as the reader scrolls.
//
// Other coding agents' sessions (when the server reads some) are rows too; the same connection, opened with
// `agents=1`, brings each one's new row as its files change (`agents/session`, `agents/removed`). A session another
// delegated (a subagent: DSH's `parentSession`, another agent's parent link) sits folded under its parent's card,
// which counts its open items. "Needs me" keeps the cards whose session (or a subagent) stopped with items open,
// waits on the person, or has been idle with an item in progress.

import { el } from './dom.js';
import { STATES, boardCard, childBlock, needsMe, needsOf, rowModel, searchText } from './sessions.js';

export const PAGE_CARDS = 48;
const MAX_WATCHED = 64;
const RECONNECT_MS = 1000;

export class Board {
  constructor(root, t, { hrefFor, onOpen, onConnected = null }) {
    this.root = root;
    this.t = t;
    this.hrefFor = hrefFor;
    this.onOpen = onOpen;
    this.onConnected = onConnected;
    this.rows = [];
    this.models = new Map();
    this.shown = PAGE_CARDS;
    this.filters = { state: '', project: '', query: '', needs: false };
    this.agents = [];
    this.idleAfterMs = 10 * 60 * 1000;
    this.expanded = new Set();
    this.children = new Map();
    this.source = null;
    this.watched = '';
    this.active = false;
    this.build();
  }

  build() {
    const { t } = this;
    this.search = el('input', {
      type: 'search', class: 'board-search', 'data-testid': 'board-search', autocomplete: 'off',
      oninput: () => { this.filters.query = this.search.value.trim().toLocaleLowerCase(); this.shown = PAGE_CARDS; this.render(); },
    });
    this.stateSelect = el('select', {
      class: 'board-filter', 'data-testid': 'board-state',
      onchange: () => { this.filters.state = this.stateSelect.value; this.shown = PAGE_CARDS; this.render(); },
    });
    this.projectSelect = el('select', {
      class: 'board-filter', 'data-testid': 'board-project',
      onchange: () => { this.filters.project = this.projectSelect.value; this.shown = PAGE_CARDS; this.render(); },
    });
    this.needsBox = el('input', {
      type: 'checkbox', 'data-testid': 'board-needs',
      onchange: () => { this.filters.needs = this.needsBox.checked; this.shown = PAGE_CARDS; this.render(); },
    });
    this.needsLabel = el('span');
    this.count = el('span', { class: 'board-count', 'data-testid': 'board-count', role: 'status' });
    this.grid = el('div', { class: 'board-grid', 'data-testid': 'board-grid' });
    this.more = el('button', {
      type: 'button', class: 'board-more', 'data-testid': 'board-more',
      onclick: () => { this.shown += PAGE_CARDS; this.render(); },
    });
    this.root.replaceChildren(
      el('div', { class: 'board-bar' }, this.search, this.stateSelect, this.projectSelect,
        el('label', { class: 'board-needs' }, this.needsBox, this.needsLabel), this.count),
      this.grid, this.more);
    // Scrolling near the end shows the next page of cards (the button does the same without scrolling).
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting) && !this.more.hidden) {
        this.shown += PAGE_CARDS;
        this.render();
      }
    }, { root: this.root, rootMargin: '400px' });
    this.observer.observe(this.more);
    this.relabel();
  }

  relabel() {
    const { t } = this;
    this.search.setAttribute('placeholder', t('board.search'));
    this.search.setAttribute('aria-label', t('board.search'));
    this.stateSelect.setAttribute('aria-label', t('board.state'));
    this.projectSelect.setAttribute('aria-label', t('board.project'));
    this.needsLabel.textContent = t('needs.me');
    this.stateSelect.replaceChildren(el('option', { value: '' }, t('board.allStates')),
      ...STATES.map((state) => el('option', { value: state }, t(`state.${state}`))));
    this.stateSelect.value = this.filters.state;
    this.fillProjects();
    this.render();
  }

  fillProjects() {
    const projects = [...new Set([...this.models.values()].map((model) => model.cwd).filter((cwd) => cwd !== ''))].sort();
    if (this.filters.project !== '' && !projects.includes(this.filters.project)) projects.push(this.filters.project);
    const key = [this.t('board.allProjects'), ...projects].join('\n');
    if (key === this.projectsKey) return; // unchanged: an open menu stays open across list readings
    this.projectsKey = key;
    this.projectSelect.replaceChildren(el('option', { value: '' }, this.t('board.allProjects')),
      ...projects.map((cwd) => el('option', { value: cwd, title: cwd }, cwd)));
    this.projectSelect.value = this.filters.project;
  }

  // What the server said besides the rows: the agents it reads, and after how long an active session is idle.
  setOptions({ agents, idleAfterMs }) {
    this.agents = Array.isArray(agents) ? agents : [];
    if (Number.isFinite(idleAfterMs)) this.idleAfterMs = idleAfterMs;
  }

  // A fresh `session.list` answer. The plan a frame brought stays when it is newer than the row's.
  setRows(rows) {
    const previous = this.models;
    this.models = new Map();
    for (const row of rows) {
      const model = rowModel(row);
      model.seq = row.projections && Number.isInteger(row.projections.asOfSeq) ? row.projections.asOfSeq : -1;
      const old = previous.get(model.id);
      if (old && old.seq > model.seq) {
        Object.assign(model, { todos: old.todos, done: old.done, total: old.total, active: old.active, open: old.open, seq: old.seq });
      }
      if (old && old.at !== null && (model.at === null || old.at > model.at)) model.at = old.at;
      model.search = searchText(model);
      this.models.set(model.id, model);
    }
    this.fillProjects();
    this.render();
    if (this.active) this.watch();
  }

  // The subagents of each session whose parent is on the board; the others are top-level cards.
  nest() {
    this.children = new Map();
    const top = [];
    for (const model of this.models.values()) {
      if (model.parentId !== null && model.parentId !== model.id && this.models.has(model.parentId)) {
        if (!this.children.has(model.parentId)) this.children.set(model.parentId, []);
        this.children.get(model.parentId).push(model);
      } else {
        top.push(model);
      }
    }
    return top;
  }

  // A session's subagents, theirs included (a delegation chain), most recently active first.
  descendants(model, seen = new Set()) {
    const out = [];
    for (const child of this.children.get(model.id) ?? []) {
      if (seen.has(child.id)) continue;
      seen.add(child.id);
      out.push(child, ...this.descendants(child, seen));
    }
    return out.sort((a, b) => (b.at ?? 0) - (a.at ?? 0));
  }

  sorted(models = [...this.models.values()]) {
    return models.sort((a, b) => (b.at ?? 0) - (a.at ?? 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  matching() {
    const { state, project, query, needs } = this.filters;
    const now = Date.now();
    return this.sorted(this.nest()).filter((model) => (state === '' || model.state === state)
      && (project === '' || model.cwd === project)
      && (query === '' || model.search.includes(query) || this.descendants(model).some((child) => child.search.includes(query)))
      && (!needs || [model, ...this.descendants(model)].some((one) => needsMe(needsOf(one, this.idleAfterMs, now)))));
  }

  render() {
    if (!this.active) return;
    const { t } = this;
    const matching = this.matching();
    const visible = matching.slice(0, this.shown);
    this.grid.replaceChildren(...(visible.length ? visible.map((model) => this.card(model))
      : [el('p', { class: 'placeholder', 'data-testid': 'board-empty' }, t(this.models.size ? 'board.none' : 'ui.noSessions'))]));
    this.count.textContent = t('board.count', { shown: visible.length, total: matching.length });
    const left = matching.length - visible.length;
    this.more.hidden = left <= 0;
    this.more.textContent = t('board.more', { count: left });
  }

  links(model) {
    return {
      href: this.hrefFor(model.id),
      onOpen: (event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        this.onOpen(model.id);
      },
    };
  }

  card(model) {
    const now = Date.now();
    const children = this.descendants(model);
    return boardCard(model, this.t, {
      ...this.links(model),
      needs: needsOf(model, this.idleAfterMs, now),
      children,
      childOpen: children.reduce((sum, child) => sum + child.open, 0),
      expanded: this.expanded.has(model.id),
      onToggle: (open) => { if (open) this.expanded.add(model.id); else this.expanded.delete(model.id); },
      childCard: (child) => childBlock(child, this.t, { ...this.links(child), needs: needsOf(child, this.idleAfterMs, now) }),
    });
  }

  // A session changed: its card, or the card of the parent it sits under, is drawn again.
  rerenderCard(model) {
    let top = model;
    for (let hops = 0; top.parentId !== null && this.models.has(top.parentId) && hops < 16; hops += 1) {
      top = this.models.get(top.parentId);
    }
    const node = [...this.grid.children].find((child) => child.getAttribute('data-session-id') === top.id);
    if (node) node.replaceWith(this.card(top));
  }

  // -- live --------------------------------------------------------------------------------------------------

  start() {
    this.active = true;
    this.render();
    this.watch();
  }

  // Leaving the board lets go of its cards and its connection (a session view keeps neither).
  stop() {
    this.active = false;
    this.watched = '';
    if (this.source) this.source.close();
    this.source = null;
    this.grid.replaceChildren();
  }

  // One connection for the live sessions (the most recently active first, at most MAX_WATCHED), reopened when that
  // set changes; each resumes after the seq its row was read at.
  watch() {
    const agents = this.agents.length > 0;
    const live = this.sorted().filter((model) => model.state === 'live' && model.agent === null).slice(0, MAX_WATCHED);
    const key = (agents ? 'agents\n' : '') + live.map((model) => model.id).join('\n');
    if (key === this.watched && this.source) return;
    if (this.source) this.source.close();
    this.source = null;
    this.watched = key;
    if (live.length === 0 && !agents) return;
    const query = new URLSearchParams();
    for (const model of live) query.append('sessionId', model.id);
    for (const model of live) query.append('afterSeq', String(model.seq));
    if (agents) query.append('agents', '1');
    // One session is the plain single-session connection (a list of one is the same thing).
    const source = new EventSource(`/api/events.mux?${live.length === 1 && !agents ? single(live[0]) : query}`);
    this.source = source;
    // The other agents' changes come over this connection from now on; one read between the list and now (or while
    // it reconnected) would wait for the next list, so the list is read again once it is open.
    if (agents && this.onConnected) source.onopen = () => { if (this.source === source) this.onConnected(); };
    source.onmessage = (message) => {
      let envelope;
      try {
        envelope = JSON.parse(message.data);
      } catch {
        return;
      }
      if (envelope && envelope.type === 'server-request' && envelope.payload) this.onFrame(envelope.payload);
    };
    source.onerror = () => {
      source.close();
      if (this.source !== source) return;
      this.source = null;
      window.setTimeout(() => { if (this.active && this.source === null) { this.watched = ''; this.watch(); } }, RECONNECT_MS);
    };
  }

  onFrame(frame) {
    if (frame.type === 'agents/session' && frame.row && typeof frame.row === 'object') {
      const model = rowModel(frame.row);
      model.seq = frame.row.projections && Number.isInteger(frame.row.projections.asOfSeq) ? frame.row.projections.asOfSeq : -1;
      model.search = searchText(model);
      this.models.set(model.id, model);
      this.fillProjects();
      this.render();
      return;
    }
    if (frame.type === 'agents/removed') {
      if (this.models.delete(frame.sessionId)) this.render();
      return;
    }
    const model = this.models.get(frame.sessionId);
    if (!model) return;
    if (frame.type === 'session/projection' && frame.key === 'todos' && Number.isInteger(frame.seq) && frame.seq > model.seq) {
      const fresh = rowModel({ sessionId: model.id, projections: { values: { todos: frame.value } } });
      Object.assign(model, { todos: fresh.todos, done: fresh.done, total: fresh.total, active: fresh.active, open: fresh.open, seq: frame.seq });
      model.search = searchText(model);
      this.rerenderCard(model);
    } else if (frame.type === 'session/event' && frame.event && Number.isInteger(frame.event.time)) {
      const event = frame.event;
      model.at = Math.max(model.at ?? 0, event.time);
      if (event.type === 'turn/end' && event.data && event.data.reason && typeof event.data.reason.kind === 'string') {
        model.turnEnd = event.data.reason.kind;
      }
      this.rerenderCard(model);
    }
  }
}

function single(model) {
  return new URLSearchParams({ sessionId: model.id, afterSeq: String(model.seq) });
}
