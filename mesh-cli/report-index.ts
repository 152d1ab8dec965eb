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
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import type { VerifiedReport } from '../agent/verify-report.js';
import { NodeIdentity } from '../schema/fleet.js';
import type { Report } from '../schema/report.js';
import { chainStep, type ChainVerdict, type SeenTip } from './chain.js';
import { commitOf, linkOf, parseReportText, tipOf } from './report-objects.js';
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
  const removed: string[] = [];
  const objects = new Map<string, GitObject>();
  if (network) {
    const remote = await openRemote(fleet.dir);
    const tips = new Map([...(await remote.lsRefs([REPORT_PREFIX]))].map(([ref, oid]) => [ref.slice(REPORT_PREFIX.length), oid]));
    for (const node of Object.keys(index.nodes)) if (!tips.has(node)) removed.push(node);
    for (const node of removed) delete index.nodes[node];
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
  const identitiesBefore = Object.keys(index.identities).length;
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
  const dirty = changed.size + removed.length + stale.length > 0 || vouched.size !== index.vouched.length || Object.keys(index.identities).length !== identitiesBefore;
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
  const empty: IndexFile = { format: 1, nodes: {}, identities: {}, vouched: [] };
  if (!existsSync(file)) return empty;
  try {
    const index = JSON.parse(readFileSync(file, 'utf8')) as IndexFile;
    if (index.format === 1 && index.nodes && index.identities && Array.isArray(index.vouched)) return index;
  } catch {
    // said below
  }
  // It is a cache of what origin has, so it is rebuilt from origin; what is lost is the memory of
  // earlier tips, so a branch rewound before this run is not caught as replayed or forked by it.
  console.error(`note: ${file} could not be read; it is rebuilt from origin, and reports seen before it are not compared with this run's`);
  return empty;
}

function writeIndex(file: string, index: IndexFile): void {
  mkdirSync(dirname(file), { recursive: true });
  const nodes = Object.fromEntries(Object.entries(index.nodes).map(([node, r]) => [node, { ...r, tip: { ...r.tip, report: undefined } }]));
  writeFileSync(`${file}.tmp`, JSON.stringify({ ...index, nodes }));
  renameSync(`${file}.tmp`, file);
}
