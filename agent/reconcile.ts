/**
 * One reconcile pass, in the order a newcomer should read it:
 *
 *   contact → load → observe → plan → apply → record → report
 *
 * contact: ask the server for the tip of main (one small protocol-v2 request) and fetch only
 *   when it moved. If the server cannot be reached the host is disconnected: it keeps
 *   reconciling the last declaration it fetched and keeps its report to send later.
 * load: read nodes/<node>/ at that commit and validate all of it; a declaration with any
 *   problem applies nothing, and the report names every problem with file:line:column.
 * observe → plan → apply: read every declared resource, decide in a pure function what to
 *   change and what to remove, change it, read it back, and record it in the store once verified.
 * record: remember the commit applied, so that status and the next pass know it.
 * report: sign and commit the result on the local report branch and push it. A report that
 *   says nothing new is not sent again until the heartbeat is due.
 */
import type { Report } from '../schema/report.js';
import { applyPlan, observe } from './apply.js';
import { loadDeclaration, type TreeReader } from './declaration.js';
import { MeshError, messageOf } from './errors.js';
import type { Host } from './host.js';
import { plan } from './plan.js';
import { buildReport, recordReport, sameAsLast, sendReports, type ReportBody } from './report.js';
import { handlerFor } from './resources/index.js';

export interface PassResult {
  report: Report;
  /** pushed: the server has every report; unchanged: nothing new to say, none made; kept: made but not sent yet. */
  delivery: 'pushed' | 'unchanged' | 'kept';
  /** Whether the server now has everything this host has to say. */
  sent: boolean;
  /** Why the fleet could not be reached, when it could not. */
  disconnected?: string;
}

/** Run one pass for an enrolled host. */
export async function reconcile(host: Host, opts: { heartbeatMs: number }): Promise<PassResult> {
  const { commit, disconnected } = await contact(host);
  const body = await applyDeclaration(host, host.repo.tree(commit), commit);
  if (body.outcome === 'applied') {
    host.store.data.lastApplied = { commit, digest: body.digest ?? '', at: host.ctx.now().toISOString() };
    host.store.save();
  }
  return report(host, body, opts.heartbeatMs, disconnected);
}

async function contact(host: Host): Promise<{ commit: string; disconnected?: string }> {
  const branch = host.config.mainBranch;
  try {
    const tip = await host.repo.poll(branch);
    if (!tip) throw new MeshError('E_NO_MAIN', `the fleet repo has no branch ${branch} yet`, { next: 'wait' });
    const fetched = await host.repo.fetched(branch);
    const commit = tip === fetched ? tip : await host.repo.fetch(branch);
    host.store.data.lastContact = { at: host.ctx.now().toISOString(), commit };
    host.store.data.lastError = null;
    return { commit };
  } catch (e) {
    if (!(e instanceof MeshError) || e.next === 'human') throw e;
    host.store.data.lastError = { at: host.ctx.now().toISOString(), message: messageOf(e) };
    host.store.save();
    const last = await host.repo.fetched(branch);
    if (!last) throw e;
    host.log.warn({ err: messageOf(e), commit: last }, 'fleet unreachable: reconciling the last fetched declaration');
    return { commit: last, disconnected: messageOf(e) };
  }
}

/** load → observe → plan → apply against `tree`; the result becomes the body of the report. */
export async function applyDeclaration(host: { config: { node: string }; store: Host['store']; ctx: Host['ctx'] }, tree: TreeReader, commit: string | null): Promise<ReportBody> {
  const loaded = await loadDeclaration(tree, host.config.node);
  if (!loaded.ok) {
    const errors = loaded.problems.map((p) => ({ code: 'E_INVALID', ...p }));
    return { kind: 'reconcile', commit, digest: null, outcome: 'failed', errors, resources: [] };
  }
  const { resources, digest } = loaded.declaration;
  const { observed, errors: readErrors } = await observe(resources, host.ctx);
  const steps = plan(resources, host.store.data.owned, observed, (r, o) => handlerFor(r).diff(r, o));
  const results = await applyPlan(steps.filter((s) => !readErrors.has(s.id)), observed, host.store, host.ctx);
  results.push(...[...readErrors].map(([id, error]) => ({ id, result: 'failed' as const, error: `cannot read current state: ${error}` })));
  const failed = results.filter((r) => r.result === 'failed').length;
  const changed = results.filter((r) => !['unchanged', 'failed', 'skipped'].includes(r.result)).length;
  const counts = { changed, drift: results.filter((r) => r.drift).length, failed, unchanged: results.filter((r) => r.result === 'unchanged').length };
  return { kind: 'reconcile', commit, digest, outcome: failed > 0 ? 'failed' : 'applied', errors: [], resources: results, counts };
}

async function report(host: Host, body: ReportBody, heartbeatMs: number, disconnected?: string): Promise<PassResult> {
  const now = host.ctx.now();
  const report = buildReport(host.config, host.store, body, now);
  const last = host.store.data.report;
  const heartbeatDue = !last.at || now.getTime() - Date.parse(last.at) >= heartbeatMs;
  const fresh = !sameAsLast(host.store, report) || heartbeatDue;
  if (fresh) await recordReport(host.repo, host.store, report, host.key);
  if (host.store.data.report.pushed) return { report, delivery: 'unchanged', sent: true, ...(disconnected ? { disconnected } : {}) };
  if (disconnected) return { report, delivery: 'kept', sent: false, disconnected };
  try {
    await sendReports(host.repo, host.store, host.config.node);
    return { report, delivery: 'pushed', sent: true };
  } catch (e) {
    host.store.data.lastError = { at: now.toISOString(), message: messageOf(e) };
    host.store.save();
    return { report, delivery: 'kept', sent: false, disconnected: messageOf(e) };
  }
}
