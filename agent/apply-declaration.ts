/**
 * load → reveal → observe → plan → apply: one pass over a declaration, the part of a reconcile pass
 * (reconcile.ts) that `mesh-host apply --bundle` also runs. Kept apart from the loop so that a
 * one-off `apply` does not load git, trust and reports.
 */
import type { Resource } from '../schema/declaration.js';
import { resourceId } from '../schema/resource-id.js';
import type { ResourceResult } from '../schema/report.js';
import { applyPlan, observe } from './apply.js';
import { loadDeclarationWith, type LoadOptions, type TreeReader } from '../core/declaration/declaration.js';
import { plan, type Step } from '../core/plan.js';
import type { ReportBody } from './report.js';
import { handlerFor } from './resources/index.js';
import type { Debug, ResourceContext } from './resources/handler.js';
import type { Store } from './store/core.js';
import { openSealed } from './store/seal.js';
import { revealSecrets } from './secrets/reveal.js';
import { KEEP_DAYS, prunePurged } from './purged.js';

/** load → observe → plan → apply against `tree`; the result becomes the body of the report. */
export async function applyDeclaration(host: { config: { node: string }; store: Store; ctx: ResourceContext }, tree: TreeReader, commit: string | null, opts: LoadOptions): Promise<ReportBody> {
  const debug = host.ctx.debug;
  const lap = debug && laps();
  const loaded = await loadDeclarationWith(tree, host.config.node, opts, host.ctx.load.parser);
  const facts = opts.facts;
  if (!loaded.ok) {
    debug?.({ commit, problems: loaded.problems.length, ms: lap!() }, 'the declaration does not validate: nothing of it is applied');
    const errors = loaded.problems.map((p) => ({ code: 'E_INVALID', ...p }));
    return { kind: 'reconcile', commit, digest: null, outcome: 'failed', errors, resources: [], facts };
  }
  const { resources: declared, digest } = loaded.declaration;
  debug?.({ commit, digest, resources: declared.length, files: loaded.declaration.files.length, ms: lap!() }, 'declaration loaded');
  // Resources that read a secret, rendered with its value; one that reads a secret this node cannot open fails, and nothing of it is applied or removed.
  const { resources, failed: closed, values } = await revealSecrets(host.ctx, tree, host.config.node, opts, loaded.declaration);
  const ctx = values.length > 0 ? { ...host.ctx, masks: values } : host.ctx;
  const untouched = new Set(closed.map((l) => l.id));
  openSealed(host.store.data.owned, resources, host.store.path);
  const { observed, errors: readErrors } = await observe(resources, ctx);
  debug?.({ resources: resources.length, unreadable: readErrors.size, ms: lap!() }, 'observed');
  const steps = plan(resources, host.store.data.owned.filter((r) => !untouched.has(r.id)), observed, (r, o) => handlerFor(r).diff(r, o));
  if (debug) planned(debug, steps);
  const releases = steps.filter(isRelease);
  const results = await applyPlan(steps.filter((s) => !readErrors.has(s.id) && !isRelease(s)), observed, host.store, ctx);
  const applyMs = lap?.();
  results.push(...releases.map((s) => release(host.store, s.id)), ...closed);
  dropUndeclaredTriggers(host.store, declared);
  const pruned = prunePurged(ctx.root, ctx.now());
  if (pruned.length > 0) debug?.({ sets: pruned }, `purged files older than ${KEEP_DAYS} days removed`);
  results.push(...[...readErrors].map(([id, error]) => ({ id, result: 'failed' as const, error: `cannot read current state: ${error}` })));
  const failed = results.filter((r) => r.result === 'failed').length;
  const counts = { changed: results.filter(isChange).length, drift: results.filter((r) => r.drift).length, failed, unchanged: results.filter((r) => r.result === 'unchanged').length };
  const outcome = failed > 0 ? 'failed' : results.some((r) => r.result === 'unverified') ? 'unverified' : 'applied';
  debug?.({ outcome, ...counts, applyMs, ms: lap!.total() }, 'declaration applied');
  return { kind: 'reconcile', commit, digest, outcome, errors: [], resources: results, counts, facts };
}

/** Whether a line changed the machine: an unverified check is not a change, unless something was done with it. */
function isChange(line: ResourceResult): boolean {
  if (line.result === 'unverified') return (line.changes?.length ?? 0) > 0;
  return !['unchanged', 'failed', 'skipped', 'dropped'].includes(line.result);
}

/** A pending trigger of an action (a command) that is no longer declared is forgotten: un-declaring an action runs nothing. */
function dropUndeclaredTriggers(store: Store, resources: Resource[]): void {
  const pending = store.pendingIds();
  if (pending.length === 0) return;
  const actions = new Set(resources.filter((r) => handlerFor(r).act).map(resourceId));
  for (const id of pending) if (!actions.has(id)) store.clearPending(id);
}

/** A removal of a resource whose prior state is not known (recovered from a report): removing it could destroy what was there. */
function isRelease(step: Step): boolean {
  return step.action === 'remove' && step.record.prior?.known === false;
}

function release(store: Store, id: string): ResourceResult {
  store.drop(id);
  return { id, result: 'released', changes: ['left as it is: it existed before mesh took it over, and the store it was recovered from held no copy of what was there'] };
}

/** At level debug: the plan's size by action, then each step that changes something, with what it changes. */
function planned(debug: Debug, steps: Step[]): void {
  const by: Record<Step['action'], number> = { change: 0, keep: 0, remove: 0 };
  for (const step of steps) by[step.action]++;
  debug({ ...by, adopt: steps.filter((s) => s.action === 'keep' && s.adopt).length }, 'planned');
  for (const step of steps) {
    if (step.action === 'change') debug({ id: step.id, action: step.create ? 'create' : 'update', changes: step.changes, ...(step.drift ? { drift: true } : {}) }, 'to change');
    else if (step.action === 'remove') debug({ id: step.id, action: isRelease(step) ? 'release' : step.record.prior?.existed ? 'restore' : 'remove' }, 'to remove');
  }
}

/** Milliseconds since the last call (or the start), and since the start (`total`). */
function laps(): (() => number) & { total(): number } {
  const start = performance.now();
  let last = start;
  const lap = () => {
    const now = performance.now();
    const ms = Math.round(now - last);
    last = now;
    return ms;
  };
  return Object.assign(lap, { total: () => Math.round(performance.now() - start) });
}
