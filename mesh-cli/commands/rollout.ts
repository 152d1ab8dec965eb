/**
 * `mesh-cli status --commit REV [--wait DURATION]`: the honest answer to "is it out?". The
 * declaration is updated at REV; here is which affected nodes applied it, which failed and
 * why, and which are outstanding with their last contact. `--wait` polls (one fetch each
 * time) until nothing is outstanding or the time is up, and never turns outstanding into failed.
 * Exit codes: 0 none failed, 1 some failed (2, for usage and fleet errors, is set in main.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { MeshError } from '../../core/errors.js';
import type { Report } from '../../schema/report.js';
import { changedNodes } from '../declarations.js';
import { contact } from '../../core/duration.js';
import type { Fleet } from '../fleet.js';
import { fetchReports, lastReports, mainRef, newestValid, reportedFacts, trusted } from '../reports.js';
import { classify, rolloutLine, type Rollout } from '../rollout.js';
import { firstParent, isAncestor, resolveCommit } from '../tree.js';
import { git } from '../git.js';

/** Options of `status --commit`. */
export interface RolloutOptions {
  rev: string;
  json: boolean;
  fetch: boolean;
  waitMs?: number;
  pollMs: number;
}

/** The nodes whose resolved declaration changed at `commit` (against its first parent), each rendered with the facts it last reported. */
export async function affectedAt(fleet: Fleet, commit: string): Promise<string[]> {
  return (await changedNodes(fleet.dir, await firstParent(fleet.dir, commit), commit, await reportedFacts(fleet))).map((c) => c.node);
}

/** Classify `affected` by the reports fetched now. */
export async function rolloutAt(fleet: Fleet, commit: string, affected: string[]): Promise<Rollout> {
  const reports = await lastReports(fleet, affected);
  const earlier = new Map<string, Report>();
  for (const [node, v] of reports) {
    if (v.signature === 'valid' || v.signature === 'missing') continue;
    const older = await newestValid(fleet, node);
    if (older) earlier.set(node, older);
  }
  const commits = new Set([...reports.values()].map((v) => trusted(v)?.commit).concat([...earlier.values()].map((r) => r.commit)));
  const after = new Map<string, boolean>();
  for (const c of commits) if (c) after.set(c, await isAncestor(fleet.dir, commit, c));
  return classify(commit, affected, reports, (c) => after.get(c) ?? false, earlier);
}

/** Run `status --commit`: print the rollout and set the exit code. */
export async function rolloutCommand(fleet: Fleet, o: RolloutOptions): Promise<void> {
  if (o.fetch) await fetchReports(fleet);
  const commit = await resolveCommit(fleet.dir, o.rev);
  const onMain = await isAncestor(fleet.dir, commit, mainRef(fleet));
  if (!onMain) console.error(`note: ${commit.slice(0, 12)} is not on ${fleet.config.mainBranch} (as fetched from origin); hosts apply only ${fleet.config.mainBranch}`);
  const affected = await affectedAt(fleet, commit);
  const deadline = Date.now() + (o.waitMs ?? 0);
  let rollout = await rolloutAt(fleet, commit, affected);
  let waiting = '';
  while (rollout.outstanding.length > 0 && Date.now() < deadline) {
    const now = `waiting for ${rollout.outstanding.map((n) => n.node).join(', ')}`;
    if (now !== waiting && !o.json) console.error(now);
    waiting = now;
    await sleep(Math.min(o.pollMs, Math.max(0, deadline - Date.now())));
    if (o.fetch) await fetchReports(fleet).catch((e: unknown) => console.error(`note: fetch failed, trying again: ${e instanceof MeshError ? e.message : String(e)}`));
    rollout = await rolloutAt(fleet, commit, affected);
  }
  const subject = (await git(fleet.dir, ['log', '-1', '--format=%s', commit])).trim();
  console.log(o.json ? JSON.stringify(rollout) : formatRollout(rollout, subject, new Date(), o.waitMs !== undefined));
  if (rollout.failed.length > 0) process.exitCode = 1;
}

/** The rollout for a person: a line over all, then one line per node (failures with their lines). */
export function formatRollout(r: Rollout, subject: string, now: Date, waited: boolean): string {
  const lines = [`rollout of ${r.commit.slice(0, 12)} "${subject}": ${rolloutLine(r)}`];
  const width = Math.max(0, ...r.affected.map((n) => n.length));
  const at = (commit: string, later: boolean) => `at ${commit.slice(0, 12)}${later ? ' (a later commit)' : ''}`;
  for (const a of r.applied) lines.push(`applied      ${a.node.padEnd(width)}  ${at(a.commit, a.later)}, ${contact(a.lastContact, now)}`);
  for (const f of r.failed) {
    lines.push(`failed       ${f.node.padEnd(width)}  ${at(f.commit, f.later)}: ${f.reason}`);
    for (const e of f.errors) lines.push(`${' '.repeat(15 + width)}${e}`);
  }
  for (const o of r.outstanding) {
    const last = o.lastContact ? `last contact ${contact(o.lastContact, now)}${o.commit ? ` at ${o.commit.slice(0, 12)}` : ''}` : 'never reported';
    lines.push(`outstanding  ${o.node.padEnd(width)}  ${last}${o.reason && o.reason !== 'no report yet' ? ` (${o.reason})` : ''}`);
  }
  if (waited && r.outstanding.length > 0) lines.push(`still outstanding when the wait ended: ${r.outstanding.map((o) => o.node).join(', ')} (not failed: they have not reported yet)`);
  return lines.join('\n');
}
