/**
 * The store: the host's record of what it owns, written after each resource is verified
 * (and as an intent before each change, so a crash mid-change is never an orphan). It is
 * rewritten atomically; a store that exists but cannot be read stops the host rather than
 * letting it start from empty and forget what it owns.
 */
import { existsSync, readFileSync } from 'node:fs';
import * as z from 'zod';
import { OwnedRecord } from '../schema/report.js';
import { writeFileAtomic } from './atomic.js';
import { MeshError } from './errors.js';

const StoreFile = z.strictObject({
  format: z.literal(1),
  owned: z.array(OwnedRecord),
  lastApplied: z.strictObject({ commit: z.string(), digest: z.string(), at: z.string() }).nullable(),
  lastContact: z.strictObject({ at: z.string(), commit: z.string() }).nullable(),
  lastError: z.strictObject({ at: z.string(), message: z.string() }).nullable(),
  /** The last report made: its chain position, what it said (for heartbeats) and whether it reached the server. */
  report: z.strictObject({ sequence: z.number().int(), hash: z.string().nullable(), contentHash: z.string().nullable(), at: z.string().nullable(), pushed: z.boolean() }),
});
export type StoreData = z.infer<typeof StoreFile>;

export function emptyStore(): StoreData {
  return { format: 1, owned: [], lastApplied: null, lastContact: null, lastError: null, report: { sequence: 0, hash: null, contentHash: null, at: null, pushed: true } };
}

export class Store {
  private constructor(
    readonly path: string,
    public data: StoreData,
    /** True when no store file existed: a new machine, or one whose store was lost. */
    readonly fresh: boolean,
  ) {}

  /** Open the store at `path`; a missing file is a fresh store, an unreadable one is an error a person must look at. */
  static open(path: string): Store {
    if (!existsSync(path)) return new Store(path, emptyStore(), true);
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (e) {
      throw corrupt(path, e instanceof Error ? e.message : String(e));
    }
    const result = StoreFile.safeParse(parsed);
    if (!result.success) throw corrupt(path, result.error.issues[0]?.message ?? 'unexpected shape');
    return new Store(path, result.data, false);
  }

  /** Write the store durably (temp file, fsync, rename, directory fsync). */
  save(): void {
    writeFileAtomic(this.path, JSON.stringify(this.data, null, 1) + '\n', 0o600);
  }

  owned(id: string): OwnedRecord | undefined {
    return this.data.owned.find((r) => r.id === id);
  }

  /** Insert or replace the record for `record.id`, keeping declared order for new records, and save. */
  put(record: OwnedRecord): void {
    const i = this.data.owned.findIndex((r) => r.id === record.id);
    if (i >= 0) this.data.owned[i] = record;
    else this.data.owned.push(record);
    this.save();
  }

  /** Forget `id` (after its removal was verified) and save. */
  drop(id: string): void {
    this.data.owned = this.data.owned.filter((r) => r.id !== id);
    this.save();
  }
}

function corrupt(path: string, why: string): MeshError {
  return new MeshError(
    'E_STORE_UNREADABLE',
    `the store ${path} cannot be read (${why}). mesh-host will not change anything until a person looks: ` +
      `restore the file from backup, or move it away and re-enrol so the owned set is recovered from the last report`,
    { next: 'human', data: { path } },
  );
}
