/**
 * The reports as the operator sees them: main fetched, every report branch's last report kept
 * in the checkout's report index (report-index.ts), each verified against the identity chain
 * on main (agent/verify-report.ts).
 * status, validate, plan and the rollout of a commit all read reports through here, so
 * they agree about which reports count: only those whose signature is valid.
 */
import { NodeIdentity } from '../schema/fleet.js';
import { loadYaml } from '../core/load.js';
import type { Report, ReportView } from '../schema/report.js';
import type { ReportedFacts } from '../schema/facts.js';
import { verifyReport, type Verdict, type VerifiedReport } from '../core/report/verify.js';
import { messageOf, placed } from '../core/errors.js';
import type { ChainVerdict } from './chain.js';
import { openReportStore, refreshIndex, type Network, type ReportIndex } from './report-index.js';
import { commitOf, tipOf } from './report-objects.js';
import type { GitObject } from './status/git-remote.js';
import { catFiles, type Fleet } from './fleet.js';
import { reportRef } from '../core/report/branch.js';
import { git } from './git.js';
import { nodeYamls } from './layout.js';

/** The fetched main branch, which is what identities and ancestry are read from. */
export function mainRef(fleet: Fleet): string {
  return `refs/remotes/origin/${fleet.config.mainBranch}`;
}

const indexes = new WeakMap<Fleet, ReportIndex>();

/**
 * Fetch main (when it moved), and bring the report index up to date with origin's report branches
 * (report-index.ts); `onMain` is called as soon as main is fetched, before the reports are read,
 * with the nodes on it as the refresh reads them (what nodesOnMain would read again). With
 * `partial`, a report shard that does not answer leaves its nodes as the last refresh saw them,
 * and `partial` is called with those shards (Network.partial); without it, the fetch fails.
 */
export async function fetchReports(fleet: Fleet, onMain?: Network['onMain'], partial?: Network['partial']): Promise<void> {
  indexes.set(fleet, await refreshIndex(fleet, mainRef(fleet), { mainBranch: fleet.config.mainBranch, fetchMain: () => fetchMain(fleet), ...(onMain ? { onMain } : {}), ...(partial ? { partial } : {}) }));
}

function fetchMain(fleet: Fleet): Promise<string> {
  const main = fleet.config.mainBranch;
  return git(fleet.dir, ['fetch', 'origin', `+refs/heads/${main}:refs/remotes/origin/${main}`]);
}

/** Fetch like `fetchReports`, but a failure becomes a note (the reports already fetched are used). */
export async function tryFetchReports(fleet: Fleet): Promise<string | null> {
  try {
    await fetchReports(fleet);
    return null;
  } catch (e) {
    return `could not fetch reports from origin (${messageOf(e).split('\n')[0]}); using the reports fetched before`;
  }
}

/** A report commit on a node's branch with its texts (null: the file is not in the commit). */
export interface BranchReport {
  commit: string;
  status: string | null;
  sig: string | null;
}

/**
 * The last `depth` reports on `node`'s branch, newest first; null when it has no branch. Read
 * the way status reads reports (report-index.ts): with `fetch`, main and the branch's tip are
 * fetched (`depth` commits deep) into the report store; without, the tip status last saw is read
 * from that store as far as it holds it.
 */
export async function branchReports(fleet: Fleet, node: string, depth: number, fetch: boolean): Promise<BranchReport[] | null> {
  const remote = await openReportStore(fleet);
  try {
    let tip: string | undefined;
    let objects: Map<string, GitObject>;
    if (fetch) {
      const [refs] = await Promise.all([remote.lsRefs([reportRef(node)]), fetchMain(fleet)]);
      tip = refs.get(reportRef(node));
      if (!tip) return null;
      objects = await remote.fetchObjects({ wants: [tip], nodes: [node], deepen: depth });
    } else {
      tip = (await reportIndex(fleet)).get(node)?.commit;
      if (!tip) return null;
      objects = await remote.readObjects({ wants: [tip], deepen: depth });
    }
    const out: BranchReport[] = [];
    for (let at: string | null = tip; at !== null && out.length < depth;) {
      const commit = commitOf(objects, at);
      if (!commit) break;
      const { status, sig } = tipOf(objects, at);
      out.push({ commit: at, status: status?.toString('utf8') ?? null, sig: sig?.toString('utf8') ?? null });
      at = commit.parent;
    }
    return out;
  } finally {
    await remote.close();
  }
}

/** The report index as fetched before (verified again where node.yaml on main changed). */
async function reportIndex(fleet: Fleet): Promise<ReportIndex> {
  let index = indexes.get(fleet);
  if (!index) indexes.set(fleet, (index = await refreshIndex(fleet, mainRef(fleet), null)));
  return index;
}

/** Nodes that have a report branch (as last fetched). */
export async function reportedNodes(fleet: Fleet): Promise<string[]> {
  return [...(await reportIndex(fleet)).keys()];
}

