/**
 * Building, signing and sending the report. status.json is signed with the node key
 * (OpenSSH signature, namespace mesh-report) and committed with an SSH-signed commit on
 * the local branch reports/<node>, whose parent is the host's own previous report, so a
 * shallow host never needs history to push. An unsent report stays on the local branch
 * and goes out with the next push.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { REPORT_NAMESPACE, type OwnedRecord, type Report } from '../schema/report.js';
import type { HostConfig } from './config.js';
import type { FleetRepo } from './fleet/git.js';
import { gitSigner, signSsh } from '../core/sign/sshsig.js';
import type { Store } from './store/store.js';
import { HOST_VERSION } from '../core/version.js';
import { SIGNATURE_FILE, STATUS_FILE, reportRef } from '../core/report/branch.js';

export type ReportBody = Pick<Report, 'kind' | 'commit' | 'digest' | 'outcome' | 'errors' | 'resources'> & Partial<Pick<Report, 'counts' | 'facts' | 'profile' | 'inventory' | 'briefing' | 'signer' | 'trust' | 'lastApplied'>>;

/** The full report for this pass, chained to the previous one in the store. */
export function buildReport(config: HostConfig, store: Store, body: ReportBody, now: Date): Report {
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
    owned: store.data.owned.map(recoveryCopy),
  };
}

/** The owned set as the report carries it: identities and declared fields, never the prior contents of files. */
function recoveryCopy(record: OwnedRecord): OwnedRecord {
  const prior = record.prior ? { existed: Boolean(record.prior.existed) } : null;
  const { content: _content, ...resource } = record.resource;
  return { ...record, resource, prior };
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
  store.save();
  return oid;
}

/** Push the local report branch; marks the store as sent on success. */
export async function sendReports(repo: FleetRepo, store: Store, node: string): Promise<void> {
  await repo.push(reportRef(node));
  store.data.report.pushed = true;
  store.save();
}

/** `sha256:<hex>` of `text`: how a report names the one before it. */
export function sha256(text: string): string {
  return 'sha256:' + createHash('sha256').update(text).digest('hex');
}

