/**
 * A resource that read a secret is applied with the secret's value, but never written down with
 * it: wherever the store keeps it, its bodies (a file's content) are replaced by an HMAC-SHA256
 * keyed with a random key that only this node holds (secrets-hmac.key in the state folder, 0600).
 * A plain hash would not do: a short password's hash can be searched for. What was in such a
 * file before mesh took it over is not kept either (it may be the same value, put there by hand):
 * un-declaring the resource then leaves the file as it is. The mark travels with
 * the resource object through the pass (a symbol: JSON never writes it), so the store, and only
 * the store's files, need to know.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { BODIES } from '../../core/declaration/bodies.js';
import type { OwnedRecord } from '../../schema/report.js';
import { writeFileAtomic } from '../atomic.js';
import { hmacKeyBeside } from '../paths.js';

const SENSITIVE = Symbol('mesh.sensitive');

/** `resource`, marked as having read a secret (the mark is kept by spreads, never by JSON). */
export function markSensitive<R extends object>(resource: R): R {
  Object.defineProperty(resource, SENSITIVE, { value: true, enumerable: true });
  return resource;
}

/** Whether `resource` read a secret. */
export function isSensitive(resource: object): boolean {
  return (resource as Record<symbol, unknown>)[SENSITIVE] === true;
}

/** `record` as the store's files may hold it: a sensitive resource's bodies replaced by their HMACs. */
export function sealRecord(record: OwnedRecord, storePath: string): OwnedRecord {
  if (!isSensitive(record.resource)) return record;
  const key = hmacKey(storePath);
  const resource: Record<string, unknown> = { ...record.resource };
  // Secrets are read in bodies only (render-with.ts).
  for (const field of BODIES) if (resource[field] !== undefined) resource[field] = hmacOf(key, typeof resource[field] === 'string' ? resource[field] : JSON.stringify(resource[field]));
  return { ...record, resource, prior: sealedPrior(record.prior) };
}

/**
 * What was there before may be the same value (put there by hand): not kept. A file's content
 * goes with the whole prior state (un-declaring it then leaves the file as it is); a user's
 * password hash alone (un-declaring puts back its other fields and leaves its password).
 */
function sealedPrior(prior: OwnedRecord['prior']): OwnedRecord['prior'] {
  const state = prior?.existed && typeof prior.state === 'object' && prior.state !== null ? (prior.state as Record<string, unknown>) : null;
  if (state === null) return prior;
  if ('content' in state) return { existed: true, known: false };
  if ('password' in state) {
    const { password: _password, ...rest } = state;
    return { ...prior, state: rest };
  }
  return prior;
}

/** `hmac-sha256:<hex>` of `text` under `key`. */
export function hmacOf(key: Buffer, text: string): string {
  return 'hmac-sha256:' + createHmac('sha256', key).update(text).digest('hex');
}

/** The node's HMAC key beside the store at `storePath`, made (32 random bytes, 0600) the first time one is needed. */
export function hmacKey(storePath: string): Buffer {
  const path = hmacKeyBeside(storePath);
  try {
    const key = readFileSync(path);
    if (key.length === 32) return key;
  } catch {
    // none yet
  }
  const key = randomBytes(32);
  writeFileAtomic(path, key, 0o600);
  return key;
}
