/**
 * `mesh-cli status`: main fetched, the nodes on it found wherever they sit under nodes/, every report branch's last report brought up to date in the
 * checkout's report index (one ls-refs and one fetch of what changed, report-index.ts), every
 * report verified against the identity chain on main, one row per node and a summary line. Nothing here
 * trusts a report because of where it is: a report whose signature does not verify is
 * shown as such, never as applied. Each node's report chain is checked too (chain.ts): a
 * replayed, reordered or forked chain is flagged on its row. A fleet whose hosts do not check
 * commit signatures (`trust: none`) says so on every line. `--commit` (rollout.ts), `--node`
 * (history.ts) and `--html` (html.ts) are other views of the same verified reports.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { existsSync } from 'node:fs';
import { checkOutFile, writeOutFile } from '../out-file.js';
import { MeshError, messageOf } from '../../core/errors.js';
import { MeshConfig } from '../../schema/fleet.js';
import { loadYaml } from '../../core/load.js';
import { CHAIN_NOTES } from '../chain.js';
import type { NodeStatus } from '../status/node-status.js';
import { openFleet, originUrl, type Fleet } from '../fleet.js';
import { indexFiles } from '../status/index-file.js';
import { withoutCredentials } from './token.js';
import { formatHistory, reportHistory } from '../history.js';
import { contact as contactAt, parseDuration } from '../../core/duration.js';
import { eligibility, failureLines, uncheckedLines, fetchReports, lastReports, mainRef, nodesOnMain, reportedNodes, trusted } from '../reports.js';
import { fleetPage } from './html.js';
import { outageNote, type UnreachableShards } from '../status/shards.js';
import { rolloutCommand } from './rollout.js';
import { usageExitsTwo } from '../usage.js';
import { git } from '../git.js';
import { EXIT } from '../../core/exit.js';

/**
 * Fetch reports and main from origin (unless `fetch` is false) and verify every node's last
 * report; with main's tip as fetched (null when there is none), and the report shards that did
 * not answer (their nodes as the last run saw them).
 */
export async function fleetStatus(fleet: Fleet, opts: { fetch: boolean }): Promise<{ nodes: NodeStatus[]; mainTip: string | null; unreachable: UnreachableShards }> {
  let unreachable: UnreachableShards = [];
  let awayOf: (node: string) => string | undefined = () => undefined;
  // The nodes on main, mesh.yaml's trust and main's tip are read as soon as main is fetched, while the reports are
  // (the nodes as the refresh read them, when it did).
  let mainFetched!: (nodes?: Promise<Map<string, string | null>>, tip?: string | null) => void;
  const fromMain = new Promise<{ nodes?: Promise<Map<string, string | null>>; tip?: string | null }>((resolve) => (mainFetched = (nodes, tip) => resolve({ nodes, tip }))).then(({ nodes, tip }) => Promise.all([
    nodes ?? nodesOnMain(fleet),
    trustOnMain(fleet),
    tip !== undefined ? tip : git(fleet.dir, ['rev-parse', '--verify', '--quiet', mainRef(fleet)]).then((out) => out.trim() || null, () => null),
  ]));
  if (opts.fetch) await fetchReports(fleet, mainFetched, (shards, of) => void ([unreachable, awayOf] = [shards, of]));
  mainFetched(); // not fetched, or not called back (main is read as it is)
  const [[listing, fleetTrust, mainTip], reported] = await Promise.all([fromMain, reportedNodes(fleet)]);
  const nodes = [...new Set([...listing.keys(), ...reported])].sort();
  const reports = await lastReports(fleet, nodes);
  return { nodes: nodes.map((node) => {
    const verified = reports.get(node)!;
    const r = verified.report;
    const t = trusted(verified);
    const failures = t ? failureLines(t) : [];
    const unchecked = t ? uncheckedLines(t) : [];
    return {
      node,
      // A revoked node's last report was its own (an earlier generation's): its last contact is still known.
      lastContact: t?.observedAt ?? (verified.signature === 'revoked' ? (r?.observedAt ?? null) : null),
      commit: t?.commit ?? null,
      outcome: t?.outcome ?? null,
      hostVersion: t?.hostVersion ?? null,
      signature: verified.signature,
      generation: t?.generation ?? null,
      sequence: t?.sequence ?? null,
      eligible: eligibility(t).eligible,
      ...(t?.counts?.drift ? { drift: t.counts.drift } : {}),
      ...(verified.reason ? { reason: verified.reason } : {}),
      ...(failures.length ? { errors: failures } : {}),
      ...(unchecked.length ? { unchecked } : {}),
      ...(t?.outcome === 'untrusted' ? { lastApplied: t.lastApplied ?? null } : {}),
      ...(r && !t ? { claimed: { lastContact: r.observedAt, commit: r.commit, outcome: r.outcome } } : {}),
      // No report seen, because its shard did not answer: not a node that never reported.
      ...(!r && verified.signature === 'missing' && awayOf(node) ? { away: awayOf(node) } : {}),
      chain: verified.chain,
      signer: t?.signer ?? null,
      trust: fleetTrust === 'none' ? 'none' : (t?.trust ?? fleetTrust),
    };
  }), mainTip, unreachable };
}

