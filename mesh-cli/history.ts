/**
 * One node's report history (`mesh-cli status --node NAME`): the `git log` of its report
 * branch, every report verified on its own, and the hash chain between neighbours checked
 * (each report names the sha256 of the one before it, so a replayed or dropped report shows).
 */
import { MeshError } from '../core/errors.js';
import type { SignatureVerdict } from '../core/report/verify.js';
import type { Report } from '../schema/report.js';
import { sha256 } from './chain.js';
import type { Fleet } from './fleet.js';
import { contact } from '../core/duration.js';
import { branchReports, failureLines, identities, verifyEach } from './reports.js';

/** One report on a node's report branch, as verified now. */
export interface HistoryEntry {
  /** The commit on the report branch. */
  report: string;
  signature: SignatureVerdict;
  reason?: string;
  sequence: number | null;
  kind: Report['kind'] | null;
  observedAt: string | null;
  commit: string | null;
  outcome: Report['outcome'] | null;
  hostVersion: string | null;
  errors?: string[];
  /** ok: names the report below it; gap: it does not (a report missing or replaced); first: the first report. */
  chain?: 'ok' | 'gap' | 'first';
}

/** A node's recent reports, newest first. */
export interface History {
  node: string;
  entries: HistoryEntry[];
}

/** The last `limit` reports of `node`, newest first (fetched from origin first unless `fetch` is false). */
export async function reportHistory(fleet: Fleet, node: string, limit: number, fetch: boolean): Promise<History> {
  const reports = await branchReports(fleet, node, limit + 1, fetch);
  if (reports === null) throw new MeshError('E_NO_REPORTS', `there is no report branch reports/${node} ${fetch ? 'on origin' : 'in what status last fetched'}: check the node name with 'mesh-cli status'`);
  const commits = reports.map((r) => r.commit);
  const identity = (await identities(fleet, [node])).get(node) ?? null;
  const verified = verifyEach(node, reports, identity);
  const entries = commits.slice(0, limit).map((c, i): HistoryEntry => {
    const v = verified.get(c)!;
    const r = v.report;
    const below = commits[i + 1] ? verified.get(commits[i + 1]!)?.text : undefined;
    const chain = !r ? undefined : r.previous === null ? 'first' : below === undefined ? undefined : below !== null && r.previous === sha256(below) ? 'ok' : 'gap';
    const errors = r && v.signature === 'valid' ? failureLines(r) : [];
    return {
      report: c,
      signature: v.signature,
      ...(v.reason ? { reason: v.reason } : {}),
      sequence: r?.sequence ?? null,
      kind: r?.kind ?? null,
      observedAt: r?.observedAt ?? null,
      commit: r?.commit ?? null,
      outcome: r?.outcome ?? null,
      hostVersion: r?.hostVersion ?? null,
      ...(errors.length ? { errors } : {}),
      ...(chain ? { chain } : {}),
    };
  });
  return { node, entries };
}

/** One line per report, newest first; what a report that does not verify claims is marked as a claim. */
export function formatHistory(history: History, now: Date): string {
  const lines = [`reports/${history.node}: last ${history.entries.length} report${history.entries.length === 1 ? '' : 's'}, newest first`];
  for (const e of history.entries) {
    const claim = e.signature === 'valid' ? '' : ' (claimed, not verified)';
    const at = e.commit ? `at ${e.commit.slice(0, 12)}` : 'no commit';
    const chain = e.chain === 'gap' ? '  chain: the report before it is missing' : '';
    lines.push(`#${e.sequence ?? '?'}  ${contact(e.observedAt, now)}  ${e.kind ?? '-'}  ${e.outcome ?? '-'}${claim}  ${at}  ${e.hostVersion ?? '-'}  signature ${e.signature}${chain}`);
    if (e.reason) lines.push(`    ${e.reason}`);
    for (const err of e.errors ?? []) lines.push(`    ${err}`);
  }
  return lines.join('\n');
}
