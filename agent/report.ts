/**
 * Building, signing and sending the report. status.json is signed with the node key
 * (OpenSSH signature, namespace mesh-report) and committed with an SSH-signed commit on
 * the local branch reports/<node>, whose parent is the host's own previous report, so a
 * shallow host never needs history to push. An unsent report stays on the local branch
 * and goes out with the next push. A server branch that moved on without this host (its state
 * folder restored from an older copy) is continued from, when its tip is this host's own report.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPORT_NAMESPACE, type OwnedRecord, type Report } from '../schema/report.js';
import { BODIES } from '../core/declaration/bodies.js';
import type { HostConfig } from './config.js';
import type { HostPaths } from './paths.js';
import type { FleetRepo } from './fleet/git.js';
import { gitSigner, signSsh } from '../core/sign/sshsig.js';
import type { Store } from './store/store.js';
import { HOST_VERSION } from '../core/version.js';
import { SIGNATURE_FILE, STATUS_FILE, reportRef } from '../core/report/branch.js';
import { parseReport } from '../core/report/verify.js';
import { fingerprint, sameKey, sameKeyIfWellFormed, verifySsh } from '../core/sign/sshsig.js';
import { MeshError } from '../core/errors.js';

type ReportLine = Report['errors'][number];

export type ReportBody = Pick<Report, 'kind' | 'commit' | 'digest' | 'outcome' | 'errors' | 'resources'> & Partial<Pick<Report, 'counts' | 'facts' | 'profile' | 'inventory' | 'briefing' | 'signer' | 'trust' | 'lastApplied'>>;

/** The full report for this pass, chained to the previous one in the store. */
export function buildReport(config: HostConfig, store: Store, body: ReportBody, now: Date, recipient?: string | null): Report {
  return {
    format: 1,
    node: config.node,
    generation: config.generation,
    nodeKey: config.nodeKey,
    vouch: config.vouch,
    hostVersion: HOST_VERSION,
    sequence: store.data.report.sequence + 1,
    previous: store.data.report.hash,
    observedAt: now.toISOString(),
    ...body,
    ...(recipient ? { recipient } : {}),
    owned: store.data.owned.map(recoveryCopy),
  };
}

/** The owned set as the report carries it: identities and declared fields, never a body (a file's content, a user's password hash: what a secret may be read in) nor what was there before. */
function recoveryCopy(record: OwnedRecord): OwnedRecord {
  const prior = record.prior ? { existed: Boolean(record.prior.existed) } : null;
  const resource = Object.fromEntries(Object.entries(record.resource).filter(([field]) => !BODIES.has(field)));
  return { ...record, resource, prior };
}

/**
 * A record of a report's owned set, as the store keeps it: the report holds no copy of what was
 * there before mesh took a resource over, so that is marked unknown, and un-declaring the
 * resource then leaves it as it is.
 */
export function fromRecoveryCopy(record: OwnedRecord): OwnedRecord {
  return record.prior?.existed ? { ...record, prior: { existed: true, known: false } } : record;
}

/**
 * True when `report` says nothing that the last one did not: the same commit, outcome, owned set and
 * failures (by resource id and result, and by error code), apart from time and sequence. It is then a
 * heartbeat, whether the pass succeeded or failed, so a node failing the same way every pass costs
 * no more than a healthy one (DESIGN.md, report branches).
 */
export function sameAsLast(store: Store, report: Report): boolean {
  return store.data.report.contentHash === contentHash(report);
}

function contentHash(report: Report): string {
  return createHash('sha256').update(JSON.stringify(gist(report))).digest('hex');
}

/** What a report says, without what changes every pass while nothing does: times, command output, the wording of a failure. */
function gist(report: Report): unknown {
  const { observedAt: _a, sequence: _s, previous: _p, errors, resources, owned, ...rest } = report;
  return {
    ...rest,
    errors: errors.map((e) => [e.code, e.file, e.line, e.col]),
    resources: resources.map(({ output: _o, error, changes, ...line }) =>
      line.result === 'failed' || line.result === 'skipped' ? line : { ...line, changes, error }),
    owned: owned.map(({ at: _t, ...record }) => record),
  };
}

/** Sign `report`, commit it on the local report branch and record it in the store. Returns the commit. */
export async function recordReport(repo: FleetRepo, store: Store, report: Report, key: KeyObject): Promise<string> {
  const text = JSON.stringify(report, null, 2) + '\n';
  const signature = signSsh(text, key, REPORT_NAMESPACE);
  const message = `report ${report.node} #${report.sequence}: ${report.outcome}${report.commit ? ` at ${report.commit.slice(0, 12)}` : ''}`;
  // A report that says nothing new is a heartbeat: it replaces a heartbeat at the tip, so history grows with changes, not time.
  const heartbeat = report.kind !== 'enrolment' && sameAsLast(store, report);
  const oid = await repo.commit(reportRef(report.node), { [STATUS_FILE]: text, [SIGNATURE_FILE]: signature }, message, gitSigner(key), { heartbeat });
  store.data.report = { sequence: report.sequence, hash: sha256(text), contentHash: contentHash(report), at: report.observedAt, pushed: false };
  store.save('report made');
  return oid;
}