/**
 * fleetStatus; when the fleet server does not answer (an error to try again later) and an earlier
 * run left its report index, the nodes as that run saw them, with the server named as unreachable
 * (status then exits 3, as for a report shard that did not answer). Without an index, the error.
 */
async function statusOrLastSeen(fleet: Fleet, fetch: boolean): ReturnType<typeof fleetStatus> {
  try {
    return await fleetStatus(fleet, { fetch });
  } catch (e) {
    if (!fetch || !(e instanceof MeshError) || e.next !== 'retry' || !existsSync((await indexFiles(fleet)).index)) throw e;
    const seen = await fleetStatus(fleet, { fetch: false });
    const url = withoutCredentials((await originUrl(fleet.dir)) ?? 'origin');
    const error = messageOf(e).split('\n')[0]!;
    return { ...seen, unreachable: [{ url, error, fleet: true, nodes: seen.nodes.filter((n) => n.lastContact !== null || n.claimed).length }] };
  }
}

/** mesh.yaml's `trust` on the fetched main (the checkout's own mesh.yaml when main was not fetched). */
async function trustOnMain(fleet: Fleet): Promise<'signed' | 'none'> {
  const text = await git(fleet.dir, ['show', `${mainRef(fleet)}:mesh.yaml`]).catch(() => null);
  const loaded = text === null ? null : loadYaml(text, 'mesh.yaml', MeshConfig);
  return loaded?.ok ? loaded.value.trust : fleet.config.trust;
}


/** The table a person reads: node, last contact with its age, commit, outcome, host version, signature. */
export function formatStatus(rows: NodeStatus[], now: Date): string {
  const table = [['NODE', 'LAST CONTACT', 'COMMIT', 'OUTCOME', 'HOST', 'SIGNATURE']];
  for (const r of rows) {
    const contact = r.lastContact ? contactAt(r.lastContact, now) : r.claimed || r.away ? 'unknown' : 'never';
    const never = r.signature === 'missing' && !r.claimed;
    const signature = never ? '-' : r.chain === 'ok' ? r.signature : `${r.signature}, chain ${r.chain}`;
    table.push([r.node, contact, shownCommit(r), shownOutcome(r), r.hostVersion ?? '-', signature]);
  }
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const unchecked = (i: number) => (i > 0 && rows[i - 1]!.trust === 'none' ? '  (trust: none: commit signatures are not checked)' : '');
  const lines = table.map((row, i) => row.map((c, j) => c.padEnd(widths[j]!)).join('  ').trimEnd() + unchecked(i));
  for (const r of rows) {
    if (r.chain !== 'ok') lines.push(`${r.node}: chain ${r.chain}: ${CHAIN_NOTES[r.chain]}`);
    if (r.reason && r.signature !== 'valid' && !(r.signature === 'missing' && !r.claimed)) lines.push(`${r.node}: signature ${r.signature}: ${r.reason}`);
    if (r.signature === 'valid') for (const e of r.errors ?? []) lines.push(`${r.node}: ${e}`);
    if (r.signature === 'valid') for (const e of r.unchecked ?? []) lines.push(`${r.node}: not checked: ${e}`);
  }
  return lines.join('\n');
}

