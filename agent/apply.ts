/**
 * Carrying out a plan: pre-flight the whole declaration (bad input applies nothing), record the
 * intent of every change in the store (durably, before anything changes), then for each step
 * change the machine, read the resource back, and record it as verified only when the
 * read-back matches. Removals restore what was there before the host took a resource over.
 * A part the host cannot check here (a service's running state without a running systemd)
 * makes the line `unverified` with the reason, never a success. The engine knows no resource
 * type by name: what a type adds (its needs, its change hooks, what it cannot verify, what it
 * watches) it says through its handler (resources/handler.ts).
 *
 * An action (a handler with `act`, a command) is never owned: it is taken in its declared
 * place. A change of a resource it watches (`triggeredBy`) marks it pending in the same durable
 * write as the change's intent; it is handed the trigger once all it watches applied cleanly in
 * the pass, and the mark is cleared only when it succeeds, so a pass killed between the change
 * and the action, or an action that failed, acts on the next pass.
 */
import type { Resource } from '../schema/declaration.js';
import { resourceId } from '../schema/resource-id.js';
import type { OwnedRecord, ResourceResult } from '../schema/report.js';
import { syncDeferredDirs } from './atomic.js';
import { machineRefusal, messageOf } from '../core/errors.js';
import { crashNow } from './fault.js';
import type { Step } from '../core/plan.js';
import { declaredPaths, dependencyOrder, neededIds, preflight, type PreflightProblem } from './preflight.js';
import { watchedChanges, type Observed, type Prior, type ResourceContext } from './resources/handler.js';
import { handlerFor, handlerForType } from './resources/index.js';
import type { Store } from './store/core.js';

/** Read the current state of every declared resource. A read that fails is recorded as the error it is. */
export async function observe(desired: Resource[], ctx: ResourceContext): Promise<{ observed: Map<string, Observed>; errors: Map<string, string> }> {
  const observed = new Map<string, Observed>();
  const errors = new Map<string, string>();
  ctx.pass.declared.clear();
  for (const r of desired) if ('path' in r) ctx.pass.declared.add(r.path);
  for (const r of desired) {
    try {
      observed.set(resourceId(r), await handlerFor(r).read(r, ctx));
    } catch (e) {
      errors.set(resourceId(r), messageOf(e));
    }
  }
  return { observed, errors };
}

/**
 * Pre-flight `steps`, then apply them in dependency order, recording each verified result in
 * `store`. One result line per step, in that order. Consecutive changes of staged types (files)
 * form a batch (see `staged` in resources/handler.ts): each is written to its temporary name,
 * then the batch is committed (one sync for all, then the renames) before any is read back,
 * and before the next step that is not staged.
 */
export async function applyPlan(steps: Step[], observed: Map<string, Observed>, store: Store, ctx: ResourceContext): Promise<ResourceResult[]> {
  const problems = preflight(steps, ctx.root);
  if (problems.length > 0) return refuse(steps, problems);
  const ordered = dependencyOrder(steps);
  const priors = await recordIntents(ordered, observed, store, ctx);
  const changedPaths = new Set<string>();
  const results: ResourceResult[] = [];
  const batch: Staged[] = [];
  // Progress counts the steps taken (a staged one once it is staged); a step's line is final once
  // a resource that watches paths has settled (settle), and lines keep the declared order.
  let taken = 0;
  const tell = (step: Step) => ctx.progress?.(++taken, ordered.length, step.id);
  // Steps whose line failed or was skipped: a change that needs one of them is not made (unmet).
  const broken = new Map<string, ResourceResult['result']>();
  const paths = declaredPaths(ordered);
  const done = async (step: Step, line: ResourceResult, settles = step.action !== 'remove') => {
    if (settles && step.action !== 'remove') line = await settle(step.resource, line, changedPaths, ctx).catch((e: unknown) => failedLine(step, e));
    if (line.result === 'failed' || line.result === 'skipped') broken.set(step.id, line.result);
    if (step.action !== 'remove' && 'path' in step.resource && (line.result === 'created' || line.result === 'updated')) changedPaths.add(step.resource.path);
    results.push(line);
  };
  const flush = async () => {
    for (const [step, line] of await commitBatch(batch.splice(0), store, ctx)) await done(step, line);
  };
  try {
    for (const step of ordered) {
      const now = observed.get(step.id) ?? null;
      if (stagedChange(step)) {
        // What a staged change needs (its directory, its owner) is never staged itself: its line is known.
        const skipped = unmet(step, broken, paths);
        batch.push(skipped ? { step, now, line: skipped } : await stage(step, now, priors.get(step.id), ctx));
        tell(step);
        if (ctx.pass.writes.size >= BATCH_FILES) await flush();
        continue;
      }
      if (batch.length > 0 && passive(step)) {
        const line = await applyStep(step, now, priors.get(step.id), store, ctx).catch((e: unknown) => failedLine(step, e));
        batch.push({ step, now, line }); // in its place among the batch's lines
        tell(step);
        continue;
      }
      await flush();
      const skipped = unmet(step, broken, paths);
      if (skipped) {
        await done(step, skipped);
        tell(step);
        continue;
      }
      const action = step.action !== 'remove' && handlerFor(step.resource).act !== undefined;
      let line: ResourceResult;
      try {
        line = action ? await act(step.resource as Resource, results, store, ctx) : await applyStep(step, now, priors.get(step.id), store, ctx);
      } catch (e) {
        line = failedLine(step, e);
      }
      await done(step, line, !action);
      tell(step);
    }
    await flush();
  } finally {
    ctx.pass.writes.discard(); // staged and never committed: a step threw past its line
    syncDeferredDirs(ctx.pass.dirsToSync); // the renames of this pass's file writes, one fsync per directory (see atomic.ts)
  }
  return results;
}

