// The board (the page at `/`): every session's standing plan side by side, most recently active first, filtered by
// state and project, searched by task text. Rows come from `session.list`; the sessions that are live (a writer
// holds their lock) are watched over one mux connection (`?sessionId=a&sessionId=b…`), whose `session/projection`
// frames replace a card's plan by the store's rule (higher seq wins) and whose `session/event` frames move its last
// activity. Only a page of cards is in the DOM at a time; more are added as the reader scrolls.

import { el } from './dom.js';
import { STATES, boardCard, rowModel, searchText } from './sessions.js';

export const PAGE_CARDS = 48;
const MAX_WATCHED = 64;
const RECONNECT_MS = 1000;

export class Board {
  constructor(root, t, { hrefFor, onOpen }) {
    this.root = root;
    this.t = t;
    this.hrefFor = hrefFor;
    this.onOpen = onOpen;
    this.rows = [];
    this.models = new Map();
    this.shown = PAGE_CARDS;
    this.filters = { state: '', project: '', query: '' };
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
    this.count = el('span', { class: 'board-count', 'data-testid': 'board-count', role: 'status' });
    this.grid = el('div', { class: 'board-grid', 'data-testid': 'board-grid' });
    this.more = el('button', {
      type: 'button', class: 'board-more', 'data-testid': 'board-more',
      onclick: () => { this.shown += PAGE_CARDS; this.render(); },
    });
    this.root.replaceChildren(
      el('div', { class: 'board-bar' }, this.search, this.stateSelect, this.projectSelect, this.count),
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

  // A fresh `session.list` answer. The plan a frame brought stays when it is newer than the row's.
  setRows(rows) {
    const previous = this.models;
    this.models = new Map();
    for (const row of rows) {
      const model = rowModel(row);
      model.seq = row.projections && Number.isInteger(row.projections.asOfSeq) ? row.projections.asOfSeq : -1;
      const old = previous.get(model.id);
      if (old && old.seq > model.seq) {
        Object.assign(model, { todos: old.todos, done: old.done, total: old.total, active: old.active, seq: old.seq });
      }
      if (old && old.at !== null && (model.at === null || old.at > model.at)) model.at = old.at;
      model.search = searchText(model);
      this.models.set(model.id, model);
    }
    this.fillProjects();
    this.render();
    if (this.active) this.watch();
  }

  sorted() {
    return [...this.models.values()].sort((a, b) => (b.at ?? 0) - (a.at ?? 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  matching() {
    const { state, project, query } = this.filters;
    return this.sorted().filter((model) => (state === '' || model.state === state)
      && (project === '' || model.cwd === project) && (query === '' || model.search.includes(query)));
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

  card(model) {
    return boardCard(model, this.t, {
      href: this.hrefFor(model.id),
      onOpen: (event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        this.onOpen(model.id);
      },
    });
  }

  rerenderCard(model) {
    const node = [...this.grid.children].find((child) => child.getAttribute('data-session-id') === model.id);
    if (node) node.replaceWith(this.card(model));
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
    const live = this.sorted().filter((model) => model.state === 'live').slice(0, MAX_WATCHED);
    const key = live.map((model) => model.id).join('\n');
    if (key === this.watched && this.source) return;
    if (this.source) this.source.close();
    this.source = null;
    this.watched = key;
    if (live.length === 0) return;
    const query = new URLSearchParams();
    for (const model of live) query.append('sessionId', model.id);
    for (const model of live) query.append('afterSeq', String(model.seq));
    // One session is the plain single-session connection (a list of one is the same thing).
    const source = new EventSource(`/api/events.mux?${live.length === 1 ? single(live[0]) : query}`);
    this.source = source;
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
    const model = this.models.get(frame.sessionId);
    if (!model) return;
    if (frame.type === 'session/projection' && frame.key === 'todos' && Number.isInteger(frame.seq) && frame.seq > model.seq) {
      const fresh = rowModel({ sessionId: model.id, projections: { values: { todos: frame.value } } });
      Object.assign(model, { todos: fresh.todos, done: fresh.done, total: fresh.total, active: fresh.active, seq: frame.seq });
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
