/**
 * The rollout of one commit, as a pure classification over verified reports. The affected
 * nodes are those whose resolved declaration changed at the commit; each is
 *
 * - applied: its last valid report is at the commit or a descendant, with a successful outcome
 *   (a node that skipped straight to a later commit counts: ancestry, not equality);
 * - failed: its last valid report is at the commit or a descendant, and failed (or it is ineligible);
 * - outstanding: no valid report at or after the commit yet.
 *
 * Outstanding is never failed and failed is never outstanding; a report whose signature does
 * not verify never counts as applied.
 */
import type { ReportView } from '../schema/report.js';
import type { ShownReport } from './reports.js';
import { eligibility, failureLines, trusted } from './reports.js';

/** An affected node whose last valid report applied the commit or a later one. */
export interface Applied {
  node: string;
  commit: string;
  lastContact: string;
  /** True when the node applied a later commit (a descendant), not this one exactly. */
  later: boolean;
}

/** An affected node with no valid report at or after the commit yet. */
export interface Outstanding {
  node: string;
  lastContact: string | null;
  /** The commit of its last valid report, if any. */
  commit: string | null;
  /** Why there is no usable report, when there is a reason beyond "not yet". */
  reason?: string;
}

/** An affected node whose last valid report, at the commit or later, failed. */
export interface Failed {
  node: string;
  reason: string;
  commit: string;
  lastContact: string;
  later: boolean;
  /** The failing resource lines and declaration problems, as the host reported them. */
  errors: string[];
}

/** The rollout of one commit (the JSON of `status --commit`). */
export interface Rollout {
  commit: string;
  affected: string[];
  applied: Applied[];
  outstanding: Outstanding[];
  failed: Failed[];
}

/**
 * Classify every affected node by its last report. `atOrAfter(c)` says whether commit `c` is
 * `commit` or one of its descendants; `earlier` holds, for nodes whose last report does not
 * verify, the newest earlier report that does (if any).
 */
export function classify(commit: string, affected: string[], reports: Map<string, ShownReport>, atOrAfter: (c: string) => boolean, earlier = new Map<string, ReportView>()): Rollout {
  const rollout: Rollout = { commit, affected, applied: [], outstanding: [], failed: [] };
  for (const node of affected) {
    const verified = reports.get(node);
    const report = trusted(verified) ?? earlier.get(node);
    const unverified = verified && verified.signature !== 'valid' && verified.signature !== 'missing' ? `its last report's signature is ${verified.signature}: ${verified.reason}` : undefined;
    if (!report || !report.commit || !atOrAfter(report.commit)) {
      const reason = unverified ?? (report ? undefined : 'no report yet');
      rollout.outstanding.push({ node, lastContact: report?.observedAt ?? null, commit: report?.commit ?? null, ...(reason ? { reason } : {}) });
      continue;
    }
    const at = { commit: report.commit, lastContact: report.observedAt, later: report.commit !== commit };
    if (report.outcome === 'applied' || report.outcome === 'retired') rollout.applied.push({ node, ...at });
    else if (report.outcome === 'failed') {
      const errors = failureLines(report);
      const failedResources = report.resources.filter((r) => r.result === 'failed').length;
      const reason = report.errors.length > 0 ? 'the declaration is invalid' : `${failedResources} resource${failedResources === 1 ? '' : 's'} failed`;
      rollout.failed.push({ node, reason, ...at, errors });
    } else if (report.outcome === 'untrusted') {
      rollout.failed.push({ node, reason: `refused as untrusted: ${report.errors[0]?.message ?? 'the commit did not pass the trust check'}`, ...at, errors: [] });
    } else if (report.outcome === 'ineligible') {
      rollout.failed.push({ node, reason: `ineligible: ${eligibility(report).reason}`, ...at, errors: [] });
    } else rollout.outstanding.push({ node, lastContact: report.observedAt, commit: report.commit, reason: `${report.outcome} at ${report.commit.slice(0, 12)}, not applied yet` });
  }
  return rollout;
}

/** "3 nodes affected: 1 applied, 1 failed, 1 outstanding". */
export function rolloutLine(r: Rollout): string {
  const n = r.affected.length;
  return `${n} node${n === 1 ? '' : 's'} affected: ${r.applied.length} applied, ${r.failed.length} failed, ${r.outstanding.length} outstanding`;
}
