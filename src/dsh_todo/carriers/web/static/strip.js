// The plan strip (SPEC §9.1): the standing plan above the composer, fed only by the projection store.
// Hidden for undefined, null and []; starts collapsed; the header shows per-status counts; expanded, it lists every
// item with a glyph per status, several spinning at once when work runs in parallel.

import { chevronIcon, checklistIcon, el, statusGlyph } from './dom.js';
import { STRIP_SEPARATOR, progressLabel } from './plan.js';

export class PlanStrip {
  constructor(container, t) {
    this.container = container;
    this.t = t;
    this.expanded = false;
    this.todos = null;
    this.section = null;
  }

  // A new session starts collapsed again; within one session the reader's choice sticks across updates.
  reset() {
    this.expanded = false;
    this.render(null);
  }

  render(todos) {
    this.todos = Array.isArray(todos) ? todos : null;
    if (this.todos === null || this.todos.length === 0) {
      if (this.section !== null) {
        this.section.remove();
        this.section = null;
      }
      return;
    }
    if (this.section === null) this.build();
    this.update();
  }

  build() {
    this.title = el('span', { class: 'todo-title', 'data-testid': 'todo-title' });
    this.progress = el('span', { class: 'todo-progress', 'data-testid': 'todo-progress' });
    this.chevronSlot = el('span', { class: 'chevron-slot' });
    this.button = el('button', {
      type: 'button', class: 'todo-header', 'data-testid': 'todo-toggle', 'aria-expanded': 'false',
      onclick: () => {
        this.expanded = !this.expanded;
        this.update();
      },
    }, checklistIcon('icon todo-icon'), this.title, this.progress, this.chevronSlot);
    this.list = null;
    this.section = el('section', { class: 'todo-panel', 'data-testid': 'todo-panel' }, this.button);
    this.container.prepend(this.section);
  }

  update() {
    const { t } = this;
    const todos = this.todos;
    this.section.setAttribute('aria-label', t('todo.title'));
    this.title.textContent = t('todo.title');
    // Each count is one unbreakable segment: a narrow strip wraps between them, never inside one, and never
    // clips one ("1 in progres…" hid what was pending). The text reads as SPEC §9.1's label.
    // The dot stays with the count before it, so a wrapped line starts with a count.
    const segments = progressLabel(todos, t).split(STRIP_SEPARATOR);
    const [before, dot, after] = [...STRIP_SEPARATOR]; // en space, middle dot, en space
    this.progress.replaceChildren(...segments.flatMap((segment, index) => [
      index > 0 ? after : null,
      el('span', { class: 'todo-seg' }, index < segments.length - 1 ? segment + before + dot : segment),
    ]).filter((part) => part !== null));
    this.button.setAttribute('aria-expanded', String(this.expanded));
    this.chevronSlot.replaceChildren(chevronIcon(!this.expanded));
    if (!this.expanded) {
      if (this.list !== null) {
        this.list.remove();
        this.list = null;
      }
      return;
    }
    const items = todos.map((item) => {
      const status = item && typeof item.status === 'string' ? item.status : 'pending';
      const content = item && typeof item.content === 'string' ? item.content : '';
      return el('li', { class: 'todo-item', 'data-status': status },
        el('span', { class: 'glyph-cell' }, statusGlyph(status)),
        el('span', { class: 'todo-content', title: content }, content));
    });
    if (this.list === null) {
      this.list = el('ul', { class: 'todo-list', 'data-testid': 'todo-list' });
      this.section.append(this.list);
    }
    this.list.replaceChildren(...items);
  }
}
