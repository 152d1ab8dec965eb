/**
 * One reconcile pass, in the order a newcomer should read it:
 *
 *   contact → trust → assign → load → reveal → observe → plan → apply → record → report
 *
 * contact: ask the server for the tip of main (one small protocol-v2 request) and fetch only
 *   when it moved. If the server cannot be reached the host is disconnected: it keeps
 *   reconciling the last declaration it fetched and keeps its report to send later. A server
 *   that refuses the host's credential (HTTP 401) has revoked it: the host stops and says so.
 * trust: before anything is read from the tip, check it (trust/gate.ts, trust/check.ts): signed by a
 *   key the host trusts, and descending from the last commit it accepted. A refused tip is
 *   reported `untrusted` (with the commit and its signer), and the pass reconciles the last
 *   accepted commit instead, so drift is corrected but nothing of the refused commit is used.
 * settings: a commit this host has not applied yet, whose mesh.yaml does not read (a garbled
 *   signer's key, a typo, trust: signed with no signer: core/trust/check.ts fleetSettings),
 *   applies nothing of itself, as a declaration that does not validate: the report names the
 *   problem, and the last declaration applied is still enforced. (Trust and shards keep what
 *   they had: they take only a mesh.yaml that reads.)
 * assign: read nodes/<node>/node.yaml at that commit. A generation other than the host's own
 *   means its identity was revoked: it stops and says so. A retired node, and a node whose
 *   briefing failed at enrolment (ineligible), get the empty declaration instead of theirs:
 *   the host removes what it owns and every report says why.
 * load: read nodes/<node>/ at that commit and validate all of it; a declaration with any
 *   problem applies nothing, and the report names every problem with file:line:column, while
 *   the last declaration applied is still enforced (keepLastGood).
 *   The rendered declaration is cached (declaration-cache.ts): when every file it read reads
 *   the same, with the same facts and host build, it is not parsed or rendered again.
 * reveal (secrets/reveal.ts): the declaration renders every secret as a stand-in, as mesh-cli
 *   renders it; the resources that read one are rendered again with the values this node's age
 *   identity opens. One that reads a secret the node cannot open fails, and nothing of it is applied.
 * observe → plan → apply (apply-declaration.ts): read every declared resource, decide in a
 *   pure function what to change and what to remove, change it, read it back, and record it in
 *   the store once verified.
 *   An owned resource recovered from a report that held no copy of what was there before mesh
 *   is released (left as it is) rather than removed.
 * record: remember the commit applied, so that status and the next pass know it.
 * report: sign and commit the result on the local report branch and push it. A report that
 *   says nothing new is not sent again until the heartbeat is due.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { NodeIdentity } from '../schema/fleet.js';
import { loadYamlOrThrow } from '../core/load.js';
import { fleetSettings } from '../core/trust/check.js';
import type { Report } from '../schema/report.js';
import { applyDeclaration } from './apply-declaration.js';
import { clockSkewLine, ineligibleErrors } from './briefing.js';
import { withDeclarationCache } from './declaration-cache.js';
import { loadDeclarationWith, type LoadOptions, type TreeReader } from '../core/declaration/declaration.js';
import { findNode, NOT_DECLARATIONS } from '../core/fleet/layout.js';
import { collectFacts } from './facts.js';
import { MeshError, messageOf, type NextStep, type Problem } from '../core/errors.js';
import type { Host } from './host.js';
import { buildReport, continueFromLocal, continueFromServer, recordReport, sameAsLast, sendReports, type ReportBody } from './report.js';
import { credentialRefused, nothingApplied, sealed, trustStage } from './trust/gate.js';
import type { HostPaths } from './paths.js';
import { ensureIdentity, readIdentity } from './secrets/identity.js';
import { shardUrlOf } from '../core/report/shard.js';
import { writeConfig } from './config.js';

export interface PassResult {
  report: Report;
  /** pushed: the server has every report; unchanged: nothing new to say, none made; kept: made but not sent yet. */
  delivery: 'pushed' | 'unchanged' | 'kept';
  /** Whether the server now has everything this host has to say. */
  sent: boolean;
  /** Why the fleet could not be reached, when it could not. */
  disconnected?: string;
  /** With `disconnected`: what its cause calls for (its MeshError's `next`); none for an error nobody foresaw. */
  next?: NextStep;
}

