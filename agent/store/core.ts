/**
 * The store: the host's record of what it owns, written after each resource is verified
 * (and as an intent before each change, so a crash mid-change is never an orphan). A store
 * that exists but cannot be read stops the host rather than letting it start from empty and
 * forget what it owns.
 *
 * On disk it is a snapshot, store.json (store/snapshot.ts, rewritten atomically by `save`),
 * and a journal, store.json.journal (store/journal.ts): one JSON line per record put or dropped
 * since that snapshot, so that recording a resource costs one short append instead of
 * rewriting every record. Intents (`intend`, all of a pass's at once) and drops are fsynced
 * before they return, because the change after an intent must never be an orphan. A verified record is appended without
 * waiting for the disk: if a power cut loses it, the record is still an intent, and the next
 * pass reads the resource back and verifies it again. Each journal line names the snapshot it
 * follows (`epoch`), so lines already folded into a newer snapshot are never applied twice.
 *
 * Beside the owned records it keeps the commands whose trigger is pending: marked in the same
 * append and sync as the intent of the change that triggers them (so a pass killed after the
 * change still runs the command next time), cleared durably once the command has succeeded.
 */
import type { OwnedRecord } from '../../schema/report.js';
import { crashNow, noFaults, type Faults } from '../fault.js';
import type { StoreChecks } from './checks.js';
import { ChecksNeeded } from './errors.js';
import { Journal, type Entry } from './journal.js';
import { sealRecord } from './seal.js';
import { emptyStore, readSnapshot, writeSnapshot, type StoreData } from './snapshot.js';

export { emptyStore, type StoreData };

export class Store {
  private index = new Map<string, number>();
  private indexed: OwnedRecord[] | null = null;
  /** Given (a pass at log level debug), each save says so: what for, how many records, the new epoch, how long it took. */
  debug?: (fields: Record<string, unknown>, msg: string) => void;

  private constructor(
    readonly path: string,
    public data: StoreData,
    /** True when no store existed: a new machine, or one whose store was lost. */
    readonly fresh: boolean,
    private readonly journal: Journal,
    /** The epoch of the snapshot on disk, kept here so that nothing done to `data` can change which lines follow it. */
    private epoch: number,
    /** The crash test's points (after-change, after-drop, before-save; mid-write of the snapshot). */
    private readonly faults: Faults,
  ) {}

  /**
   * Open the store at `path`; a missing file is a fresh store, an unreadable one is an error a
   * person must look at. Whatever is not exactly as this host last wrote it is validated with
   * `checks`; with none, it throws ChecksNeeded instead (store/store.ts opens with the checks).
   */
  static open(path: string, checks: StoreChecks | null, faults: Faults = noFaults): Store {
    const snapshot = readSnapshot(path, checks);
    const journal = new Journal(`${path}.journal`);
    const epoch = snapshot?.epoch ?? 0;
    const replay = journal.entries(checks).filter((e) => e.epoch === epoch);
    // Without a snapshot, lines of epoch 0 are a first pass that stopped before its first save: not a lost store.
    const store = new Store(path, snapshot ?? emptyStore(), snapshot === null && replay.length === 0, journal, epoch, faults);
    for (const entry of replay) store.applyEntry(entry);
    return store;
  }

  /** `open`, loading the schemas (with `loadChecks`) only when something must be validated: a store left as written needs none. */
  static async openLoading(path: string, loadChecks: () => Promise<StoreChecks>, faults: Faults = noFaults): Promise<Store> {
    try {
      return Store.open(path, null, faults);
    } catch (e) {
      if (!(e instanceof ChecksNeeded)) throw e;
    }
    return Store.open(path, await loadChecks(), faults);
  }

  /** Write the store durably, folding the journal into a new snapshot; `why` is what the debug line says it was for. */
  save(why = 'records'): void {
    if (this.faults.due('before-save')) crashNow();
    const started = this.debug && performance.now();
    this.epoch += 1;
    writeSnapshot(this.path, { ...this.data, owned: this.data.owned.map((r) => sealRecord(r, this.path)), epoch: this.epoch }, this.faults);
    this.journal.clear();
    this.debug?.({ why, records: this.data.owned.length, epoch: this.epoch, ms: Math.round(performance.now() - started!) }, 'store written');
  }

