/**
 * The rollout of one commit, as a pure classification over verified reports. The affected
 * nodes are those whose resolved declaration changed at the commit; each is
 *
 * - applied: it reported applied at the commit, at a descendant (a node that skipped straight to
 *   a later commit counts), or at a commit where its rendered declaration is the same; it is
 *   judged by the report it made then, so a later failure is a note, not a verdict;
 * - unverified: its report at or after the commit converged, but some check could not be made
 *   there (a service's running state without systemd): never applied;
 * - failed: its last valid report at or after the commit failed (or it is ineligible), and none
 *   at or after the commit applied;
 * - outstanding: no valid report at or after the commit yet;
 * - unknown: it has never reported at all (a token issued, not used yet).
 *
 * Outstanding is never failed and failed is never outstanding; a report whose signature does
 * not verify never counts as applied.
 */
import type { ReportView } from '../schema/report.js';
import type { ShownReport } from './reports.js';
import { eligibility, failureLines, trusted, uncheckedLines } from './reports.js';

/** An affected node whose last valid report applied the commit or a later one. */
export interface Applied {
  node: string;
  commit: string;
  lastContact: string;
  /** True when the node applied a later commit (a descendant), not this one exactly (false also for another commit with the same declaration). */
  later: boolean;
  /** What happened after, when its last report did not apply (e.g. "later failed at 1a2b3c4d5e6f"). */
  note?: string;
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

/** An affected node whose last valid report, at the commit or later, converged but could not check everything. */
export interface Unverified {
  node: string;
  commit: string;
  lastContact: string;
  later: boolean;
  /** The checks it could not make, one line per resource. */
  unchecked: string[];
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
  /** Converged, but not verified: never inside `applied`. */
  unverified: Unverified[];
  outstanding: Outstanding[];
  failed: Failed[];
  /** Affected nodes that have never reported (not failed, not outstanding: nothing is known of them). */
  unknown: string[];
}

/** What else classify knows about the affected nodes, beyond their last reports. */
export interface Judging {
  /** Whether `report` was made at a commit where `node`'s rendered declaration is the one under review. */
  sameDeclaration?: (node: string, report: ReportView) => boolean;
  /** For a node whose last report at or after the commit did not apply it: the report that did, made before. */
  appliedBefore?: Map<string, ReportView>;
}

/**
 * Classify every affected node by its last report. `atOrAfter(c)` says whether commit `c` is
 * `commit` or one of its descendants; `earlier` holds, for nodes whose last report does not
 * verify, the newest earlier report that does (if any).
 */
export function classify(commit: string, affected: string[], reports: Map<string, ShownReport>, atOrAfter: (c: string) => boolean, earlier = new Map<string, ReportView>(), judging: Judging = {}): Rollout {
  const rollout: Rollout = { commit, affected, applied: [], unverified: [], outstanding: [], failed: [], unknown: [] };
  const reaches = (node: string, r: ReportView) => r.commit !== null && (atOrAfter(r.commit) || (judging.sameDeclaration?.(node, r) ?? false));
  for (const node of affected) {
    const verified = reports.get(node);
    const report = trusted(verified) ?? earlier.get(node);
    const unverified = verified && verified.signature !== 'valid' && verified.signature !== 'missing' ? `its last report's signature is ${verified.signature}: ${verified.reason}` : undefined;
    if (!report && !unverified) {
      rollout.unknown.push(node);
      continue;
    }
    if (!report || !reaches(node, report)) {
      rollout.outstanding.push({ node, lastContact: report?.observedAt ?? null, commit: report?.commit ?? null, ...(unverified ? { reason: unverified } : {}) });
      continue;
    }
    const at = (r: ReportView) => ({ commit: r.commit!, lastContact: r.observedAt, later: r.commit !== commit && atOrAfter(r.commit!) });
    if (APPLIED.has(report.outcome)) {
      rollout.applied.push({ node, ...at(report) });
      continue;
    }
    const before = judging.appliedBefore?.get(node);
    if (before) {
      rollout.applied.push({ node, ...at(before), note: `later ${report.outcome} at ${report.commit!.slice(0, 12)}` });
      continue;
    }
    if (report.outcome === 'unverified') {
      rollout.unverified.push({ node, ...at(report), unchecked: uncheckedLines(report) });
    } else if (report.outcome === 'failed') {
      const errors = failureLines(report);
      const failedResources = report.resources.filter((r) => r.result === 'failed').length;
      const reason = report.errors.length > 0 ? 'the declaration is invalid' : `${failedResources} resource${failedResources === 1 ? '' : 's'} failed`;
      rollout.failed.push({ node, reason, ...at(report), errors });
    } else if (report.outcome === 'untrusted') {
      rollout.failed.push({ node, reason: `refused as untrusted: ${report.errors[0]?.message ?? 'the commit did not pass the trust check'}`, ...at(report), errors: [] });
    } else if (report.outcome === 'ineligible') {
      rollout.failed.push({ node, reason: `ineligible: ${eligibility(report).reason}`, ...at(report), errors: [] });
    } else rollout.outstanding.push({ node, lastContact: report.observedAt, commit: report.commit, reason: `${report.outcome} at ${report.commit!.slice(0, 12)}, not applied yet` });
  }
  return rollout;
}

/** The outcomes that say a node has the declaration of its commit. */
export const APPLIED: ReadonlySet<string> = new Set(['applied', 'retired']);

/** "3 nodes affected: 1 applied, 1 failed, 1 outstanding". */
export function rolloutLine(r: Rollout): string {
  const n = r.affected.length;
  const unknown = r.unknown.length > 0 ? `, ${r.unknown.length} never reported` : '';
  const unverified = r.unverified.length > 0 ? `, ${r.unverified.length} unverified` : '';
  return `${n} node${n === 1 ? '' : 's'} affected: ${r.applied.length} applied${unverified}, ${r.failed.length} failed, ${r.outstanding.length} outstanding${unknown}`;
}