/** What this node is given: its own declaration, or the empty one (retired, ineligible) with the reasons. */
export interface Assignment {
  as: 'declared' | 'retired' | 'ineligible';
  tree: TreeReader;
  errors: Report['errors'];
  /** What the declaration renders with: this machine's facts, and where the node sits under nodes/. */
  opts: LoadOptions;
}

const EMPTY: TreeReader = { list: async () => null, read: async () => null, folders: async () => [] };

/** Run one pass for an enrolled host. */
export async function reconcile(host: Host, opts: { heartbeatMs: number }): Promise<PassResult> {
  if (host.store.fresh) throw storeLost(host);
  const resumed = await continueFromLocal(host.repo, host.store, host.config);
  await ensureIdentity(host.paths, host.ctx);
  const { commit: tip, disconnected, next } = await contact(host);
  const gate = await trustStage(host, tip);
  const commit = gate.commit;
  if (commit !== null && commit !== host.store.data.lastApplied?.commit) await followShard(host, commit);
  let body = nothingApplied(gate);
  const unread = commit === null ? [] : await settingsProblems(host, commit);
  if (commit !== null && unread.length > 0) {
    body = await keepLastGood(host, commit, { kind: 'reconcile', commit, digest: null, outcome: 'failed', errors: unread.map((p) => ({ code: 'E_INVALID', ...p })), resources: [] });
  } else if (commit !== null) {
    const assignment = await assign(host, withDeclarationCache(host.repo.tree(commit), join(host.paths.stateDir, 'declaration-cache.json')));
    body = labelled(assignment, await applyDeclaration(host, assignment.tree, commit, assignment.opts));
    if (body.digest === null && body.errors.some((e) => e.code === 'E_INVALID')) body = await keepLastGood(host, commit, body);
  }
  body = sealed(gate, body);
  if (resumed) body = { ...body, errors: [...body.errors, resumed] };
  const skewed = disconnected === undefined ? clockSkewLine(host.clock()) : null;
  if (skewed) body = { ...body, errors: [...body.errors, skewed] };
  const recovered = host.repo.recovered(); // the local git cache was unreadable and started afresh (fleet/cache.ts)
  if (recovered) body = { ...body, errors: [...body.errors, { code: 'E_GIT_CACHE', message: recovered }] };
  if (commit !== null && (body.outcome === 'applied' || body.outcome === 'unverified' || body.outcome === 'retired')) {
    host.store.data.lastApplied = { commit, digest: body.digest ?? '', at: host.ctx.now().toISOString() };
  }
  host.store.save('pass');
  const started = host.ctx.debug && performance.now();
  const result = await report(host, body, opts.heartbeatMs, disconnected === undefined ? undefined : { disconnected, next });
  host.ctx.debug?.({ sequence: result.report.sequence, delivery: result.delivery, ms: Math.round(performance.now() - started!) }, 'report');
  return result;
}

/** Poll main and fetch it when it moved; unreachable, the last fetched commit. `record` (not under --noop) keeps the contact in the store. */
export async function contact(host: Host, record = true): Promise<{ commit: string; disconnected?: string; next?: NextStep }> {
  const branch = host.config.mainBranch;
  const started = host.ctx.debug && performance.now();
  try {
    const tip = await host.repo.poll(branch);
    if (!tip) throw new MeshError('E_NO_MAIN', `the fleet repo has no branch ${branch} yet`, { next: 'wait' });
    const fetched = await host.repo.fetched(branch);
    const commit = tip === fetched ? tip : await host.repo.fetch(branch);
    host.ctx.debug?.({ branch, commit, fetched: tip !== fetched, ms: Math.round(performance.now() - started!) }, tip === fetched ? 'main polled: not moved' : 'main polled and fetched');
    if (record) {
      host.store.data.lastContact = { at: host.ctx.now().toISOString(), commit };
      host.store.data.lastError = null;
    }
    return { commit };
  } catch (e) {
    const refused = credentialRefused(e, host.config.node, existsSync(host.paths.credential) ? undefined : host.paths.credential);
    if (refused) throw refused;
    if (!(e instanceof MeshError) || e.next === 'human') throw e;
    if (record) {
      host.store.data.lastError = { at: host.ctx.now().toISOString(), message: messageOf(e) };
      host.store.save('fleet unreachable');
    }
    const last = await host.repo.fetched(branch);
    if (!last) throw e;
    host.log.warn({ err: messageOf(e), commit: last }, 'fleet unreachable: reconciling the last fetched declaration');
    return { commit: last, disconnected: messageOf(e), next: e.next };
  }
}