/** Push the local report branch; marks the store as sent on success. */
export async function sendReports(repo: FleetRepo, store: Store, node: string): Promise<void> {
  await repo.push(reportRef(node));
  store.data.report.pushed = true;
  store.save('report sent');
}

/**
 * The server's report branch holds a report this host's git cache does not (fleet/git.ts refused to
 * push over it): its state folder was restored from an older copy, or the cache was replaced. When
 * the server's tip is this host's own report (signed with its node key, for its node and
 * generation), the local branch and the store continue from it, and the line returned says so in
 * the next report; reports made here since and not sent are dropped (that report replaces them).
 * When that report is newer than the store, what it owned and the store does not list is tracked
 * again (trackAgain), so that nothing mesh made in between is forgotten.
 * Anything else is refused and left on the server as it is: not adopted, not pushed over.
 */
export async function continueFromServer(repo: FleetRepo, store: Store, config: HostConfig, paths: HostPaths, now: Date): Promise<ReportLine> {
  const ref = reportRef(config.node);
  const tip = await repo.peek(ref);
  if (tip === null) throw new MeshError('E_PUSH_REJECTED', `the server's ${ref} vanished while this host pushed; the next pass pushes again`, { next: 'retry' });
  const tree = repo.tree(tip);
  const [status, sig] = [await tree.read(STATUS_FILE), await tree.read(SIGNATURE_FILE)];
  const theirs = ownReport(config, status, sig);
  if (typeof theirs === 'string') throw foreignTip(config.node, tip, theirs);
  const restored = theirs.sequence >= store.data.report.sequence;
  // The store first: a crash before the branch moves leaves a report that the next push refuses again, and this runs again.
  const tracked = continueStore(store, theirs, status!, true, restored);
  await repo.point(ref, tip);
  const made = `report #${theirs.sequence}, made at ${theirs.observedAt}`;
  const message = restored
    ? `the server's report branch was ahead of this machine's (${made}): the state folder was likely restored from an older copy; continuing from it${tracked}`
    : `the server's report branch holds a report that is not in this machine's history (${made}): this machine's git cache, or the server, was likely replaced or restored from an older copy; continuing from it`;
  return { code: 'E_REPORT_BRANCH_AHEAD', message: message + secondCopy(paths, config.node, now) };
}

/**
 * The local report branch holds a later report of this host than the store knows: a pass stopped
 * between committing its report and recording it, or the store alone was restored from an older
 * copy (a backup that left the git cache out, or a store file put back by hand). The store
 * continues from that report, its owned set included, before the pass applies anything; the line
 * returned says so in the pass's report. Null when the store is not behind.
 */
export async function continueFromLocal(repo: FleetRepo, store: Store, config: HostConfig): Promise<ReportLine | null> {
  const ahead = await localReportAhead(repo, store, config);
  if (ahead === null) return null;
  const tracked = continueStore(store, ahead.report, ahead.status, false, true);
  const message = `this machine's store was behind its own report branch (report #${ahead.report.sequence}, made at ${ahead.report.observedAt}): a pass stopped before its store recorded that report, or the store was restored from an older copy; continuing from that report${tracked}`;
  return { code: 'E_STORE_BEHIND', message };
}

/**
 * What `--noop` says when the store is behind its local report branch (continueFromLocal): a pass
 * would first continue from that report, and --noop, which writes nothing, plans from the store as
 * it is. Null when the store is not behind.
 */
export async function storeBehindNote(repo: FleetRepo, store: Store, config: HostConfig): Promise<string | null> {
  const ahead = await localReportAhead(repo, store, config);
  if (ahead === null) return null;
  const lacking = ahead.report.owned.filter((r) => !store.owned(r.id)).map((r) => r.id);
  const owned = lacking.length === 0 ? '' : `, and from its owned set, which lists what the store does not (${lacking.slice(0, 5).join(', ')}${lacking.length > 5 ? ` and ${lacking.length - 5} more` : ''}: planned here as if found on this machine, a pass would own them as made by mesh)`;
  return `this machine's store is behind its own report branch (report #${ahead.report.sequence}, made at ${ahead.report.observedAt}): a pass would first continue from that report${owned}`;
}

/** This host's own report at the tip of its local report branch, when it is later than the store's: the store is behind. */
async function localReportAhead(repo: FleetRepo, store: Store, config: HostConfig): Promise<{ report: Report; status: string } | null> {
  const tip = await repo.local(reportRef(config.node));
  if (tip === null) return null;
  const tree = repo.tree(tip);
  const status = await tree.read(STATUS_FILE);
  if (status === null || sha256(status) === store.data.report.hash) return null;
  const report = ownReport(config, status, await tree.read(SIGNATURE_FILE));
  if (typeof report === 'string' || report.sequence <= store.data.report.sequence) return null;
  return { report, status };
}

