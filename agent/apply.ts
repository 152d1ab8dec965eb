/**
 * Carrying out a plan: for each step, record the intent in the store, change the machine,
 * read the resource back, and record it as verified only when the read-back matches.
 * Removals restore what was there before the host took a resource over.
 */
import { resourceId, type Resource } from '../schema/declaration.js';
import type { OwnedRecord, ResourceResult } from '../schema/report.js';
import { messageOf } from './errors.js';
import type { Step } from './plan.js';
import type { Observed, Prior, ResourceContext } from './resources/handler.js';
import { handlerFor, handlerForType } from './resources/index.js';
import type { Store } from './store.js';

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

/** Apply `steps` in order, recording each verified result in `store`. Returns one result line per step. */
export async function applyPlan(steps: Step[], observed: Map<string, Observed>, store: Store, ctx: ResourceContext): Promise<ResourceResult[]> {
  const results: ResourceResult[] = [];
  for (const step of steps) {
    try {
      results.push(await applyStep(step, observed.get(step.id) ?? null, store, ctx));
    } catch (e) {
      results.push({ id: step.id, result: 'failed', error: messageOf(e) });
    }
  }
  return results;
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

function ownedRecord(resource: Resource, prior: Prior, state: OwnedRecord['state'], ctx: ResourceContext): OwnedRecord {
  return { id: resourceId(resource), type: resource.type, resource: { ...resource }, prior, state, at: ctx.now().toISOString() };
}