/**
 * The problems of mesh.yaml at `commit` when this host has not applied that commit yet (none when
 * it reads, or there is none); a commit applied before was checked then, and a pass over it reads
 * no settings.
 */
export async function settingsProblems(host: Host, commit: string): Promise<Problem[]> {
  if (commit === host.store.data.lastApplied?.commit) return [];
  const text = await host.repo.tree(commit).read('mesh.yaml').catch(() => null);
  if (text === null) return [];
  const loaded = fleetSettings(text);
  return loaded.ok ? [] : loaded.problems;
}

/** What `tree` gives this node: its declaration, or nothing as retired or ineligible. `remember` (not under --noop) keeps where its folder is, a hint for the next pass. */
export async function assign(host: Host, tree: TreeReader, remember = true): Promise<Assignment> {
  const { node, generation } = host.config;
  // The node may sit in a group (nodes/web/eu/web-1/): looked for where it was last time first.
  const place = await findNode(tree, node, readPlace(host.paths));
  if (place === null) throw new MeshError('E_NO_IDENTITY', `${node}/node.yaml is nowhere under nodes/ on ${host.config.mainBranch}: the fleet no longer knows ${node}, so this host applies nothing. Restore the file, or retire the node with 'mesh-cli retire ${node}'`);
  if (remember) keepPlace(host.paths, place.dir);
  const file = `${place.dir}/node.yaml`;
  const text = (await tree.read(file))!; // findNode saw it there
  const opts: LoadOptions = { facts: collectFacts(host.ctx.root), place };
  const identity = loadYamlOrThrow(text, file, NodeIdentity);
  if (identity.generation !== generation) {
    throw new MeshError('E_REVOKED', `this host holds generation ${generation} of ${node}, but ${file} is at generation ${identity.generation}: its identity was revoked, so it applies and reports nothing more. Re-enrol with a new token ('mesh-cli token issue ${node}')`);
  }
  if (!identity.retired && host.config.ineligible.length === 0) return { as: 'declared', tree, errors: [], opts };
  const as = identity.retired ? 'retired' : 'ineligible';
  const errors = as === 'ineligible' ? ineligibleErrors(host.config.ineligible) : [];
  // Only the node's own files are worth a word: its groups' resources go to the other nodes of the group.
  const declared = await loadDeclarationWith(tree, node, opts, host.ctx.load.parser);
  const own = declared.ok && declared.declaration.resources.length > 0 ? declared.declaration.files.filter((f) => f.startsWith(`${place.dir}/`) && !NOT_DECLARATIONS.has(basename(f))) : [];
  if (own.length > 0) {
    const names = own.map((f) => f.slice(place.dir.length + 1)).join(', ');
    errors.push({ code: 'E_NOT_ASSIGNABLE', message: `${place.dir}/ declares resources (${names}), but ${node} is ${as}: none are applied` });
  }
  return { as, tree: EMPTY, errors, opts };
}

/**
 * A declaration that does not validate applies nothing of itself; the host goes on enforcing the
 * last declaration it applied (drift on it is corrected), and the report says both: the errors of
 * the new commit, and what the last good one did this pass.
 */
async function keepLastGood(host: Host, commit: string, body: ReportBody): Promise<ReportBody> {
  const last = host.store.data.lastApplied;
  if (!last || last.commit === commit) return body;
  try {
    const assignment = await assign(host, host.repo.tree(last.commit));
    const kept = labelled(assignment, await applyDeclaration(host, assignment.tree, last.commit, assignment.opts));
    const counts = kept.counts ?? { changed: 0, failed: 0 };
    const note = { code: 'E_KEPT_LAST_GOOD', message: `${commit.slice(0, 12)} does not validate, so nothing of it is applied; the last good declaration (${last.commit.slice(0, 12)}) is still enforced: ${counts.changed} changed, ${counts.failed} failed` };
    return { ...body, errors: [...body.errors, note], resources: kept.resources, ...(kept.counts ? { counts: kept.counts } : {}) };
  } catch (e) {
    host.log.warn({ err: messageOf(e), commit: last.commit }, 'cannot enforce the last good declaration');
    return body;
  }
}

