/**
 * `mesh-cli status --commit REV [--since BASE] [--wait DURATION]`: the honest answer to "is it
 * out?". The declaration is updated at REV; here is which nodes the change from BASE (default:
 * REV's first parent) affected, which applied it, which failed and why, and which are
 * outstanding with their last contact. `--wait` polls (one fetch each time) until nothing is
 * outstanding or the time is up, and never turns outstanding into failed. Exit codes (core/exit.ts):
 * 0 every affected node applied it, 1 some failed or are unverified, 4 some are outstanding or never reported.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { MeshError } from '../../core/errors.js';
import type { Report, ReportView } from '../../schema/report.js';
import { EXIT } from '../../core/exit.js';
import { changedNodes } from '../declarations.js';
import { contact } from '../../core/duration.js';
import type { Fleet } from '../fleet.js';
import { fetchReports, identities, lastReports, mainRef, newestValid, reportedFacts, trusted, validReports } from '../reports.js';
import { APPLIED, classify, rolloutLine, type Rollout } from '../rollout.js';
import { firstParent, isAncestor, resolveCommit } from '../tree.js';
import { git } from '../git.js';

/** Options of `status --commit`. */
export interface RolloutOptions {
  rev: string;
  /** What the change is measured from (default: REV's first parent). */
  since?: string;
  json: boolean;
  fetch: boolean;
  waitMs?: number;
  pollMs: number;
}

/** A node whose rendered declaration changed, with the digest of what it is at the commit under review (null: it does not render there). */
export interface AffectedNode {
  node: string;
  digest: string | null;
}

/** The nodes whose rendered declaration changed between `since` (default: `commit`'s first parent) and `commit`, each rendered with the facts it last reported. */
export async function affectedAt(fleet: Fleet, commit: string, since?: string): Promise<AffectedNode[]> {
  const base = since ?? (await firstParent(fleet.dir, commit));
  const changed = await changedNodes(fleet.dir, base, commit, await reportedFacts(fleet));
  return changed.map((c) => ({ node: c.node, digest: c.head.ok ? c.head.declaration.digest : null }));
}

/** How many of a node's reports are looked through for the one that applied the commit before its last one did not. */
const LOOK_BACK = 50;

/** Classify `affected` by the reports fetched now: each node judged by the report it made at or after the commit. */
export async function rolloutAt(fleet: Fleet, commit: string, affected: AffectedNode[]): Promise<Rollout> {
  const nodes = affected.map((a) => a.node);
  const reports = await lastReports(fleet, nodes);
  const earlier = new Map<string, Report>();
  for (const [node, v] of reports) {
    if (v.signature === 'valid' || v.signature === 'missing') continue;
    const older = await newestValid(fleet, node);
    if (older) earlier.set(node, older);
  }
  const after = new Map<string, Promise<boolean>>();
  const atOrAfter = (c: string) => after.get(c) ?? after.set(c, isAncestor(fleet.dir, commit, c)).get(c)!;
  const digests = new Map(affected.map((a) => [a.node, a.digest]));
  const sameDeclaration = (node: string, r: ReportView) => r.digest !== null && r.digest === digests.get(node);
  const reaches = async (node: string, r: ReportView) => r.commit !== null && (sameDeclaration(node, r) || (await atOrAfter(r.commit)));
  // A node whose last report at or after the commit did not apply it may have applied it before: that report is its verdict.
  const appliedBefore = new Map<string, ReportView>();
  const lookBack: string[] = [];
  for (const node of nodes) {
    const last = trusted(reports.get(node)) ?? earlier.get(node);
    if (last && !APPLIED.has(last.outcome) && (await reaches(node, last))) lookBack.push(node);
  }
  const ids = lookBack.length > 0 ? await identities(fleet, lookBack) : new Map();
  for (const node of lookBack) {
    for (const r of await validReports(fleet, node, LOOK_BACK, false, ids.get(node) ?? null)) {
      if (!(await reaches(node, r))) break; // reports before the commit: it never applied it
      if (APPLIED.has(r.outcome)) {
        appliedBefore.set(node, r);
        break;
      }
    }
  }
  const known = new Map<string, boolean>();
  for (const [c, p] of after) known.set(c, await p);
  for (const r of [...reports.values()].map((v) => trusted(v)).concat([...earlier.values()])) {
    if (r?.commit && !known.has(r.commit)) known.set(r.commit, await atOrAfter(r.commit));
  }
  return classify(commit, nodes, reports, (c) => known.get(c) ?? false, earlier, { sameDeclaration, appliedBefore });
}