  /** Whether the journal holds records not yet in the snapshot (a no-op pass adds none, and need not save). */
  journaled(): boolean {
    return this.journal.appended;
  }

  owned(id: string): OwnedRecord | undefined {
    const i = this.find(id);
    return i < 0 ? undefined : this.data.owned[i];
  }

  /** Insert or replace the record for `record.id`, keeping declared order for new records, and record it. */
  put(record: OwnedRecord): void {
    this.journal.add({ epoch: this.epoch, put: sealRecord(record, this.path) }, record.state === 'intent');
    this.applyEntry({ epoch: 0, put: record });
    if (record.state !== 'intent' && this.faults.due('after-change')) crashNow();
  }

  /**
   * Record the intents of the changes a pass is about to make, and the commands those changes
   * trigger (`pending`): one append and one sync for all of them, on disk when this returns.
   */
  intend(records: OwnedRecord[], pending: string[] = []): void {
    const marks = pending.filter((id) => !this.isPending(id));
    if (records.length === 0 && marks.length === 0) return;
    const entries: Entry[] = [...marks.map((id) => ({ epoch: this.epoch, pending: id })), ...records.map((put) => ({ epoch: this.epoch, put }))];
    this.journal.addAll(entries.map((e) => ('put' in e ? { ...e, put: sealRecord(e.put, this.path) } : e)), true);
    for (const entry of entries) this.applyEntry(entry);
  }

  /** Whether the command `id` has a trigger that has not been carried out yet. */
  isPending(id: string): boolean {
    return this.data.pending?.includes(id) ?? false;
  }

  /** Every command with a pending trigger. */
  pendingIds(): string[] {
    return [...(this.data.pending ?? [])];
  }

  /** Clear `id`'s pending trigger (it succeeded, or is no longer declared), durably. */
  clearPending(id: string): void {
    if (!this.isPending(id)) return;
    this.journal.add({ epoch: this.epoch, cleared: id }, true);
    this.applyEntry({ epoch: 0, cleared: id });
  }

  /** Forget `id` (after its removal was verified) and record it. */
  drop(id: string): void {
    this.journal.add({ epoch: this.epoch, drop: id }, true);
    this.applyEntry({ epoch: 0, drop: id });
    if (this.faults.due('after-drop')) crashNow();
  }

  private applyEntry(entry: Entry): void {
    if ('pending' in entry || 'cleared' in entry) return this.applyMark(entry);
    const id = 'put' in entry ? entry.put.id : entry.drop;
    const i = this.find(id);
    if ('put' in entry) {
      if (i >= 0) this.data.owned[i] = entry.put;
      else this.index.set(id, this.data.owned.push(entry.put) - 1);
    } else if (i >= 0) {
      this.data.owned.splice(i, 1);
      this.indexed = null;
    }
  }

  /** A pending mark set or cleared; the field is left out while nothing is pending, so stores without commands read as before. */
  private applyMark(entry: { pending: string } | { cleared: string }): void {
    const pending = (this.data.pending ?? []).filter((id) => id !== ('pending' in entry ? entry.pending : entry.cleared));
    if ('pending' in entry) pending.push(entry.pending);
    if (pending.length > 0) this.data.pending = pending;
    else delete this.data.pending;
  }

  /** Position of `id` in the owned list; the index is rebuilt whenever the list was changed behind its back. */
  private find(id: string): number {
    const owned = this.data.owned;
    if (this.indexed !== owned || this.index.size !== owned.length) this.reindex();
    const i = this.index.get(id);
    if (i === undefined || owned[i]?.id === id) return i ?? -1;
    this.reindex();
    return this.index.get(id) ?? -1;
  }

  private reindex(): void {
    this.index = new Map();
    this.data.owned.forEach((r, i) => this.index.has(r.id) || this.index.set(r.id, i));
    this.indexed = this.data.owned;
  }
}
