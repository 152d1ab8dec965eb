/**
 * What the operator's checkout knows about every report branch: one file,
 * `.git/mesh/reports.json`, with each node's last report (status.json and its signature), the
 * verdict of its signature against the node.yaml it was checked with, and its chain state.
 * It is kept up to date without a remote-tracking ref per node (writing 10,000 refs costs more
 * than everything else status does): one protocol-v2 ls-refs lists the report tips, one fetch
 * brings the changed ones one commit deep (two deep for a node seen the first time, so its
 * order can be checked), and only a report whose parent is neither the tip seen before nor,
 * for a replaced heartbeat, that tip's parent needs a second fetch (upload-pack.ts).
 * A report is verified once per (report commit, node.yaml blob): both are immutable.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import type { VerifiedReport } from '../agent/verify-report.js';
import { NodeIdentity } from '../schema/fleet.js';
import { Report } from '../schema/report.js';
import { chainStep, sha256, type ChainVerdict, type Link, type SeenTip } from './chain.js';
import { catFiles, type Fleet } from './fleet.js';
import { openRemote, type GitObject } from './upload-pack.js';
import { verifyPool, type VerifyPool } from './verify-pool.js';

/** A node's last report as the index keeps it. */
export interface TipRecord extends SeenTip {
  status: string | null;
  sig: string | null;
  /** The node.yaml blob the verdict was made against ('' when the node had none). */
  identity: string;
  verdict: Omit<VerifiedReport, 'report'>;
  /** The parsed status.json (not kept in the file: parsed again from `status` when read). */
  report?: Report | null;
  chain: ChainVerdict;
}

interface NodeRecord {
  tip: TipRecord;
  /** The highest sequence of a valid report seen on this branch. */
  maxSequence: number;
  /** Tips that did not descend from the tip seen before them (kept while they are the tip). */
  forked: string[];
}

interface IndexFile {
  format: 1;
  nodes: Record<string, NodeRecord>;
  /** Parsed node.yaml by blob id (null: it does not parse). */
  identities: Record<string, NodeIdentity | null>;
  vouched: string[];
}

/** The last report of every node that has a report branch, verified, with its chain verdict. */
export type ReportIndex = Map<string, TipRecord>;

const REPORT_PREFIX = 'refs/heads/reports/';
const HEARTBEAT = 'Mesh-Heartbeat: yes';

/** Bring the index up to date (with origin when `network`), verify what changed, and keep it. */
export async function refreshIndex(fleet: Fleet, mainRef: string, network: { main: Promise<unknown> } | null): Promise<ReportIndex> {
  let pool: VerifyPool | null = null;
  try {
    return await refresh(fleet, mainRef, network, (expected) => (pool ??= verifyPool(expected)));
  } finally {
    (pool as VerifyPool | null)?.close();
  }
}

