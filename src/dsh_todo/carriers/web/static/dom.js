// The only way this client builds DOM. Text always goes in as Text nodes; attributes are set one by one with
// setAttribute; nothing is ever parsed as markup. Plans and every other model-written string are untrusted
// (USERS.md #7), and there is no code path here that could turn them into elements.

const SVG_NS = 'http://www.w3.org/2000/svg';

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  setProps(node, props);
  appendChildren(node, children);
  return node;
}

export function text(value) {
  return document.createTextNode(value === undefined || value === null ? '' : String(value));
}

function setProps(node, props) {
  if (!props) return;
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.setAttribute('class', String(value));
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
}

function appendChildren(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.appendChild(child instanceof Node ? child : text(child));
  }
}

// Static icons, drawn from fixed shapes (never from data).
function svg(viewBox, className, shapes) {
  const root = document.createElementNS(SVG_NS, 'svg');
  root.setAttribute('viewBox', viewBox);
  root.setAttribute('aria-hidden', 'true');
  root.setAttribute('focusable', 'false');
  root.setAttribute('class', className);
  for (const [tag, attrs] of shapes) {
    const shape = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs)) shape.setAttribute(name, value);
    root.appendChild(shape);
  }
  return root;
}

export function checklistIcon(className = 'icon') {
  return svg('0 0 16 16', className, [
    ['path', { d: 'M2 4.2l1.2 1.2L5.6 3', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.4',
      'stroke-linecap': 'round', 'stroke-linejoin': 'round' }],
    ['path', { d: 'M2 10.2l1.2 1.2 2.4-2.4', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.4',
      'stroke-linecap': 'round', 'stroke-linejoin': 'round' }],
    ['path', { d: 'M8 4.5h6M8 10.5h6', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.4',
      'stroke-linecap': 'round' }],
  ]);
}

export function chevronIcon(up) {
  return svg('0 0 16 16', `chevron ${up ? 'chevron-up' : 'chevron-down'}`, [
    ['path', { d: up ? 'M4 10l4-4 4 4' : 'M4 6l4 4 4-4', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.5',
      'stroke-linecap': 'round', 'stroke-linejoin': 'round' }],
  ]);
}

export function statusGlyph(status) {
  if (status === 'completed') {
    return svg('0 0 16 16', 'glyph glyph-done', [
      ['circle', { cx: '8', cy: '8', r: '6.5', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.5' }],
      ['path', { d: 'M5.2 8.2l1.9 1.9 3.7-3.9', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.5',
        'stroke-linecap': 'round', 'stroke-linejoin': 'round' }],
    ]);
  }
  if (status === 'in_progress') {
    const root = svg('0 0 16 16', 'glyph glyph-active', [
      ['circle', { cx: '8', cy: '8', r: '6.5', fill: 'none', stroke: 'currentColor', 'stroke-opacity': '0.18',
        'stroke-width': '1.8' }],
      ['path', { d: 'M8 1.5a6.5 6.5 0 0 1 6.5 6.5', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.8',
        'stroke-linecap': 'round' }],
    ]);
    return root;
  }
  return svg('0 0 16 16', 'glyph glyph-pending', [
    ['circle', { cx: '8', cy: '8', r: '6.5', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.4',
      'stroke-dasharray': '2.4 2.4' }],
  ]);
}

export function stateDot(state) {
  return el('span', { class: `state-dot state-dot-${state}`, 'aria-hidden': 'true' });
}
