/**
 * The hash chain of each node's reports, as `mesh-cli status` checks it. Each report names the
 * sha256 of the one before it and the next sequence number, so:
 *
 * - reordered: the tip's `previous` is not the hash of its parent commit's status.json, or its
 *   sequence is not the parent's + 1 (a heartbeat that replaced an earlier heartbeat may skip
 *   numbers: the report it names is gone by design);
 * - forked: the tip does not descend from the tip seen last time, unless that one was a
 *   heartbeat and the new tip descends from its parent (it was replaced); the verdict stays
 *   while that tip does;
 * - replayed: the tip's sequence is lower than one already seen from a valid report.
 *
 * What was seen lives in the checkout's report index (report-index.ts), so a server that
 * rewinds a report branch between two runs of status is caught on the second. This file is
 * pure: the index hands it the commits it fetched.
 */
import { hash } from 'node:crypto';
import type { Verdict } from '../core/report/claims.js';
import type { ReportView } from '../schema/report.js';

export type ChainVerdict = 'ok' | 'replayed' | 'reordered' | 'forked';

/** What each verdict other than ok means, as status prints it. */
export const CHAIN_NOTES: Record<Exclude<ChainVerdict, 'ok'>, string> = {
  replayed: 'the last report is older than one status has already seen: the report branch was rewound to a replayed report',
  reordered: 'the last report does not follow the report before it on its branch (wrong previous hash or sequence)',
  forked: 'the report branch was rewritten: its tip does not descend from the tip status saw before',
};

/** A report's place in its chain: the hash of its status.json and its sequence (null when unreadable). */
export interface Link {
  sha: string;
  sequence: number | null;
}

/** A report commit as the chain check remembers it. */
export interface SeenTip {
  commit: string;
  parent: string | null;
  heartbeat: boolean;
  /** This report's link (null: no status.json). */
  link: Link | null;
  /** Its parent's link, when it was known. */
  parentLink: Link | null;
}

/** The chain state of one branch, updated by `chainStep`. */
export interface ChainState {
  maxSequence: number;
  forked: string[];
  tip: SeenTip & { verdict: Verdict; report?: ReportView | null };
}

/** Commits fetched with the new tip: parent and link of `oid`, undefined when it was not fetched. */
export type Lookup = (oid: string) => { parent: string | null; link: Link | null } | undefined;

/** The verdict for `state.tip`, a new tip after `seen` (undefined: first sight); updates the state. */
export function chainStep(seen: SeenTip | undefined, state: ChainState, lookup: Lookup): ChainVerdict {
  const tip = state.tip;
  if (seen && !descends(tip, seen, lookup)) state.forked = [...state.forked.slice(-19), tip.commit];
  tip.parentLink = parentLink(tip, seen, lookup);
  const report = tip.verdict.signature === 'valid' ? (tip.report ?? null) : null;
  const replayed = report !== null && report.sequence < state.maxSequence;
  if (report) state.maxSequence = Math.max(state.maxSequence, report.sequence);
  const ordered = !report || tip.parent === null || (tip.parentLink !== null && inOrder(report.previous, report.sequence, tip.parentLink, tip.heartbeat));
  return replayed ? 'replayed' : state.forked.includes(tip.commit) ? 'forked' : ordered ? 'ok' : 'reordered';
}

/** Whether a report (previous, sequence) follows its parent's `link`. */
export function inOrder(previous: string | null, sequence: number, link: Link, heartbeat: boolean): boolean {
  if (link.sequence === null) return false;
  if (previous === link.sha && sequence === link.sequence + 1) return true;
  return heartbeat && sequence > link.sequence;
}

/** Whether walking parents from `tip` reaches `seen` (or, when `seen` was a heartbeat, the report it sat on). */
function descends(tip: SeenTip, seen: SeenTip, lookup: Lookup): boolean {
  let at = tip.commit;
  for (let steps = 0; steps < 100_000; steps++) {
    if (at === seen.commit || (seen.heartbeat && at === seen.parent)) return true;
    const parent = at === tip.commit ? tip.parent : lookup(at)?.parent;
    if (!parent) return false;
    at = parent;
  }
  return false;
}

function parentLink(tip: SeenTip, seen: SeenTip | undefined, lookup: Lookup): Link | null {
  if (tip.parent === null) return null;
  if (seen && tip.parent === seen.commit) return seen.link;
  const fetched = lookup(tip.parent);
  if (fetched) return fetched.link;
  return seen?.heartbeat && tip.parent === seen.parent ? seen.parentLink : null;
}

/** "sha256:<hex>" of a report's text, as reports name the one before them. */
export function sha256(text: string): string {
  return 'sha256:' + hash('sha256', text);
}
