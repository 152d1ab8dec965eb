/**
 * Planning is a pure function: from what is declared, what the store says the host owns,
 * and what is on the machine now, it decides what to change, what to leave and what to
 * remove — without touching anything. The host applies the plan; `mesh-cli plan` shows one.
 */
import type { Resource } from '../schema/declaration.js';
import { resourceId } from '../schema/resource-id.js';
import type { OwnedRecord } from '../schema/report.js';

/** What a resource handler read back from the machine: its fields as they are now, or null when it is absent. */
export type Observed = Record<string, unknown> | null;

export type Step =
  | { action: 'keep'; id: string; resource: Resource; adopt: boolean }
  | { action: 'change'; id: string; resource: Resource; changes: string[]; drift: boolean; create: boolean }
  | { action: 'remove'; id: string; record: OwnedRecord };

/** Declared resources in order, then owned resources no longer declared in reverse order of ownership. */
export function plan(desired: Resource[], owned: OwnedRecord[], observed: Map<string, Observed>, diff: (r: Resource, o: Observed) => string[]): Step[] {
  const byId = new Map<string, OwnedRecord>();
  for (const r of owned) if (!byId.has(r.id)) byId.set(r.id, r);
  const steps: Step[] = desired.map((resource) => {
    const id = resourceId(resource);
    const now = observed.get(id) ?? null;
    const record = byId.get(id);
    const changes = diff(resource, now);
    if (changes.length === 0) return { action: 'keep', id, resource, adopt: record?.state !== 'verified' || !sameData(record.resource, resource) };
    const drift = record?.state === 'verified' && sameData(record.resource, resource);
    return { action: 'change', id, resource, changes, drift, create: now === null };
  });
  const declared = new Set(steps.map((s) => s.id));
  const removals = owned.filter((r) => !declared.has(r.id)).reverse();
  return [...steps, ...removals.map((record): Step => ({ action: 'remove', id: record.id, record }))];
}

/** Deep equality of JSON data (what declarations and the store hold): util.isDeepStrictEqual's answer for such values, without its generality. */
export function sameData(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!Object.hasOwn(b, k) || !sameData((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}
