/**
 * The store's snapshot, store.json: every record and the host's bookkeeping, rewritten
 * atomically. Beside it, store.json.sum holds the sha256 of the bytes last written: a snapshot
 * that still has exactly those bytes is not validated again (that is a tenth of a pass that
 * changes nothing), while any other snapshot, edited or damaged, is validated in full by the
 * schemas in store/checks.ts.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { writeFileAtomic } from '../atomic.js';
import type { Faults } from '../fault.js';
import type { StoreChecks, StoreData } from './checks.js';
import { ChecksNeeded, corrupt } from './errors.js';

export type { StoreData };

/** The store of a machine the host has never recorded anything on. */
export function emptyStore(): StoreData {
  return { format: 1, owned: [], lastApplied: null, lastContact: null, lastError: null, report: { sequence: 0, hash: null, contentHash: null, at: null, pushed: true } };
}

/**
 * The snapshot at `path`, or null when there is none; one that cannot be read is an error a
 * person must look at. Without `checks`, a snapshot that needs validating throws ChecksNeeded.
 */
export function readSnapshot(path: string, checks: StoreChecks | null): StoreData | null {
  if (!existsSync(path)) return null;
  // As bytes, decoded once, the sum taken of the bytes (read, sum and parse of a 400 KB store: ~12 ms as a string, ~9 as bytes).
  const bytes = readFileSync(path);
  const parsed = parseJson(bytes.toString('utf8'), path);
  if (readSum(path) === sumOf(bytes)) return parsed as StoreData;
  if (!checks) throw new ChecksNeeded(path);
  return checks.snapshot(parsed, path);
}

/** Write `data` durably as the snapshot at `path` (temp file, fsync, rename, directory fsync), then its sum. */
export function writeSnapshot(path: string, data: StoreData, faults: Faults): void {
  // Encoded once, for the write and the sum (writeFileSync writing the 400 KB string itself: ~3.7 ms; the bytes: ~0.6).
  const bytes = Buffer.from(JSON.stringify(data, null, 1) + '\n');
  writeFileAtomic(path, bytes, 0o600, { faults });
  try {
    writeFileSync(`${path}.sum`, sumOf(bytes)); // no fsync: a sum lost or torn only means a full validation
  } catch {
    // the same
  }
}

const sumOf = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

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