/** refreshIndex's work; `pool(n)` starts the verify threads (once) as soon as about n reports are known to need them. */
async function refresh(fleet: Fleet, mainRef: string, network: { main: Promise<unknown> } | null, pool: (expected: number) => VerifyPool): Promise<ReportIndex> {
  const lap = timer();
  const file = await indexPath(fleet);
  const index = readIndex(file);
  const vouched = new Set(index.vouched);
  lap('read');
  const changed = new Map<string, NodeRecord | undefined>();
  const objects = new Map<string, GitObject>();
  if (network) {
    const remote = await openRemote(fleet.dir);
    const tips = new Map([...(await remote.lsRefs([REPORT_PREFIX]))].map(([ref, oid]) => [ref.slice(REPORT_PREFIX.length), oid]));
    for (const node of Object.keys(index.nodes)) if (!tips.has(node)) delete index.nodes[node];
    const fresh = [...tips].filter(([node, oid]) => index.nodes[node]?.tip.commit !== oid);
    const known = fresh.filter(([node]) => index.nodes[node]);
    const first = fresh.filter(([node]) => !index.nodes[node]);
    pool(fresh.length); // the threads load while the pack is on its way
    const fetched = await Promise.all([
      known.length ? remote.fetchObjects({ wants: known.map(([, oid]) => oid), deepen: 1 }) : new Map<string, GitObject>(),
      first.length ? remote.fetchObjects({ wants: first.map(([, oid]) => oid), deepen: 2 }) : new Map<string, GitObject>(),
    ]);
    for (const got of fetched) for (const [oid, o] of got) objects.set(oid, o);
    // A parent that is neither the tip seen before nor (for a replaced heartbeat) its parent: ask for what lies between.
    const gaps = known.filter(([node, oid]) => {
      const seen = index.nodes[node]!.tip;
      const parent = commitOf(objects, oid)?.parent ?? null;
      return parent !== null && parent !== seen.commit && !(seen.heartbeat && parent === seen.parent) && !objects.has(parent);
    });
    if (gaps.length) for (const [oid, o] of await remote.fetchObjects({ wants: gaps.map(([, oid]) => oid), haves: gaps.map(([node]) => index.nodes[node]!.tip.commit) })) objects.set(oid, o);
    lap('fetch');
    for (const [node, oid] of fresh) {
      const prev = index.nodes[node];
      changed.set(node, prev && { ...prev, tip: { ...prev.tip } });
      const tip = { ...tipOf(objects, oid), parentLink: null, identity: '\0', verdict: { signature: 'missing' as const }, chain: 'ok' as const };
      index.nodes[node] = { maxSequence: prev?.maxSequence ?? 0, forked: prev?.forked ?? [], tip };
    }
  }
  await network?.main;
  const ids = await identityBlobs(fleet, mainRef, index);
  lap('parse');
  // Verify every report that is new or whose node.yaml changed.
  const stale = Object.entries(index.nodes).filter(([node, r]) => r.tip.identity !== (ids.get(node) ?? ''));
  const verifying = pool(stale.length).verify(
    stale.map(([node, r]) => ({ node, status: r.tip.status, sig: r.tip.sig, identity: index.identities[ids.get(node) ?? ''] ?? null })),
    vouched,
  );
  // The file keeps each report's text, not its parsed form: parse here while the threads verify.
  for (const r of Object.values(index.nodes)) r.tip.report ??= parseReportText(r.tip.status);
  const results = await verifying;
  stale.forEach(([node, r], i) => {
    const { report: _parsed, ...verdict } = results[i]!;
    r.tip.identity = ids.get(node) ?? '';
    r.tip.verdict = verdict;
  });
  lap('verify');
  for (const [node, prev] of changed) {
    const record = index.nodes[node]!;
    record.tip.chain = chainStep(prev?.tip, record, (oid) => linkOf(objects, oid));
  }
  const dirty = network !== null || stale.length > 0 || vouched.size !== index.vouched.length;
  index.vouched = [...vouched];
  if (dirty) writeIndex(file, index);
  lap('chain+write', { reports: Object.keys(index.nodes).length, changed: changed.size, verified: stale.length });
  return new Map(Object.entries(index.nodes).map(([node, r]) => [node, r.tip]));
}

/**
 * With MESH_TIMINGS set, the phases of a refresh (ms of wall time each) as one JSON line on
 * stderr: `npm run bench:fleet` reads it to split status into fetch / parse / verify.
 */
function timer(): (phase: string, extra?: object) => void {
  if (!process.env.MESH_TIMINGS) return () => undefined;
  const phases: Record<string, number> = {};
  let last = performance.now();
  return (phase, extra) => {
    const now = performance.now();
    phases[phase] = (phases[phase] ?? 0) + now - last;
    last = now;
    if (extra) process.stderr.write(`mesh-timings ${JSON.stringify({ phases, ...extra })}\n`);
  };
}

/** The report commit `oid` read from fetched objects: parent, heartbeat, status.json and its signature. */
function tipOf(objects: Map<string, GitObject>, oid: string): Omit<SeenTip, 'parentLink'> & { status: string | null; sig: string | null } {
  const commit = commitOf(objects, oid);
  const files = commit ? treeFiles(objects, commit.tree) : new Map<string, string>();
  const status = files.get('status.json') ?? null;
  return { commit: oid, parent: commit?.parent ?? null, heartbeat: commit?.heartbeat ?? false, status, sig: files.get('status.json.sig') ?? null, link: status === null ? null : linkFromText(status) };
}

function linkOf(objects: Map<string, GitObject>, oid: string): { parent: string | null; link: Link | null } | undefined {
  const commit = commitOf(objects, oid);
  if (!commit) return undefined;
  const status = treeFiles(objects, commit.tree).get('status.json');
  return { parent: commit.parent, link: status === undefined ? null : linkFromText(status) };
}

