/**
 * `--noop`: what a pass would do on this machine, worked out as a pass does (read every declared
 * resource, plan against the store's owned set, pre-flight) and then described instead of done.
 * Nothing is written: not the machine, not the store, not the trust state; no report. Each line
 * says what would change and why, with a unified diff of a file's content (secrets elided as
 * `plan` elides them). An action (a command) says whether it would run: `creates` is looked at
 * and `unless` is run, since it is the declared check (as Puppet's noop runs it), but the command
 * itself never is.
 */
import type { Resource } from '../schema/declaration.js';
import { resourceId } from '../schema/resource-id.js';
import { messageOf } from '../core/errors.js';
import { plan, type Observed, type Step } from '../core/plan.js';
import { safeDiff, SENSITIVE_CHANGE } from '../core/unified-diff.js';
import type { Declaration, LoadOptions, TreeReader } from '../core/declaration/declaration.js';
import { revealSecrets } from './secrets/reveal.js';
import { isSensitive, openSealed } from './store/seal.js';
import { observe } from './apply.js';
import { dependencyOrder, preflight } from './preflight.js';
import { handlerFor } from './resources/index.js';
import { watchedChanges, type ResourceContext } from './resources/handler.js';
import type { Store } from './store/core.js';

/** One resource that a pass would change, remove or run. */
export interface PreviewLine {
  id: string;
  action: 'create' | 'update' | 'remove' | 'restore' | 'release' | 'run' | 'refresh';
  /** What differs, or why it would run. */
  changes: string[];
  /** Declared and owned as it is, and changed on the machine since: a pass would put it back. */
  drift?: boolean;
  /** A file's content: the unified diff from what is there to what is declared. */
  diff?: string[];
}

/** The plan of this machine; `problems` are what would fail (a pass would then apply nothing of those lines, or nothing at all). */
export interface Preview {
  lines: PreviewLine[];
  inSync: number;
  problems: Array<{ id?: string; message: string }>;
}

/** What a pass over `declaration` (loaded from `tree`) would do here: its secrets revealed as a pass reveals them (secrets/reveal.ts), then `preview`. */
export async function previewDeclaration(tree: TreeReader, node: string, opts: LoadOptions, declaration: Declaration, store: Store, ctx: ResourceContext): Promise<Preview> {
  const revealed = await revealSecrets(ctx, tree, node, opts, declaration);
  const closed = revealed.failed.map((l) => ({ id: l.id, message: l.error ?? 'failed' }));
  return preview(revealed.resources, store, revealed.values.length ? { ...ctx, masks: revealed.values } : ctx, closed);
}

/** What a pass over `resources` would do here, given what `store` owns; `closed`: resources that would fail before anything (a secret this node cannot open), left alone. */
export async function preview(resources: Resource[], store: Store, ctx: ResourceContext, closed: Array<{ id: string; message: string }> = []): Promise<Preview> {
  const started = ctx.debug && performance.now();
  const { observed, errors } = await observe(resources, ctx);
  ctx.debug?.({ resources: resources.length, unreadable: errors.size, ms: Math.round(performance.now() - started!) }, 'observed');
  const untouched = new Set(closed.map((c) => c.id));
  openSealed(store.data.owned, resources, store.path);
  const steps = plan(resources, store.data.owned.filter((r) => !untouched.has(r.id)), observed, (r, o) => handlerFor(r).diff(r, o));
  const problems: Preview['problems'] = [...closed, ...[...errors].map(([id, error]) => ({ id, message: `cannot read current state: ${error}` }))];
  problems.push(...preflight(steps, ctx.root).map((p) => ({ id: p.id, message: p.message })));
  const lines: PreviewLine[] = [];
  const changing = new Set(steps.filter((s) => s.action !== 'keep').map((s) => s.id));
  const changingPaths = new Set(steps.flatMap((s) => (s.action === 'change' && 'path' in s.resource ? [s.resource.path] : [])));
  let inSync = 0;
  // In the order a pass would take them: what a resource needs first.
  for (const step of dependencyOrder(steps)) {
    if (errors.has(step.id)) continue;
    if (step.action === 'remove') {
      lines.push(removal(step));
      continue;
    }
    const handler = handlerFor(step.resource);
    if (handler.act) {
      try {
        const line = await wouldAct(step.resource, changing, store, ctx);
        if (line) lines.push(line);
        else inSync++;
      } catch (e) {
        problems.push({ id: step.id, message: messageOf(e) });
      }
      continue;
    }
    if (step.action === 'change') lines.push(change(step, observed.get(step.id) ?? null));
    else inSync++;
    const watched = watchedChanges(handler.watches?.(step.resource) ?? [], changingPaths);
    const says = watched.length > 0 && handler.refresh ? (handler.wouldRefresh ? handler.wouldRefresh(step.resource, watched, ctx, observed.get(step.id) ?? null) : 'a pass would restart it') : null;
    if (says) lines.push({ id: step.id, action: 'refresh', changes: [`${watched.join(', ')} would change: ${says}`] });
  }
  ctx.debug?.({ lines: lines.length, inSync, problems: problems.length, ms: Math.round(performance.now() - started!) }, 'previewed');
  return { lines, inSync, problems };
}

function change(step: Extract<Step, { action: 'change' }>, now: Observed): PreviewLine {
  const line: PreviewLine = { id: step.id, action: step.create ? 'create' : 'update', changes: step.changes, ...(step.drift ? { drift: true } : {}) };
  const r = step.resource;
  if (isSensitive(r)) return { ...line, diff: [SENSITIVE_CHANGE] }; // it read a secret: not a line of it, before or after
  if (r.type !== 'file' || r.content === undefined || r.ensure === 'absent') return line;
  const before = typeof now?.content === 'string' ? Buffer.from(now.content, 'base64') : Buffer.alloc(0);
  const text = before.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(before)) return { ...line, diff: [`«${r.path} is not text now: ${before.length} bytes would be replaced»`] };
  const diff = safeDiff(r.path, text, r.content);
  return diff.length > 0 ? { ...line, diff } : line;
}

function removal(step: Extract<Step, { action: 'remove' }>): PreviewLine {
  const { id, record } = step;
  if (record.state === 'intent') return { id, action: 'remove', changes: ['no longer declared, and its change never completed: it would be undone'] };
  if (record.prior?.known === false) return { id, action: 'release', changes: ['no longer declared: it would be left as it is (what was there before mesh is not known)'] };
  if (record.prior?.existed) return { id, action: 'restore', changes: ['no longer declared: what was there before mesh took it over would be put back'] };
  return { id, action: 'remove', changes: ['no longer declared: it would be removed'] };
}

/** Whether an action would run: a watched resource that would change (or a trigger pending from an earlier pass), else its own guards. */
async function wouldAct(resource: Resource, changing: Set<string>, store: Store, ctx: ResourceContext): Promise<PreviewLine | null> {
  const id = resourceId(resource);
  const handler = handlerFor(resource);
  const watched = (handler.triggeredBy?.(resource) ?? []).filter((w) => changing.has(w));
  const trigger = watched.length > 0 ? `${watched.join(', ')} would change` : store.isPending(id) ? 'a change it watches is pending from an earlier pass' : undefined;
  const why = await handler.wouldAct!(resource, ctx, trigger);
  return why === null ? null : { id, action: 'run', changes: [why] };
}