type Change = Extract<Step, { action: 'change' }>;

/**
 * The most files a batch holds: a larger one would save little (one `sync -f` per batch), and
 * would leave a long pass silent while the batch is synced and read back.
 */
const BATCH_FILES = 512;

/** A step in the pass's write batch: a staged change and what it needs to be verified, or a step whose line is already known (it failed, or it changed nothing). */
interface Staged {
  step: Step;
  now: Observed;
  prior?: Prior;
  line?: ResourceResult;
}

/** Whether `step` is a change its handler stages (files): not a removal, an adoption or an action. */
function stagedChange(step: Step): step is Change {
  return step.action === 'change' && handlerFor(step.resource).staged === true;
}

/** Whether `step` changes nothing and looks at nothing a batch changes, so that it need not wait for the batch to be committed (a file already as declared). */
function passive(step: Step): boolean {
  if (step.action !== 'keep') return false;
  const handler = handlerFor(step.resource);
  return !handler.act && !handler.watches && !handler.unverifiable;
}

/** Stage the change of `step` (its intent is durable: recordIntents); a change that cannot be staged has its failed line. */
async function stage(step: Change, now: Observed, prior: Prior | Error | undefined, ctx: ResourceContext): Promise<Staged> {
  try {
    if (prior === undefined || prior instanceof Error) throw prior ?? new Error(`nothing was recorded for ${step.id}`);
    if (ctx.faults.due('after-intent')) crashNow(); // its intent is durable (recordIntents); the change is not made yet
    await handlerFor(step.resource).apply(step.resource, now, ctx);
    return { step, now, prior };
  } catch (e) {
    return { step, now, line: failedLine(step, e) };
  }
}

/** Commit the pass's write batch, then read back and record each staged change: its line, in order. */
async function commitBatch(batch: Staged[], store: Store, ctx: ResourceContext): Promise<Array<[Step, ResourceResult]>> {
  if (batch.length === 0) return [];
  try {
    await ctx.pass.writes.commit(ctx.pass.dirsToSync, ctx.faults);
  } catch (e) {
    return batch.map((s) => [s.step, s.line ?? failedLine(s.step, e)]);
  }
  const lines: Array<[Step, ResourceResult]> = [];
  for (const s of batch) {
    let line = s.line;
    if (!line) {
      try {
        line = await verify(s.step as Change, s.now, s.prior!, store, ctx);
      } catch (e) {
        line = failedLine(s.step, e);
      }
    }
    lines.push([s.step, line]);
  }
  return lines;
}

/**
 * The skipped line of a change that needs a resource whose line in this pass failed or was
 * skipped (the directory it is in, its owner, a file a service restarts on), as Puppet skips what
 * requires a failed resource: making it would fail for the same cause, or bring up a service on a
 * configuration that did not apply. Its intent stays, as a failed change's does: the next pass
 * tries again. Recorded in `broken` at once, so that what needs it in turn is skipped too.
 */
function unmet(step: Step, broken: Map<string, ResourceResult['result']>, paths: Map<string, string>): ResourceResult | null {
  // Removing something (a step, or `ensure: absent`) needs nothing, as in dependencyOrder.
  if (step.action !== 'change' || ('ensure' in step.resource && step.resource.ensure === 'absent')) return null;
  const blocked = neededIds(step.resource, paths).filter((id) => broken.has(id));
  if (blocked.length === 0) return null;
  broken.set(step.id, 'skipped');
  const why = blocked.map((id) => `${id} ${broken.get(id) === 'failed' ? 'failed' : 'was not applied either'}`).join(', ');
  return { id: step.id, result: 'skipped', changes: step.changes, error: `not applied, because what it needs did not apply in this pass: ${why}; the next pass tries again` };
}

