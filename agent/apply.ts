/**
 * Carrying out a plan: pre-flight the whole declaration (bad input applies nothing), then for
 * each step record the intent in the store, change the machine, read the resource back, and
 * record it as verified only when the read-back matches. Removals restore what was there
 * before the host took a resource over. A part the host cannot check here (a service's running
 * state without a running systemd) makes the line `unverified` with the reason, never a success.
 */
import { resourceId, type Resource } from '../schema/declaration.js';
import type { OwnedRecord, ResourceResult } from '../schema/report.js';
import { messageOf } from './errors.js';
import type { Step } from './plan.js';
import { dependencyOrder, preflight, type PreflightProblem } from './preflight.js';
import type { Handler, Observed, Prior, ResourceContext } from './resources/handler.js';
import { handlerFor, handlerForType } from './resources/index.js';
import type { Store } from './store.js';
import { refuseRejectedHost, smokeTestHost } from './upgrade.js';

/** What a handler may offer beyond the Handler seam; the engine uses each part when it is there. */
export interface HandlerExtras<R extends Resource = Resource> {
  /** Why part of `r` cannot be verified on this machine; the line is then `unverified` with this reason. */
  unverifiable?(r: R, ctx: ResourceContext): string | undefined;
  /** Machine paths whose change earlier in this pass calls for `refresh` (a service's restartOn). */
  watches?(r: R): string[];
  /** React to changed watched paths (restart a service): what was done, and why it is unverified when it could not be checked. */
  refresh?(r: R, ctx: ResourceContext, changed: string[]): Promise<{ change: string; unverified?: string }>;
}

/** Read the current state of every declared resource. A read that fails is recorded as the error it is. */
export async function observe(desired: Resource[], ctx: ResourceContext): Promise<{ observed: Map<string, Observed>; errors: Map<string, string> }> {
  const observed = new Map<string, Observed>();
  const errors = new Map<string, string>();
  for (const r of desired) {
    try {
      observed.set(resourceId(r), await handlerFor(r).read(r, ctx));
    } catch (e) {
      errors.set(resourceId(r), messageOf(e));
    }
  }
  return { observed, errors };
}

/** Pre-flight `steps`, then apply them in dependency order, recording each verified result in `store`. One result line per step. */
export async function applyPlan(steps: Step[], observed: Map<string, Observed>, store: Store, ctx: ResourceContext): Promise<ResourceResult[]> {
  const problems = preflight(steps, ctx.root);
  if (problems.length > 0) return refuse(steps, problems);
  const changedPaths = new Set<string>();
  const results: ResourceResult[] = [];
  for (const step of dependencyOrder(steps)) {
    let line: ResourceResult;
    try {
      refuseRejectedHost(step, ctx); // the host's own package: see upgrade.ts
      line = await applyStep(step, observed.get(step.id) ?? null, store, ctx);
      line = await smokeTestHost(step, line, observed.get(step.id) ?? null, ctx);
      if (step.action !== 'remove') line = await settle(step.resource, line, changedPaths, ctx);
    } catch (e) {
      line = { id: step.id, result: 'failed', ...(step.action === 'change' ? { changes: step.changes } : {}), error: messageOf(e) };
    }
    if (step.action !== 'remove' && 'path' in step.resource && (line.result === 'created' || line.result === 'updated')) changedPaths.add(step.resource.path);
    results.push(line);
  }
  return results;
}

/** A declaration that fails pre-flight changes nothing: its problems fail their lines and every other line is skipped. */
function refuse(steps: Step[], problems: PreflightProblem[]): ResourceResult[] {
  return steps.map((step) => {
    const own = problems.filter((p) => p.id === step.id).map((p) => p.message);
    if (own.length > 0) return { id: step.id, result: 'failed', error: own.join('; ') };
    return { id: step.id, result: 'skipped', error: `nothing applied: pre-flight found ${problems.length} problem(s) in this declaration` };
  });
}

async function applyStep(step: Step, now: Observed, store: Store, ctx: ResourceContext): Promise<ResourceResult> {
  const record = store.owned(step.id);
  if (step.action === 'remove') {
    const note = await handlerForType(step.record.type).remove(step.record, ctx);
    store.drop(step.id);
    return { id: step.id, result: step.record.prior?.existed ? 'restored' : 'removed', ...(note ? { changes: [note] } : {}) };
  }
  const handler = handlerFor(step.resource);
  if (step.action === 'keep') {
    if (step.adopt) store.put(ownedRecord(step.resource, record?.prior ?? (await handler.prior(step.resource, now, ctx)), 'verified', ctx));
    return { id: step.id, result: 'unchanged' };
  }
  // Intent first: if the host dies during the change, the next pass still knows it owns this.
  const prior = record?.prior ?? (await handler.prior(step.resource, now, ctx));
  store.put(ownedRecord(step.resource, prior, 'intent', ctx));
  await handler.apply(step.resource, now, ctx);
  const after = await handler.read(step.resource, ctx);
  const left = handler.diff(step.resource, after);
  if (left.length > 0) return { id: step.id, result: 'failed', changes: step.changes, error: `read back after the change still differs: ${left.join('; ')}` };
  store.put(ownedRecord(step.resource, prior, 'verified', ctx));
  return { id: step.id, result: step.create ? 'created' : 'updated', changes: step.changes, ...(step.drift ? { drift: true } : {}) };
}

/** After a declared resource's own step: refresh it when a path it watches changed, and mark what cannot be verified here. */
async function settle(resource: Resource, line: ResourceResult, changedPaths: Set<string>, ctx: ResourceContext): Promise<ResourceResult> {
  if (line.result === 'failed') return line;
  const handler = handlerFor(resource) as Handler & HandlerExtras;
  const changes = [...(line.changes ?? [])];
  const reasons: string[] = [];
  const unverifiable = handler.unverifiable?.(resource, ctx);
  if (unverifiable) reasons.push(unverifiable);
  const changed = (handler.watches?.(resource) ?? []).filter((p) => changedPaths.has(p));
  if (changed.length > 0 && handler.refresh) {
    const refreshed = await handler.refresh(resource, ctx, changed);
    changes.push(refreshed.change);
    if (refreshed.unverified) reasons.push(refreshed.unverified);
  }
  const { error: _none, ...rest } = line;
  if (reasons.length > 0) return { ...rest, result: 'unverified', ...(changes.length ? { changes } : {}), error: reasons.join('; ') };
  if (changes.length === (line.changes?.length ?? 0)) return line;
  return { ...rest, result: line.result === 'unchanged' ? 'updated' : line.result, changes };
}

function ownedRecord(resource: Resource, prior: Prior, state: OwnedRecord['state'], ctx: ResourceContext): OwnedRecord {
  return { id: resourceId(resource), type: resource.type, resource: { ...resource }, prior, state, at: ctx.now().toISOString() };
}