/** Each node's node.yaml on the fetched main, wherever it sits under nodes/ (null: its name is in two folders). */
export async function nodesOnMain(fleet: Fleet): Promise<Map<string, string | null>> {
  const listing = await git(fleet.dir, ['ls-tree', '-r', '-z', '--name-only', mainRef(fleet), '--', 'nodes/']).catch(() => '');
  return nodeYamls(listing.split('\0').filter(Boolean));
}

/** Each node's identity (its node.yaml on the fetched main), null when it has none or it is broken. */
export async function identities(fleet: Fleet, nodes: string[]): Promise<Map<string, NodeIdentity | null>> {
  const files = await nodesOnMain(fleet);
  const spec = (n: string) => `${mainRef(fleet)}:${files.get(n)}`;
  const found = nodes.filter((n) => files.get(n));
  const blobs = await catFiles(fleet.dir, found.map(spec));
  return new Map(
    nodes.map((n) => {
      const text = files.get(n) ? blobs.get(spec(n))?.toString('utf8') : undefined;
      const loaded = text === undefined ? null : loadYaml(text, files.get(n)!, NodeIdentity);
      return [n, loaded?.ok ? loaded.value : null];
    }),
  );
}

/** Verify each of `reports` (of `node`'s branch) against `identity`, by commit. */
export function verifyEach(node: string, reports: BranchReport[], identity: NodeIdentity | null): Map<string, VerifiedReport & { text: string | null }> {
  return new Map(reports.map((r) => [r.commit, { ...verifyReport(node, r.status, r.sig, identity), text: r.status }]));
}

/** A node's last report as status shows it: the verdict on its signature and what it says (ReportView). */
export type ShownReport = Verdict & { report?: ReportView };

/** Every node's last report, verified, with its chain verdict; nodes without a branch map to `missing`. */
export async function lastReports(fleet: Fleet, nodes: string[]): Promise<Map<string, ShownReport & { chain: ChainVerdict }>> {
  const index = await reportIndex(fleet);
  return new Map(
    nodes.map((n) => {
      const tip = index.get(n);
      if (!tip) return [n, { signature: 'missing' as const, reason: 'no status.json on the report branch', chain: 'ok' as const }];
      return [n, { ...tip.verdict, ...(tip.report ? { report: tip.report } : {}), chain: tip.chain }];
    }),
  );
}

/** The report if its signature is valid; a report that does not verify says nothing about the node. */
export function trusted<R extends ReportView>(verified: (Verdict & { report?: R }) | undefined): R | undefined {
  return verified?.signature === 'valid' ? verified.report : undefined;
}

/** Each reported node's facts, from its last verified report: what its host renders with, so plan and status render with them too. */
export async function reportedFacts(fleet: Fleet): Promise<(node: string) => ReportedFacts | undefined> {
  const known = await lastReports(fleet, await reportedNodes(fleet));
  return (node) => trusted(known.get(node))?.facts;
}

/** Whether `report` says the node may be given resources, and why not. */
export function eligibility(report: ReportView | undefined): { eligible: boolean | null; reason?: string } {
  if (!report) return { eligible: null };
  const failed = report.briefing?.filter((b) => !b.ok) ?? [];
  if (report.outcome === 'ineligible' || failed.length > 0) {
    const why = failed.map((b) => `${b.check}: ${b.detail}`).join('; ') || report.errors.map((e) => e.message).join('; ');
    return { eligible: false, reason: why || 'its last report says it is ineligible' };
  }
  return { eligible: true };
}

/** The lines that say why a report failed: declaration problems with their place, then failed resources. */
export function failureLines(report: ReportView): string[] {
  const lines = report.errors.map(placed);
  return [...lines, ...report.resources.filter((r) => r.result === 'failed').map((r) => `${r.id}: ${r.error ?? 'failed'}`)];
}

/** The checks a pass could not make, one line per resource: why its outcome is `unverified`, not applied. */
export function uncheckedLines(report: ReportView): string[] {
  return report.resources.filter((r) => r.result === 'unverified').map((r) => `${r.id}: ${r.error ?? 'could not be checked here'}`);
}

/** The newest report on `node`'s branch whose signature is valid, looking back at most `depth` reports. */
export async function newestValid(fleet: Fleet, node: string, depth = 20): Promise<Report | undefined> {
  return (await validReports(fleet, node, depth, true))[0];
}

/** The last `depth` reports of `node` whose signatures verify, newest first (as last fetched, unless `fetch`); `identity` when the caller read it already. */
export async function validReports(fleet: Fleet, node: string, depth: number, fetch = false, identity?: NodeIdentity | null): Promise<Report[]> {
  const reports = (await branchReports(fleet, node, depth, fetch).catch(() => null)) ?? [];
  const verified = verifyEach(node, reports, identity !== undefined ? identity : ((await identities(fleet, [node])).get(node) ?? null));
  return reports.map((r) => trusted(verified.get(r.commit))).filter((r): r is Report => r !== undefined);
}