/** Run `status --commit`: print the rollout and set the exit code (DESIGN.md's table: 1 failed or unverified, 4 not there yet, 0 done). */
export async function rolloutCommand(fleet: Fleet, o: RolloutOptions): Promise<void> {
  if (o.fetch) await fetchReports(fleet);
  const commit = await resolveCommit(fleet.dir, o.rev);
  const since = o.since === undefined ? undefined : await resolveCommit(fleet.dir, o.since);
  const onMain = await isAncestor(fleet.dir, commit, mainRef(fleet));
  if (!onMain) console.error(`note: ${commit.slice(0, 12)} is not on ${fleet.config.mainBranch} (as fetched from origin); hosts apply only ${fleet.config.mainBranch}`);
  const affected = await affectedAt(fleet, commit, since);
  const deadline = Date.now() + (o.waitMs ?? 0);
  let rollout = await rolloutAt(fleet, commit, affected);
  let waiting = '';
  const pending = (r: Rollout) => [...r.outstanding.map((n) => n.node), ...r.unknown];
  while (pending(rollout).length > 0 && Date.now() < deadline) {
    const now = `waiting for ${pending(rollout).join(', ')}`;
    if (now !== waiting && !o.json) console.error(now);
    waiting = now;
    await sleep(Math.min(o.pollMs, Math.max(0, deadline - Date.now())));
    if (o.fetch) await fetchReports(fleet).catch((e: unknown) => console.error(`note: fetch failed, trying again: ${e instanceof MeshError ? e.message : String(e)}`));
    rollout = await rolloutAt(fleet, commit, affected);
  }
  const subject = (await git(fleet.dir, ['log', '-1', '--format=%s', commit])).trim();
  console.log(o.json ? JSON.stringify(rollout) : formatRollout(rollout, subject, new Date(), o.waitMs !== undefined));
  if (rollout.failed.length > 0 || rollout.unverified.length > 0) process.exitCode = EXIT.failed;
  else if (pending(rollout).length > 0) process.exitCode = EXIT.notYet;
}

/** The rollout for a person: a line over all, then one line per node (failures with their lines). */
export function formatRollout(r: Rollout, subject: string, now: Date, waited: boolean): string {
  const lines = [`rollout of ${r.commit.slice(0, 12)} "${subject}": ${rolloutLine(r)}`];
  const width = Math.max(0, ...r.affected.map((n) => n.length));
  const at = (commit: string, later: boolean) => `at ${commit.slice(0, 12)}${later ? ' (a later commit)' : ''}`;
  for (const a of r.applied) lines.push(`applied      ${a.node.padEnd(width)}  ${at(a.commit, a.later)}, ${contact(a.lastContact, now)}${a.note ? ` (${a.note})` : ''}`);
  for (const u of r.unverified) {
    lines.push(`unverified   ${u.node.padEnd(width)}  ${at(u.commit, u.later)}: converged, but not every check could be made there`);
    for (const e of u.unchecked) lines.push(`${' '.repeat(15 + width)}${e}`);
  }
  for (const f of r.failed) {
    lines.push(`failed       ${f.node.padEnd(width)}  ${at(f.commit, f.later)}: ${f.reason}`);
    for (const e of f.errors) lines.push(`${' '.repeat(15 + width)}${e}`);
  }
  for (const o of r.outstanding) {
    const last = o.lastContact ? `last contact ${contact(o.lastContact, now)}${o.commit ? ` at ${o.commit.slice(0, 12)}` : ''}` : 'never reported';
    lines.push(`outstanding  ${o.node.padEnd(width)}  ${last}${o.reason && o.reason !== 'no report yet' ? ` (${o.reason})` : ''}`);
  }
  for (const node of r.unknown) lines.push(`unknown      ${node.padEnd(width)}  never reported`);
  const pending = [...r.outstanding.map((o) => o.node), ...r.unknown];
  if (waited && pending.length > 0) lines.push(`still outstanding when the wait ended: ${pending.join(', ')} (not failed: they have not reported yet)`);
  return lines.join('\n');
}