/**
 * Continue the store's chain from `theirs` (this host's own report, text `status`), and when it is
 * newer than the store (`newer`), from its owned set too: what the older store lacks is tracked again
 * (trackAgain), so that un-declaring it removes it. Returns the words for the report's line.
 */
function continueStore(store: Store, theirs: Report, status: string, pushed: boolean, newer: boolean): string {
  const retaken = newer ? trackAgain(store, theirs.owned) : 0;
  // contentHash: unknown, so that the next report is a real one (it carries the line), never a heartbeat.
  store.data.report = { sequence: theirs.sequence, hash: sha256(status), contentHash: null, at: theirs.observedAt, pushed };
  store.save('report chain continued');
  return retaken ? `, and from its owned set (${retaken} resource${retaken === 1 ? '' : 's'} the older copy did not know mesh had made or taken over)` : '';
}

/** Where the time of the last continuation is kept (a hint beside the store: lost, the next one is taken for the first). */
const CONTINUED = 'continued';
const A_DAY_MS = 24 * 3600_000;

/**
 * What a continuation says when it is not the first within a day: a restored state folder is
 * continued from once, while two machines reporting as one node (a copy of this machine's disk
 * running elsewhere, with its node key) push over each other's reports and continue every pass.
 */
function secondCopy(paths: HostPaths, node: string, now: Date): string {
  const file = join(paths.stateDir, CONTINUED);
  let last = NaN;
  try {
    last = Date.parse(readFileSync(file, 'utf8').trim());
  } catch {
    // none yet
  }
  try {
    writeFileSync(file, `${now.toISOString()}\n`);
  } catch {
    // a hint only
  }
  if (!(now.getTime() - last < A_DAY_MS)) return '';
  return `. It continued from the server's branch before, at ${new Date(last).toISOString()}: unless its state folder was restored twice, another machine holds this machine's node key and reports as ${node} (a copy of its disk, running elsewhere), and the two push over each other's reports. Stop the copy, or give it a name of its own: on it, move ${paths.configDir} and ${paths.stateDir} away and enrol it with a token for another node ('mesh-cli token issue NAME')`;
}

/**
 * Add to the store what `owned` (the owned set of this host's own later report) lists and the store
 * does not, and take that report's word on what was there before mesh where the two disagree: a
 * store restored from an older copy took over, as if it had been found here, what mesh itself had
 * created since. What only the store lists stays owned (the machine itself may have been restored
 * with it). Returns how many records were added or corrected.
 */
function trackAgain(store: Store, owned: OwnedRecord[]): number {
  let changed = 0;
  for (const theirs of owned.map(fromRecoveryCopy)) {
    const mine = store.owned(theirs.id);
    if (mine && Boolean(mine.prior?.existed) === Boolean(theirs.prior?.existed)) continue;
    store.put(mine ? { ...mine, prior: theirs.prior } : theirs);
    changed++;
  }
  return changed;
}

/** The report `status` (signed `sig`) when this host made it: its node key signed it, for its node and generation; otherwise why not. */
function ownReport(config: HostConfig, status: string | null, sig: string | null): Report | string {
  if (status === null) return 'it holds no status.json';
  if (sig === null) return 'its status.json is not signed';
  const signed = verifySsh(status, sig, REPORT_NAMESPACE);
  if (!signed.ok) return `the signature of its status.json does not verify (${signed.reason})`;
  const parsed = parseReport(config.node, status);
  const claims = parsed.ok ? ` (it claims to be report #${parsed.value.sequence} of ${parsed.value.node} generation ${parsed.value.generation})` : '';
  if (!sameKey(signed.publicKey, config.nodeKey)) return `its status.json is signed by ${fingerprint(signed.publicKey)}, not by this machine's node key ${fingerprint(config.nodeKey)}${claims}`;
  if (!parsed.ok) return `its status.json does not parse: ${parsed.problems[0]?.message}`;
  const r = parsed.value;
  if (r.node !== config.node || r.generation !== config.generation || !sameKeyIfWellFormed(r.nodeKey, config.nodeKey)) return `it is report #${r.sequence} of ${r.node} generation ${r.generation}, not of this machine (${config.node} generation ${config.generation})`;
  return r;
}

function foreignTip(node: string, tip: string, why: string): MeshError {
  return new MeshError(
    'E_REPORT_BRANCH_FOREIGN',
    `the server's reports/${node} (${tip.slice(0, 12)}) holds a report this machine did not make: ${why}. It is neither adopted nor pushed over; ` +
      `this machine keeps its reports until the branch holds one of its own again. Someone with this node's credential or the operator's rewrote the branch: ` +
      `look at it ('mesh-cli status'), then put back the last report this machine made, or revoke the node ('mesh-cli revoke ${node}') if its credential leaked`,
    { next: 'human', data: { tip } },
  );
}

/** `sha256:<hex>` of `text`: how a report names the one before it. */
export function sha256(text: string): string {
  return 'sha256:' + createHash('sha256').update(text).digest('hex');
}

