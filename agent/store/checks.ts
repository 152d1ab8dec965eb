/**
 * The store's schemas: what a snapshot and a journal line must look like. They are needed
 * only when something must be validated (a snapshot whose bytes are not the ones last written,
 * or journal lines left by a pass that stopped), so store/core.ts can open a store without
 * building them; store/store.ts opens stores with them for every caller that needs no laziness.
 */
import * as z from 'zod';
import { OwnedRecord } from '../../schema/report.js';
import { corrupt } from './errors.js';

export const StoreFile = z.strictObject({
  format: z.literal(1),
  /** Counts snapshots; journal lines carry the epoch of the snapshot they follow. */
  epoch: z.number().int().nonnegative().optional(),
  owned: z.array(OwnedRecord),
  lastApplied: z.strictObject({ commit: z.string(), digest: z.string(), at: z.string() }).nullable(),
  lastContact: z.strictObject({ at: z.string(), commit: z.string() }).nullable(),
  lastError: z.strictObject({ at: z.string(), message: z.string() }).nullable(),
  /** The last report made: its chain position, what it said (for heartbeats) and whether it reached the server. */
  report: z.strictObject({ sequence: z.number().int(), hash: z.string().nullable(), contentHash: z.string().nullable(), at: z.string().nullable(), pushed: z.boolean() }),
  /** Ids of the commands whose watched resources changed and that have not succeeded since (absent in stores from before commands: none). */
  pending: z.array(z.string()).optional(),
});
export type StoreData = z.infer<typeof StoreFile>;

const Entry = z.union([
  z.strictObject({ epoch: z.number().int().nonnegative(), put: OwnedRecord }),
  z.strictObject({ epoch: z.number().int().nonnegative(), drop: z.string() }),
  z.strictObject({ epoch: z.number().int().nonnegative(), pending: z.string() }),
  z.strictObject({ epoch: z.number().int().nonnegative(), cleared: z.string() }),
]);
/** One journal line: a record put or an id dropped, or a command's trigger marked pending or cleared, after the snapshot of epoch `epoch`. */
export type Entry = z.infer<typeof Entry>;

/** Validation of what was read back from disk; each throws the unreadable-store error for `where`. */
export interface StoreChecks {
  snapshot(parsed: unknown, where: string): StoreData;
  entry(parsed: unknown, where: string): Entry;
}

export const storeChecks: StoreChecks = {
  snapshot(parsed, where) {
    const result = StoreFile.safeParse(parsed);
    if (!result.success) throw corrupt(where, result.error.issues[0]?.message ?? 'unexpected shape');
    return result.data;
  },
  entry(parsed, where) {
    const result = Entry.safeParse(parsed);
    if (!result.success) throw corrupt(where, result.error.issues[0]?.message ?? 'unexpected shape');
    return result.data;
  },
};
