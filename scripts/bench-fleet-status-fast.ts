/**
 * The changes docs/scale.md proposes for status.ts, measured with the same git, the same
 * schemas and the same signature code:
 * - report branches fetched one commit deep (`--depth=1`);
 * - identities from one `git ls-tree -r` of nodes/, then by object id (a `main:nodes/<n>/node.yaml`
 *   lookup scans the 10,000-entry nodes/ tree every time), parsed once per blob id;
 * - reports read by commit id; a report commit already checked in an earlier run (same commit,
 *   same node.yaml blob) keeps its verdict, since both are immutable;
 * - status.json parsed as JSON and checked by the zod schema (YAML positions only for errors);
 * - the vouch check remembered: it depends only on node, generation, node key, vouch, token key;
 * - report signatures checked on worker threads, one per core.
 * The caches live in this module for the bench; status.ts would keep them in .git/mesh/.
 */
import { availableParallelism } from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { parse } from 'yaml';
import { sameKey, verifySsh } from '../agent/sign/sshsig.js';
import { catFiles } from '../mesh-cli/fleet.js';
import { NodeIdentity } from '../schema/fleet.js';
import { REPORT_NAMESPACE, Report, VOUCH_NAMESPACE, vouchPayload } from '../schema/report.js';
import { gitIn, MAIN, phases, REPORTS, type StatusPhases } from './bench-fleet-status.js';

type Signed = { status: string; sig: string; nodeKey: string };
const check = (items: Signed[]) => items.map((r) => {
  const sig = verifySsh(r.status, r.sig, REPORT_NAMESPACE);
  return sig.ok && sameKey(sig.publicKey, r.nodeKey);
});
if (!isMainThread && (workerData as { meshVerify?: Signed[] } | null)?.meshVerify) parentPort!.postMessage(check((workerData as { meshVerify: Signed[] }).meshVerify));

/** Check report signatures on `n` worker threads running this very bundle. */
async function verifyOnWorkers(items: Signed[], n: number): Promise<boolean[]> {
  if (items.length < 200) return check(items);
  const size = Math.ceil(items.length / n);
  const parts = Array.from({ length: n }, (_, i) => items.slice(i * size, (i + 1) * size));
  return (await Promise.all(parts.map((part) => new Promise<boolean[]>((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { meshVerify: part } });
    worker.once('message', (r: boolean[]) => void worker.terminate().then(() => resolve(r)));
    worker.once('error', reject);
  })))).flat();
}

const identities = new Map<string, NodeIdentity | null>();
const vouched = new Set<string>();
const verdicts = new Map<string, { valid: boolean; report: Report | null }>();

/** statusPhases with the proposed changes; `fetch: false` reuses the fetch just made. */
export async function fastStatusPhases(dir: string, opts: { fetch?: boolean } = {}): Promise<StatusPhases & { checked: number }> {
  const git = gitIn(dir);
  const { phases: timed, phase } = phases();
  // Report branches are fetched one commit deep: with thousands of independent branches git's
  // negotiation gives up early and resends their history (a 10,000-node fetch grew by ~40,000
  // objects a round), while the tips alone are all status needs.
  if (opts.fetch !== false) {
    await phase('fetch', () => {
      git('fetch', '--quiet', 'origin', `+refs/heads/main:${MAIN}`);
      git('fetch', '--quiet', '--prune', '--depth=1', 'origin', `+refs/heads/reports/*:${REPORTS}*`);
    });
  }
  const { refs, ids } = await phase('list', () => {
    const refs = new Map(git('for-each-ref', '--format=%(refname:lstrip=4) %(objectname)', REPORTS).split('\n').filter(Boolean).map((l) => l.split(' ') as [string, string]));
    const entries = git('ls-tree', '-r', MAIN, 'nodes/').split('\n').filter((l) => l.endsWith('/node.yaml')).map((l) => l.split('\t') as [string, string]);
    return { refs, ids: new Map(entries.map(([meta, path]) => [path.split('/')[1]!, meta.split(' ')[2]!])) };
  });
  const nodes = [...new Set([...ids.keys(), ...refs.keys()])].sort();
  const key = (n: string) => `${refs.get(n)} ${ids.get(n)}`;
  const fresh = nodes.filter((n) => refs.has(n) && !verdicts.has(key(n)));
  const got = await phase('extract', () => catFiles(dir, [...[...ids.values()].filter((id) => !identities.has(id)), ...fresh.flatMap((n) => [`${refs.get(n)}:status.json`, `${refs.get(n)}:status.json.sig`])]));
  const text = (spec: string) => got.get(spec)?.toString('utf8') ?? null;
  const rows = await phase('parse', () => {
    for (const id of ids.values()) if (!identities.has(id)) identities.set(id, safe(() => NodeIdentity.parse(parse(text(id) ?? ''))));
    return fresh.map((n) => {
      const status = text(`${refs.get(n)}:status.json`);
      return { n, status, sig: text(`${refs.get(n)}:status.json.sig`), report: safe(() => Report.parse(JSON.parse(status ?? ''))), identity: identities.get(ids.get(n) ?? '') ?? null };
    });
  });
  await phase('verify', async () => {
    const chained = rows.filter((r) => r.report && r.identity?.token && r.sig !== null && r.report.generation === r.identity.generation && vouches(r.n, r.report, r.identity.token.publicKey));
    const ok = await verifyOnWorkers(chained.map((r) => ({ status: r.status!, sig: r.sig!, nodeKey: r.report!.nodeKey })), Math.min(2, availableParallelism()));
    const good = new Set(chained.filter((_, i) => ok[i]));
    for (const r of rows) verdicts.set(key(r.n), { valid: good.has(r), report: r.report });
  });
  return { nodes: nodes.length, valid: nodes.filter((n) => verdicts.get(key(n))?.valid).length, checked: fresh.length, phases: timed };
}

function vouches(node: string, report: Report, tokenKey: string): boolean {
  const id = `${node} ${report.generation} ${report.nodeKey} ${report.vouch} ${tokenKey}`;
  if (vouched.has(id)) return true;
  const v = verifySsh(vouchPayload(node, report.generation, report.nodeKey), report.vouch, VOUCH_NAMESPACE);
  if (v.ok && sameKey(v.publicKey, tokenKey)) vouched.add(id);
  return vouched.has(id);
}

function safe<T>(f: () => T): T | null {
  try {
    return f();
  } catch {
    return null;
  }
}