/** A verified report's text parsed again (the verdict, kept beside it, says whether to trust it); null when it does not parse. */
function parseReportText(text: string | null): Report | null {
  try {
    const parsed = text === null ? null : Report.safeParse(JSON.parse(text));
    return parsed?.success ? parsed.data : null;
  } catch {
    return null;
  }
}

function linkFromText(text: string): Link {
  let sequence: number | null = null;
  try {
    const n = (JSON.parse(text) as { sequence?: unknown }).sequence;
    if (typeof n === 'number' && Number.isInteger(n)) sequence = n;
  } catch {
    // an unreadable report has no sequence
  }
  return { sha: sha256(text), sequence };
}

function commitOf(objects: Map<string, GitObject>, oid: string): { tree: string; parent: string | null; heartbeat: boolean } | undefined {
  const o = objects.get(oid);
  if (o?.type !== 'commit') return undefined;
  const text = o.data.toString('utf8');
  const end = text.indexOf('\n\n');
  const head = end < 0 ? text : text.slice(0, end);
  return { tree: /^tree ([0-9a-f]{40})$/m.exec(head)?.[1] ?? '', parent: /^parent ([0-9a-f]{40})$/m.exec(head)?.[1] ?? null, heartbeat: end >= 0 && text.slice(end).includes(HEARTBEAT) };
}

/** The blobs directly in tree `oid`, by name, as text. */
function treeFiles(objects: Map<string, GitObject>, oid: string): Map<string, string> {
  const files = new Map<string, string>();
  const tree = objects.get(oid);
  if (tree?.type !== 'tree') return files;
  for (let at = 0; at < tree.data.length; ) {
    const nul = tree.data.indexOf(0, at);
    const name = tree.data.subarray(tree.data.indexOf(32, at) + 1, nul).toString('utf8');
    const blob = objects.get(tree.data.subarray(nul + 1, nul + 21).toString('hex'));
    if (blob?.type === 'blob') files.set(name, blob.data.toString('utf8'));
    at = nul + 21;
  }
  return files;
}

/** node → blob id of nodes/<node>/node.yaml on main, each blob parsed once into the index. */
async function identityBlobs(fleet: Fleet, mainRef: string, index: IndexFile): Promise<Map<string, string>> {
  const listing = await fleet.git.raw(['ls-tree', '-r', mainRef, '--', 'nodes/']).catch(() => '');
  const ids = new Map<string, string>();
  for (const line of listing.split('\n')) {
    const m = /^\d+ blob ([0-9a-f]+)\tnodes\/([^/]+)\/node\.yaml$/.exec(line);
    if (m) ids.set(m[2]!, m[1]!);
  }
  const missing = [...new Set(ids.values())].filter((id) => !(id in index.identities));
  const blobs = await catFiles(fleet.dir, missing);
  const used = new Set(ids.values());
  for (const id of Object.keys(index.identities)) if (!used.has(id)) delete index.identities[id];
  for (const id of missing) index.identities[id] = parseIdentity(blobs.get(id)?.toString('utf8'));
  return ids;
}

function parseIdentity(text: string | undefined): NodeIdentity | null {
  try {
    const parsed = NodeIdentity.safeParse(parse(text ?? '', { uniqueKeys: true }));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

async function indexPath(fleet: Fleet): Promise<string> {
  const path = (await fleet.git.raw(['rev-parse', '--git-path', 'mesh/reports.json'])).trim();
  return isAbsolute(path) ? path : join(fleet.dir, path);
}

function readIndex(file: string): IndexFile {
  try {
    const index = JSON.parse(readFileSync(file, 'utf8')) as IndexFile;
    if (index.format === 1 && index.nodes && index.identities && Array.isArray(index.vouched)) return index;
  } catch {
    // missing or damaged: it is a cache of what origin has, so start again from origin
  }
  return { format: 1, nodes: {}, identities: {}, vouched: [] };
}

function writeIndex(file: string, index: IndexFile): void {
  mkdirSync(dirname(file), { recursive: true });
  const nodes = Object.fromEntries(Object.entries(index.nodes).map(([node, r]) => [node, { ...r, tip: { ...r.tip, report: undefined } }]));
  writeFileSync(`${file}.tmp`, JSON.stringify({ ...index, nodes }));
  renameSync(`${file}.tmp`, file);
}