/** The empty declaration's result said as what it is: retired or ineligible (a failure stays a failure). */
function labelled(assignment: Assignment, body: ReportBody): ReportBody {
  if (assignment.as === 'declared') return body;
  return { ...body, outcome: body.outcome === 'failed' ? 'failed' : assignment.as, errors: [...assignment.errors, ...body.errors] };
}

/**
 * Where mesh.yaml at `commit` (a trusted commit, read when it is new to this host) puts this node's
 * report branch, when it shards the reports: a shard other than where its reports go now becomes
 * where they go (kept in config.json). Appending a shard moves some nodes to it; `mesh-cli mirror
 * sync` moves their branches there, on which their hosts then go on.
 */
async function followShard(host: Host, commit: string): Promise<void> {
  const url = shardUrlOf(await host.repo.tree(commit).read('mesh.yaml').catch(() => null), host.config.node);
  const now = host.config.pushUrl ?? host.config.url;
  if (url === null || url === now) return;
  host.log.info({ from: now, to: url, commit }, "this node's reports go to another shard from now on, as mesh.yaml says");
  host.config = { ...host.config, pushUrl: url };
  writeConfig(host.paths, host.config);
  host.repo.reportTo(url);
}

/**
 * Make this pass's report (when it says something new) and push it. `unreached`: the fleet could not be
 * polled this pass, so nothing is pushed. `continued`: this pass already continued from the server's
 * report branch once (the push after that is not retried again).
 */
async function report(host: Host, body: ReportBody, heartbeatMs: number, unreached?: Pick<PassResult, 'disconnected' | 'next'>, continued = false): Promise<PassResult> {
  const now = host.ctx.now();
  const report = buildReport(host.config, host.store, body, now, readIdentity(host.paths)?.recipient);
  const last = host.store.data.report;
  const heartbeatDue = !last.at || now.getTime() - Date.parse(last.at) >= heartbeatMs;
  const fresh = !sameAsLast(host.store, report) || heartbeatDue;
  if (fresh) await recordReport(host.repo, host.store, report, host.key);
  if (host.store.data.report.pushed) return { report, delivery: 'unchanged', sent: true, ...unreached };
  if (unreached) return { report, delivery: 'kept', sent: false, ...unreached };
  try {
    await sendReports(host.repo, host.store, host.config.node);
    return { report, delivery: 'pushed', sent: true };
  } catch (e) {
    // The server's report branch moved on without this host: continue from it (if it is this host's own) and report again, saying why.
    if (e instanceof MeshError && e.code === 'E_REPORT_BRANCH_AHEAD' && !continued) {
      const line = await continueFromServer(host.repo, host.store, host.config, host.paths, now);
      return again(host, { ...body, errors: [...body.errors, line] }, heartbeatMs);
    }
    host.store.data.lastError = { at: now.toISOString(), message: messageOf(e) };
    host.store.save('report not sent');
    return { report, delivery: 'kept', sent: false, disconnected: messageOf(e), ...(e instanceof MeshError ? { next: e.next } : {}) };
  }
}

/** `report` once more, after continuing from the server's report branch (a second refusal in the same pass is not followed again). */
function again(host: Host, body: ReportBody, heartbeatMs: number): Promise<PassResult> {
  return report(host, body, heartbeatMs, undefined, true);
}

function storeLost(host: Host): MeshError {
  const node = host.config.node;
  return new MeshError(
    'E_STORE_LOST',
    `the store ${host.store.path} is missing, but this machine is enrolled as ${node}: mesh-host will not start from an empty store and forget what it owns. ` +
      `Re-enrol ('mesh-cli token issue ${node}', then 'mesh-host enrol --token-file FILE'): enrolment recovers the owned set from the last report`,
    { next: 'human' },
  );
}

/** Where the node's folder was at the last pass (a hint: it is checked before it is used). */
function readPlace(paths: HostPaths): string | undefined {
  try {
    return readFileSync(join(paths.stateDir, 'place'), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function keepPlace(paths: HostPaths, dir: string): void {
  if (readPlace(paths) === dir) return;
  try {
    writeFileSync(join(paths.stateDir, 'place'), `${dir}\n`); // a hint: a torn write is only a walk next time
  } catch {
    // the next pass walks the groups again
  }
}
