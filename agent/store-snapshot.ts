/**
 * The store's snapshot, store.json: every record and the host's bookkeeping, rewritten
 * atomically. Beside it, store.json.sum holds the sha256 of the bytes last written: a snapshot
 * that still has exactly those bytes is not validated again (that is a tenth of a pass that
 * changes nothing), while any other snapshot, edited or damaged, is validated in full.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as z from 'zod';
import { OwnedRecord } from '../schema/report.js';
import { writeFileAtomic } from './atomic.js';
import { MeshError } from './errors.js';

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
});
export type StoreData = z.infer<typeof StoreFile>;

/** The store of a machine the host has never recorded anything on. */
export function emptyStore(): StoreData {
  return { format: 1, owned: [], lastApplied: null, lastContact: null, lastError: null, report: { sequence: 0, hash: null, contentHash: null, at: null, pushed: true } };
}

/** The snapshot at `path`, or null when there is none; one that cannot be read is an error a person must look at. */
export function readSnapshot(path: string): StoreData | null {
  if (!existsSync(path)) return null;
  const text = readFileSync(path, 'utf8');
  const parsed = parseJson(text, path);
  if (readSum(path) === sumOf(text)) return parsed as StoreData;
  const result = StoreFile.safeParse(parsed);
  if (!result.success) throw corrupt(path, result.error.issues[0]?.message ?? 'unexpected shape');
  return result.data;
}

/** Write `data` durably as the snapshot at `path` (temp file, fsync, rename, directory fsync), then its sum. */
export function writeSnapshot(path: string, data: StoreData): void {
  const text = JSON.stringify(data, null, 1) + '\n';
  writeFileAtomic(path, text, 0o600);
  try {
    writeFileSync(`${path}.sum`, sumOf(text)); // no fsync: a sum lost or torn only means a full validation
  } catch {
    // the same
  }
}

const sumOf = (text: string) => createHash('sha256').update(text).digest('hex');

function readSum(path: string): string | null {
  try {
    return readFileSync(`${path}.sum`, 'utf8');
  } catch {
    return null;
  }
}

/** JSON.parse, with a parse error reported as an unreadable store at `where`. */
export function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw corrupt(where, e instanceof Error ? e.message : String(e));
  }
}

/** The error for a store that exists but cannot be read: the host changes nothing until a person acts. */
export function corrupt(path: string, why: string): MeshError {
  return new MeshError(
    'E_STORE_UNREADABLE',
    `the store ${path} cannot be read (${why}). mesh-host will not change anything until a person looks: ` +
      `restore the file from backup, or move it away and re-enrol so the owned set is recovered from the last report`,
    { next: 'human', data: { path } },
  );
}
