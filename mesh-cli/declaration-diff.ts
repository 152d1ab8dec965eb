/**
 * What changes on one node between two declarations, resource by resource and field by
 * field, computed by the host's own planner (agent/plan.ts): the base declaration plays the
 * part of what the host owns and observes, the head the part of what is declared. Pure.
 * This belongs in agent/plan.ts; it lives here until that file's owner takes it.
 */
import { isDeepStrictEqual } from 'node:util';
import { plan } from '../core/plan.js';
import type { Resource } from '../schema/declaration.js';
import { resourceId } from '../schema/resource-id.js';
import { dropInDir, unitFile } from '../core/declaration/unit-file.js';
import type { OwnedRecord } from '../schema/report.js';
import { safeDiff, SENSITIVE_CHANGE } from '../core/unified-diff.js';
import { BODIES } from '../core/declaration/bodies.js';

/** One field of a resource that changes. */
export interface FieldChange {
  field: string;
  /** Absent when the field was not set before. */
  from?: unknown;
  /** Absent when the field is no longer set. */
  to?: unknown;
}

/** One resource added, changed or removed on a node. */
export interface ResourceChange {
  action: 'add' | 'change' | 'remove';
  id: string;
  /** Changed fields (for `add`, every field set); `content` and `password` appear here without their values. */
  fields: FieldChange[];
  /** Unified diff of file content, secrets elided; absent when content did not change. For a resource that read a secret, only "changed (sensitive)". */
  diff?: string[];
  /** The resource read a secret (at base or head): its bodies are never shown. */
  sensitive?: boolean;
}

/** A command or service that the changes set off on the node, as a pass that makes them would. */
export interface Trigger {
  id: string;
  /**
   * A command runs (its onChange names a changed resource); a service restarts (its restartOn holds
   * a changed path), reloads (`reload-service`: its reloadOn does, and its restartOn not), or, when
   * only its declared unit file changed, has systemd read it again (`reload`: a daemon-reload).
   */
  action: 'run' | 'restart' | 'reload-service' | 'reload';
  /** The changed resources that set it off. */
  by: string[];
}

/** Everything that changes on one node. */
export interface DeclarationDiff {
  changes: ResourceChange[];
  /** True when the same resources are declared in another order (the host applies them in order). */
  reordered: boolean;
  /** What the changes set off; absent when nothing. */
  triggers?: Trigger[];
}

/** The changes that take a node from `base` to `head`; `sensitive`: ids of the resources that read a secret on either side. */
export function diffDeclarations(base: Resource[], head: Resource[], sensitive: ReadonlySet<string> = new Set()): DeclarationDiff {
  const owned: OwnedRecord[] = base.map((r) => ({ id: resourceId(r), type: r.type, resource: r, prior: null, state: 'verified', at: '' }));
  const observed = new Map(base.map((r) => [resourceId(r), r as Record<string, unknown>]));
  const steps = plan(head, owned, observed, (r, o) => (o === null ? ['absent'] : fieldChanges(o as Resource, r).map((f) => f.field)));
  const changes: ResourceChange[] = [];
  for (const step of steps) {
    if (step.action === 'keep') continue;
    if (step.action === 'remove') {
      changes.push({ action: 'remove', id: step.id, fields: [] });
      continue;
    }
    const before = (observed.get(step.id) ?? null) as Resource | null;
    // The fields a secret may be read in (BODIES) are shown without their values for a resource that read one.
    if (sensitive.has(step.id)) {
      const fields = fieldChanges(before, step.resource).map((f) => (BODIES.has(f.field) ? { field: f.field } : f));
      changes.push({ action: step.create ? 'add' : 'change', id: step.id, fields, diff: [SENSITIVE_CHANGE], sensitive: true });
      continue;
    }
    const diff = contentDiff(before, step.resource);
    changes.push({ action: step.create ? 'add' : 'change', id: step.id, fields: fieldChanges(before, step.resource), ...(diff.length ? { diff } : {}) });
  }
  const order = (rs: Resource[]) => rs.map(resourceId);
  const reordered = changes.length === 0 && !isDeepStrictEqual(order(base), order(head));
  const triggers = triggersOf(head, changes);
  return { changes, reordered, ...(triggers.length ? { triggers } : {}) };
}

/**
 * The commands and services of `head` that `changes` set off, for a machine that held the base
 * declaration: a command whose onChange names a resource added or changed, a service whose
 * restartOn or reloadOn holds the path of one (or whose declared unit file or drop-in is one: it is read again, as the host does). A command's `creates` and `unless` depend on the machine, and
 * are not guessed at here.
 */
function triggersOf(head: Resource[], changes: ResourceChange[]): Trigger[] {
  const changed = new Set(changes.filter((c) => c.action !== 'remove').map((c) => c.id));
  if (changed.size === 0) return [];
  const pathOf = new Map(head.flatMap((r) => ('path' in r ? [[resourceId(r), r.path] as const] : [])));
  const triggers: Trigger[] = [];
  for (const r of head) {
    if (r.type === 'command') {
      const by = (r.onChange ?? []).filter((id) => changed.has(id));
      if (by.length) triggers.push({ id: resourceId(r), action: 'run', by });
    } else if (r.type === 'service') {
      const among = (paths: string[] | undefined) => [...changed].filter((id) => paths?.includes(pathOf.get(id) ?? ''));
      const by = among(r.restartOn);
      const reloadBy = among(r.reloadOn);
      const unit = [...changed].filter((id) => pathOf.get(id) === unitFile(r.name) || pathOf.get(id)?.startsWith(dropInDir(r.name)));
      if (by.length) triggers.push({ id: resourceId(r), action: 'restart', by });
      else if (reloadBy.length) triggers.push({ id: resourceId(r), action: 'reload-service', by: reloadBy });
      else if (unit.length) triggers.push({ id: resourceId(r), action: 'reload', by: unit });
    }
  }
  return triggers;
}

/** Every field that differs from `before` (null: the resource is new) to `after`, except its type and identity. */
export function fieldChanges(before: Resource | null, after: Resource): FieldChange[] {
  const a = (before ?? {}) as Record<string, unknown>;
  const b = after as Record<string, unknown>;
  const identity = 'path' in after ? 'path' : 'name';
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => k !== 'type' && k !== identity);
  return keys
    .filter((k) => !isDeepStrictEqual(a[k], b[k]))
    .map((field) => (VALUELESS.has(field) ? { field } : { field, ...(field in a ? { from: a[field] } : {}), ...(field in b ? { to: b[field] } : {}) }));
}

/** Fields whose value a plan never shows: a file's content (its diff does, secrets elided) and a user's password hash. */
const VALUELESS: ReadonlySet<string> = new Set(['content', 'password']);

function contentDiff(before: Resource | null, after: Resource): string[] {
  const old = before?.type === 'file' ? (before.content ?? '') : '';
  const now = after.type === 'file' ? (after.content ?? '') : '';
  return after.type === 'file' ? safeDiff(after.path, old, now) : [];
}
