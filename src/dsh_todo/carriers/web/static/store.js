// The client projection store (SPEC §6.3): one row per key, {value, seq}.
//
// - A pushed frame applies only when its seq is higher than the row's (higher seq wins), so replays and frames that
//   arrive after a fresher baseline are harmless.
// - A baseline {asOfSeq, values} applies each of its keys at asOfSeq by the same rule, then deletes every stored key
//   it lacks unless that row is newer than the baseline.
// - `session/subscribed` with lastSeq drops every row newer than lastSeq.
// - Reading: undefined means the capability is absent; for `todos`, null means no standing plan.

export class ProjectionStore {
  constructor() {
    this.rows = new Map();
    this.listeners = new Set();
  }

  get(key) {
    const row = this.rows.get(key);
    return row === undefined ? undefined : row.value;
  }

  seqOf(key) {
    const row = this.rows.get(key);
    return row === undefined ? undefined : row.seq;
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  applyFrame(key, value, seq) {
    if (typeof key !== 'string' || key === '' || !Number.isInteger(seq) || seq < 0) return false;
    if (!this.set(key, value, seq)) return false;
    this.emit([key]);
    return true;
  }

  seedBaseline(baseline) {
    if (!baseline || typeof baseline !== 'object' || !Number.isInteger(baseline.asOfSeq)) return;
    const { asOfSeq } = baseline;
    const values = baseline.values && typeof baseline.values === 'object' ? baseline.values : {};
    const changed = [];
    for (const key of Object.keys(values)) {
      if (this.set(key, values[key], asOfSeq)) changed.push(key);
    }
    for (const [key, row] of [...this.rows]) {
      if (!Object.hasOwn(values, key) && !(row.seq > asOfSeq)) {
        this.rows.delete(key);
        changed.push(key);
      }
    }
    if (changed.length) this.emit(changed);
  }

  dropAfter(lastSeq) {
    const changed = [];
    for (const [key, row] of [...this.rows]) {
      if (row.seq > lastSeq) {
        this.rows.delete(key);
        changed.push(key);
      }
    }
    if (changed.length) this.emit(changed);
  }

  set(key, value, seq) {
    const row = this.rows.get(key);
    if (row !== undefined && !(seq > row.seq)) return false;
    this.rows.set(key, { value, seq });
    return true;
  }

  emit(keys) {
    for (const listener of this.listeners) listener(keys);
  }
}