function failedLine(step: Step, e: unknown): ResourceResult {
  return { id: step.id, result: 'failed', ...(step.action === 'change' ? { changes: step.changes } : {}), error: refusedByMachine(step, e) ?? messageOf(e) };
}

/**
 * A write the machine refused for one resource (its filesystem full, over quota or read-only),
 * said of the resource's path and what to do, rather than in Node's words about a temporary file
 * beside it. Null for any other error.
 */
function refusedByMachine(step: Step, e: unknown): string | null {
  const { code, syscall } = (e ?? {}) as { code?: unknown; syscall?: unknown };
  const state = machineRefusal(e);
  const resource: Record<string, unknown> = step.action === 'remove' ? step.record.resource : step.resource;
  const path = resource.path;
  if (state === null || typeof path !== 'string') return null;
  const todo = code === 'EROFS' ? `make it writable, or declare ${path} where this machine allows writes` : "free space there ('df' names it)";
  return `the filesystem holding ${path} ${state} (${String(code)}${typeof syscall === 'string' ? ` at ${syscall}` : ''}): ${todo}; the next pass tries again`;
}

/**
 * Intent first, for the whole pass at once: before anything changes, every change step's
 * record (with what was there before, taken from what observe read at the start of the pass,
 * as each handler's `prior` does) is made durable in the store with one write and one sync,
 * instead of one sync per change. If the host dies anywhere in the pass, the next pass still
 * knows it owns each of them. Resources adopted as they are (already as declared) are recorded
 * as verified in the same write, so that the store keeps the declared order (removals undo it
 * in reverse). A step whose record cannot be made (a file too large to keep a copy of, a
 * change its handler's `beforeChange` refuses, as a rejected host version) gets the error
 * instead and changes nothing.
 */
async function recordIntents(steps: Step[], observed: Map<string, Observed>, store: Store, ctx: ResourceContext): Promise<Map<string, Prior | Error>> {
  const priors = new Map<string, Prior | Error>();
  const records: OwnedRecord[] = [];
  const watchers = watchersOf(steps);
  const pending = new Set<string>();
  for (const step of steps) {
    if (step.action === 'remove' || (step.action === 'keep' && !step.adopt)) continue;
    try {
      const handler = handlerFor(step.resource);
      if (handler.act) continue; // an action owns nothing
      if (step.action === 'change') await handler.beforeChange?.(step.resource, ctx);
      const prior = store.owned(step.id)?.prior ?? (await handler.prior(step.resource, observed.get(step.id) ?? null, ctx));
      priors.set(step.id, prior);
      records.push(ownedRecord(step.resource, prior, step.action === 'change' ? 'intent' : 'verified', ctx));
      if (step.action === 'change') for (const id of watchers.get(step.id) ?? []) pending.add(id);
    } catch (e) {
      priors.set(step.id, e instanceof Error ? e : new Error(String(e)));
    }
  }
  store.intend(records, [...pending]);
  return priors;
}

/** For each declared resource some action watches, the ids of the actions that watch it. */
function watchersOf(steps: Step[]): Map<string, string[]> {
  const watchers = new Map<string, string[]>();
  for (const step of steps) {
    if (step.action === 'remove') continue;
    const handler = handlerFor(step.resource);
    for (const watched of handler.act ? (handler.triggeredBy?.(step.resource) ?? []) : []) watchers.set(watched, [...(watchers.get(watched) ?? []), step.id]);
  }
  return watchers;
}

/**
 * An action in its declared place. A pending trigger is handed on only when every resource it
 * watches applied cleanly in this pass (`results` holds their lines, declared before it);
 * otherwise the action waits, still pending. The mark is cleared once the action succeeded.
 */
async function act(resource: Resource, results: ResourceResult[], store: Store, ctx: ResourceContext): Promise<ResourceResult> {
  const id = resourceId(resource);
  const handler = handlerFor(resource);
  let trigger: string | undefined;
  if (store.isPending(id)) {
    const watched = handler.triggeredBy?.(resource) ?? [];
    const lines = new Map(results.map((l) => [l.id, l]));
    const blocked = watched.filter((w) => !lines.has(w) || ['failed', 'skipped'].includes(lines.get(w)!.result));
    if (blocked.length > 0) return { id, result: 'skipped', error: `pending: not run, because ${blocked.map((w) => `${w} ${lines.has(w) ? lines.get(w)!.result : 'was not applied'}`).join(', ')} in this pass; it runs once what it watches applies cleanly` };
    const changed = watched.filter((w) => ['created', 'updated', 'removed', 'restored'].includes(lines.get(w)!.result));
    trigger = changed.length > 0 ? `${changed.join(', ')} changed` : 'a change it watches is pending from an earlier pass';
  }
  const line = await handler.act!(resource, ctx, trigger);
  if (line.result !== 'failed') store.clearPending(id);
  return line;
}