/** The COMMIT column: what the node enforces; an untrusted node's is the last it accepted, not the one it refused. */
function shownCommit(r: NodeStatus): string {
  const commit = r.outcome === 'untrusted' ? r.lastApplied : r.commit;
  return commit?.slice(0, 12) ?? '-';
}

function shownOutcome(r: NodeStatus): string {
  if (!r.outcome) return r.signature === 'revoked' ? 'revoked' : r.claimed ? `(claims ${r.claimed.outcome}, unverified)` : r.away ? 'unknown: its shard did not answer' : 'never enrolled';
  if (r.outcome === 'untrusted') return `untrusted: refused ${r.commit?.slice(0, 12) ?? 'main'}`;
  return `${r.outcome}${r.drift ? ` (${r.drift} drift corrected)` : ''}`;
}

/** One line over the whole fleet, e.g. "4 nodes: 2 applied, 1 failed, 1 no report; 1 ineligible; 3 on main (abc123456789)". */
export function summarize(rows: NodeStatus[], mainTip: string | null, mainBranch = 'main'): string {
  const count = (pred: (r: NodeStatus) => boolean) => rows.filter(pred).length;
  const outcomes = ['applied', 'unverified', 'failed', 'untrusted', 'enrolled', 'ineligible', 'retired'] as const;
  const parts = outcomes.map((o) => [count((r) => r.outcome === o), o] as const).filter(([n]) => n > 0).map(([n, o]) => `${n} ${o}`);
  // A report there, whose signature could not be checked this run (its shard down, its text gone): not a node that never reported.
  const none = count((r) => r.outcome === null && r.signature === 'missing' && !r.claimed && !r.away);
  if (none) parts.push(`${none} never enrolled`);
  const away = count((r) => r.away !== undefined);
  if (away) parts.push(`${away} not read (their shard did not answer)`);
  const unchecked = count((r) => r.outcome === null && r.signature === 'missing' && r.claimed !== undefined);
  if (unchecked) parts.push(`${unchecked} with a report not verified`);
  const revoked = count((r) => r.signature === 'revoked');
  if (revoked) parts.push(`${revoked} revoked`);
  const notes = [parts.join(', ') || 'no reports'];
  const bad = count((r) => r.signature === 'invalid' || r.signature === 'revoked');
  if (bad) notes.push(`${bad} with a report whose signature is not valid`);
  const broken = count((r) => r.chain !== 'ok');
  if (broken) notes.push(`${broken} with a replayed, reordered or forked report chain`);
  const untrusting = count((r) => r.trust === 'none');
  if (untrusting) notes.push(`${untrusting} not checking commit signatures (trust: none)`);
  const ineligible = count((r) => r.eligible === false && r.outcome !== 'ineligible');
  if (ineligible) notes.push(`${ineligible} more ineligible`);
  if (mainTip) {
    notes.push(`${count((r) => r.commit === mainTip && r.outcome !== 'untrusted')} at ${mainBranch}'s tip (${mainTip.slice(0, 12)})`);
    const refused = count((r) => r.commit === mainTip && r.outcome === 'untrusted');
    if (refused) notes.push(`${refused} refused ${mainBranch}'s tip (not signed by a trusted key)`);
  }
  return `${rows.length} node${rows.length === 1 ? '' : 's'}: ${notes.join('; ')}`;
}

interface StatusOptions {
  json?: boolean;
  fetch: boolean;
  commit?: string;
  since?: string;
  wait?: number;
  poll?: number;
  node?: string;
  limit: number;
  html?: string;
}

