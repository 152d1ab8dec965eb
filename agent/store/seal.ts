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
import type { Resource } from '../../schema/declaration.js';
import type { OwnedRecord } from '../../schema/report.js';
import { resourceId } from '../../schema/resource-id.js';
import { sameData } from '../../core/plan.js';
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
  return { ...record, resource: sealedBodies(record.resource, hmacKey(storePath)), prior: sealedPrior(record.prior) };
}

/** `resource` with its bodies (where secrets are read: render-with.ts) replaced by their HMACs under `key`. */
function sealedBodies(resource: Record<string, unknown>, key: Buffer): Record<string, unknown> {
  const out: Record<string, unknown> = { ...resource };
  for (const field of BODIES) if (out[field] !== undefined) out[field] = hmacOf(key, typeof out[field] === 'string' ? out[field] : JSON.stringify(out[field]));
  return out;
}

/**
 * The owned records of the `declared` resources that read a secret, as the store read them from
 * its files (bodies sealed), given their bodies back, in memory, where the declared ones seal to
 * the same HMACs: the plan then sees an unchanged declaration as unchanged (a change by hand as
 * drift, a resource kept as it is not adopted again), as it does for the records this process
 * wrote itself. Writes nothing, not even a key: without one nothing was sealed.
 */
export function openSealed(owned: OwnedRecord[], declared: Resource[], storePath: string): void {
  const sensitive = new Map(declared.filter(isSensitive).map((r) => [resourceId(r), r]));
  if (sensitive.size === 0) return;
  let key: Buffer | null | undefined;
  for (const record of owned) {
    const r = sensitive.get(record.id);
    if (!r || !isSealed(record.resource)) continue;
    key ??= existingKey(storePath);
    if (key === null) return;
    if (sameData(sealedBodies(r as Record<string, unknown>, key), record.resource)) record.resource = { ...(r as Record<string, unknown>) };
  }
}

/** Whether some body of `resource` is an HMAC: as the store's files keep a resource that read a secret. */
function isSealed(resource: Record<string, unknown>): boolean {
  return [...BODIES].some((field) => typeof resource[field] === 'string' && (resource[field] as string).startsWith('hmac-sha256:'));
}

function existingKey(storePath: string): Buffer | null {
  try {
    const key = readFileSync(hmacKeyBeside(storePath));
    return key.length === 32 ? key : null;
  } catch {
    return null;
  }
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
  const existing = existingKey(storePath);
  if (existing) return existing;
  const key = randomBytes(32);
  writeFileAtomic(hmacKeyBeside(storePath), key, 0o600);
  return key;
}