/** A declaration that fails pre-flight changes nothing: its problems fail their lines and every other line is skipped. */
function refuse(steps: Step[], problems: PreflightProblem[]): ResourceResult[] {
  return steps.map((step) => {
    const own = problems.filter((p) => p.id === step.id).map((p) => p.message);
    if (own.length > 0) return { id: step.id, result: 'failed', error: own.join('; ') };
    return { id: step.id, result: 'skipped', error: `nothing applied: pre-flight found ${problems.length} problem(s) in this declaration` };
  });
}

/** One step; `prior` is what recordIntents recorded for it (or why it could not). */
async function applyStep(step: Step, now: Observed, prior: Prior | Error | undefined, store: Store, ctx: ResourceContext): Promise<ResourceResult> {
  if (step.action === 'remove') {
    const note = await handlerForType(step.record.type).remove(step.record, ctx);
    store.drop(step.id);
    // Never verified (its change failed or was cut off): the host had no such resource, only a change it did not finish, now undone.
    if (step.record.state === 'intent') return { id: step.id, result: 'dropped', changes: [note ?? 'its change never completed: undone, and no longer declared'] };
    return { id: step.id, result: step.record.prior?.existed ? 'restored' : 'removed', ...(note ? { changes: [note] } : {}) };
  }
  const handler = handlerFor(step.resource);
  if (step.action === 'keep' && !step.adopt) return { id: step.id, result: 'unchanged' };
  if (prior === undefined || prior instanceof Error) throw prior ?? new Error(`nothing was recorded for ${step.id}`);
  if (step.action === 'keep') {
    if (ctx.faults.due('after-change')) crashNow(); // adopted: recorded as verified with the intents (recordIntents)
    return { id: step.id, result: 'unchanged' };
  }
  if (ctx.faults.due('after-intent')) crashNow(); // its intent is durable (recordIntents); the change is not made yet
  await handler.apply(step.resource, now, ctx);
  return verify(step, now, prior, store, ctx);
}

/** After a change of `step`: read it back, and record it as verified only when it reads as declared. */
async function verify(step: Change, now: Observed, prior: Prior, store: Store, ctx: ResourceContext): Promise<ResourceResult> {
  const handler = handlerFor(step.resource);
  const after = await handler.read(step.resource, ctx);
  const left = handler.diff(step.resource, after);
  if (left.length > 0) return { id: step.id, result: 'failed', changes: step.changes, error: `read back after the change still differs: ${left.join('; ')}` };
  store.put(ownedRecord(step.resource, prior, 'verified', ctx));
  const line: ResourceResult = { id: step.id, result: step.create ? 'created' : 'updated', changes: step.changes, ...(step.drift ? { drift: true } : {}) };
  return handler.afterChange ? handler.afterChange(step.resource, line, now, ctx) : line;
}

/** After a declared resource's own step: refresh it when a path it watches changed, and mark what cannot be verified here. */
async function settle(resource: Resource, line: ResourceResult, changedPaths: Set<string>, ctx: ResourceContext): Promise<ResourceResult> {
  if (line.result === 'failed' || line.result === 'skipped') return line;
  const handler = handlerFor(resource);
  if (!handler.unverifiable && !handler.watches) return line; // files, directories and most types: nothing more to do
  const changes = [...(line.changes ?? [])];
  const reasons: string[] = [];
  const unverifiable = handler.unverifiable?.(resource, ctx);
  if (unverifiable) reasons.push(unverifiable);
  const changed = watchedChanges(handler.watches?.(resource) ?? [], changedPaths);
  if (changed.length > 0 && handler.refresh) {
    const refreshed = await handler.refresh(resource, ctx, changed);
    if (refreshed) changes.push(refreshed.change);
    if (refreshed?.unverified) reasons.push(refreshed.unverified);
  }
  const { error: _none, ...rest } = line;
  if (reasons.length > 0) return { ...rest, result: 'unverified', ...(changes.length ? { changes } : {}), error: reasons.join('; ') };
  if (changes.length === (line.changes?.length ?? 0)) return line;
  return { ...rest, result: line.result === 'unchanged' ? 'updated' : line.result, changes };
}

function ownedRecord(resource: Resource, prior: Prior, state: OwnedRecord['state'], ctx: ResourceContext): OwnedRecord {
  return { id: resourceId(resource), type: resource.type, resource: { ...resource }, prior, state, at: ctx.now().toISOString() };
}