/** Register `status` on `program`. */
export function statusCommand(program: Command): void {
  usageExitsTwo(program.command('status'))
    .description('per node: last contact, applied commit, outcome, host version, signature; --commit for one commit\'s rollout')
    .option('--json', 'print JSON ({"nodes":[...],"summary"} or, with --commit, the rollout)')
    .option('--no-fetch', 'use the report branches already fetched')
    .option('--commit <rev>', 'the rollout of one commit: which affected nodes applied it, failed, or are outstanding')
    .option('--since <rev>', 'with --commit: judge the change from REV (e.g. the commit before a push of several); default: the commit\'s first parent')
    .option('--wait <duration>', 'with --commit: poll until nothing is outstanding or the time is up (e.g. 10m)', parseDuration)
    .option('--poll <duration>', 'with --wait: time between polls (default: 5s)', parseDuration)
    .option('--node <node>', 'one node\'s report history, each report verified')
    .option('--limit <n>', 'with --node: how many reports', (v) => positive(v), 20)
    .option('--html <file>', 'also write a self-contained HTML page of the fleet and its last rollouts to FILE')
    .action(async (o: StatusOptions) => {
      if (o.since !== undefined && !o.commit) throw new MeshError('E_USAGE', '--since needs --commit REV: it sets where that commit\'s change starts');
      if (o.wait !== undefined && !o.commit) throw new MeshError('E_USAGE', '--wait needs --commit REV: it waits for one commit\'s rollout');
      if (o.node && (o.commit || o.html)) throw new MeshError('E_USAGE', '--node shows one node\'s history; use it without --commit and --html');
      if (o.commit && o.html) throw new MeshError('E_USAGE', '--html writes the whole fleet\'s page (with its last rollouts); use it without --commit');
      if (o.html) checkOutFile(o.html, '--html');
      const fleet = await openFleet(process.cwd());
      if (o.commit) return rolloutCommand(fleet, { rev: o.commit, ...(o.since !== undefined ? { since: o.since } : {}), json: Boolean(o.json), fetch: o.fetch, waitMs: o.wait, pollMs: o.poll ?? 5000 });
      if (o.node) {
        const history = await reportHistory(fleet, o.node, o.limit, o.fetch);
        return console.log(o.json ? JSON.stringify(history) : formatHistory(history, new Date()));
      }
      const { nodes, mainTip, unreachable } = await statusOrLastSeen(fleet, o.fetch);
      const summary = summarize(nodes, mainTip, fleet.config.mainBranch);
      if (o.html) {
        writeOutFile(o.html, await fleetPage(fleet, nodes, summary, new Date(), unreachable), '--html');
        console.error(`wrote ${o.html}`);
      }
      const unknown = nodes.filter((n) => n.signature === 'missing').map((n) => n.node);
      console.log(o.json ? JSON.stringify({ nodes, summary, unknown, ...(unreachable.length ? { unreachable } : {}) }) : `${formatStatus(nodes, new Date())}\n${summary}`);
      // A shard that did not answer: its nodes are shown as the last run saw them, and only a failure seen is final.
      for (const s of unreachable) console.error(`mesh-cli: ${outageNote(s)}`);
      const code = statusExit(nodes, mainTip);
      process.exitCode = unreachable.length && code !== EXIT.failed ? EXIT.retry : code;
    });
}

/**
 * The code a script gates on (DESIGN.md's table): 1 when a node failed, refused main as untrusted,
 * is ineligible, could not check what it applied (unverified: waiting will not change that), or its
 * report does not verify; else 4 while some node has not yet applied main's tip (or never
 * reported); else 0. Retired and revoked nodes never set it.
 */
export function statusExit(rows: NodeStatus[], mainTip: string | null): number {
  const counted = rows.filter((r) => r.outcome !== 'retired' && r.signature !== 'revoked');
  const bad = (r: NodeStatus) => r.signature === 'invalid' || r.chain !== 'ok' || r.outcome === 'failed' || r.outcome === 'unverified' || r.outcome === 'untrusted' || r.outcome === 'ineligible';
  if (counted.some(bad)) return EXIT.failed;
  const there = (r: NodeStatus) => r.signature === 'valid' && r.outcome === 'applied' && (mainTip === null || r.commit === mainTip);
  return counted.every(there) ? EXIT.done : EXIT.notYet;
}

function positive(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('give a whole number of at least 1');
  return n;
}
