/**
 * What the operator's checkout knows about every report branch: each node's last report as status
 * shows it, the verdict of its signature against the node.yaml it was checked with, and its chain
 * state, kept in `.git/mesh/` (status/index-file.ts) without a remote-tracking ref per node
 * (writing 10,000 refs costs more than everything else status does). A report is verified once
 * per (report commit, node.yaml blob): both are immutable.
 *
 * A refresh runs in stages, each taking data and returning data (refresh() names them in order):
 *
 * 1. **list**: every report tip and origin's main (`git ls-remote`, status/git-remote.ts), main
 *    fetched when it moved, while the index's first line is read;
 * 2. **fetch**: the changed tips, by id, a few batches in flight: one commit deep, two for a node
 *    seen the first time (so that its order can be checked);
 * 3. **read**: each batch's reports read out as it comes in (status.json parsed once) and handed to
 *    the verify threads in chunks, so that they verify while the next batches are fetched; and the
 *    reports that did not change but whose node.yaml did, from the texts kept beside the index;
 * 4. **verify**: every verdict collected;
 * 5. **chain**: each changed branch checked against the tip seen before (chain.ts), with what lies
 *    between fetched for a node that pushed more than one report since;
 * 6. **write**: the index, the report texts and the parsed node.yaml files.
 */
import { rmSync } from 'node:fs';
import type { VouchMemo } from '../core/report/claims.js';
import { parseReport } from '../core/report/verify.js';
import { REPORT_REFS } from '../core/report/branch.js';
import type { ReportView } from '../schema/report.js';
import { chainStep } from './chain.js';
import type { Fleet } from './fleet.js';
import { git } from './git.js';
import { commitOf, linkFromText, linkOf, reportView, tipOf } from './report-objects.js';
import { intact, readTexts, writeTexts, type ReportTexts } from './report-texts.js';
import { openRemote, openStore, type GitObject, type Remote } from './status/git-remote.js';
import { plainUrl, shardedRemote, shardSources, type UnreachableShards } from './status/shards.js';
import {
  damagedNote, DamagedIndex, indexFiles, readIndex, recordJson, reportsLine, writeIndex,
  type IndexFile, type IndexFiles, type NodeRecord, type ReportIndex, type TipRecord,
} from './status/index-file.js';
import { identityBlobs, judge, readNodeFiles, setVerdict, type NodeFiles } from './status/read-out.js';
import { verifyPool, verifyStats, type Verdict, type VerifyJob, type VerifyPool } from './verify-pool.js';

export type { ReportIndex, TipRecord } from './status/index-file.js';

/** Reports handed to the verify threads at a time, as they are read out. */
const CHUNK = 250;
/**
 * Report tips asked for in one fetch, and fetches in flight at once: the first reports are
 * verified while the next are fetched. The first fetch is smaller, so that the verify threads
 * have work sooner. Each fetch costs three processes and a shallow negotiation on the server:
 * at 10,000 changed tips, batches of 5,000 took ~10 % less client CPU and ~30 % less server
 * CPU than batches of 1,000 (docs/scale.md, session 10).
 */
const BATCH = 5000;
const FIRST_BATCH = CHUNK;
const FETCHES = 2;

/**
 * How refreshIndex reaches origin: the main branch's name there, and how to fetch it into
 * `mainRef` (done only when origin's main is not what `mainRef` already holds).
 */
export interface Network {
  mainBranch: string;
  fetchMain(): Promise<unknown>;
  /**
   * Called once `mainRef` holds origin's main (fetched, or found there already), while the
   * reports are still being read, with each node's node.yaml on it as the refresh reads them
   * (status/read-out.ts readNodeFiles; null: the node's name is in two folders), and main's tip
   * when it is known without asking git again (null: there is no main).
   */
  onMain?(places: Promise<Map<string, string | null>>, tip?: string | null): void;
  /**
   * Given, a report shard that does not answer does not fail the refresh (unless every shard
   * fails): it is called with those shards, each with how many of the nodes seen before are on it,
   * and `awayOf`, the URL of a node's shard when that is one of them; their records stay as the
   * last refresh left them.
   */
  partial?(shards: UnreachableShards, awayOf: (node: string) => string | undefined): void;
}

/**
 * The report branches as status reads them (origin's, or each node's on its shard when mesh.yaml
 * shards them: status/shards.ts), the fetched objects kept beside the index (status/git-remote.ts).
 */
export async function openReportStore(fleet: Fleet, opts: { partial?: boolean } = {}): Promise<Remote> {
  const files = await indexFiles(fleet);
  const paths = { store: files.store, config: files.config };
  const store = openStore(fleet.dir, paths, fleet.objectFormat);
  const [origin, shards] = await Promise.all([openRemote(fleet.dir, paths, 'origin', store), shardSources(fleet)]);
  if (!shards) return origin;
  const [remotes, originUrl] = await Promise.all([
    Promise.all(shards.map((s) => openRemote(fleet.dir, paths, s.remote, store))),
    git(fleet.dir, ['remote', 'get-url', 'origin']).then((url) => plainUrl(url.trim()), () => null),
  ]);
  return shardedRemote(origin, remotes, shards.map((s) => s.url), (line) => console.error(line), { originUrl, partial: Boolean(opts.partial) });
}

/** Bring the index up to date (with origin when `network`), verify what changed, and keep it. */
export async function refreshIndex(fleet: Fleet, mainRef: string, network: Network | null): Promise<ReportIndex> {
  let pool: VerifyPool | null = null;
  const remote = network && openReportStore(fleet, { partial: Boolean(network.partial) });
  remote?.catch(() => undefined); // awaited by the list stage
  const threads: Threads = (expected, memo) => (pool ??= verifyPool(expected, memo));
  const run = () => refresh(fleet, mainRef, network && { ...network, remote: remote! }, threads);
  try {
    return await run().catch(async (e: unknown) => {
      // The records are read after the first fetches are out: when they turn out damaged, the run starts again without them.
      if (!(e instanceof DamagedIndex)) throw e;
      console.error(damagedNote(e.file));
      rmSync(e.file, { force: true });
      // New threads for the new run: the old ones add what they verify to the old run's vouch memo.
      (pool as VerifyPool | null)?.close();
      pool = null;
      return run();
    });
  } finally {
    (pool as VerifyPool | null)?.close();
    await (await remote?.catch(() => null))?.close();
  }
}

/** Starts the verify threads (once) as soon as about `expected` reports are known to need them. */
type Threads = (expected: number, memo: VouchMemo) => VerifyPool;

/** refreshIndex's work: the stages in order. */
async function refresh(fleet: Fleet, mainRef: string, network: (Network & { remote: Promise<Remote> }) | null, threads: Threads): Promise<ReportIndex> {
  const lap = timer();
  const files = await indexFiles(fleet);
  const listing = network && list(fleet, mainRef, network, files.nodes);
  listing?.catch(() => undefined); // awaited below, once the index's first line is read
  const before = await readIndex(files);
  lap('read');
  const vouched: VouchMemo = new Set(before.index.vouched);
  const listed = listing && (await listing);
  lap('ls-refs');
  if (listed) keepUnreachable(listed, before.seen, network!);
  const plan = planFetch(before.seen, listed?.tips ?? null);
  // Start the threads as soon as reports are known to have changed: they are ready when the first fetch is read.
  if (plan.fresh > 0) threads(plan.fresh, vouched);
  const fetched = listed ? fetch(listed.remote, plan.batches) : [];
  // git fetches while this thread parses the records and node.yaml.
  const known = before.records();
  for (const node of plan.removed) delete known[node];
  lap.mark('records read');
  const { ids, listed: idsChanged } = await identityBlobs(listed?.nodeFiles ?? readNodeFiles(nodeFiles(fleet, mainRef), files.nodes), fleet, before.index, before.identities);
  lap.mark('ids');
  const identities = before.index.identities;
  const submit = verifier((expected) => threads(Math.max(plan.fresh, expected), vouched), lap);
  const read = await readFetched(plan.batches, fetched, { remote: listed?.remote ?? null, known, ids, identities, submit });
  lap('fetch+parse');
  const gaps = listed ? fetchGaps(listed.remote, read, known) : Promise.resolve(new Map<string, GitObject>());
  gaps.catch(() => undefined); // awaited by the chain stage
  const nodes: Record<string, NodeRecord> = { ...known, ...Object.fromEntries(read.records) };
  const kept = keptTexts(files);
  const textOf = (node: string) => read.texts.get(node) ?? kept().get(node);
  const usable = checkedTexts(textOf);
  const unchanged = Object.keys(nodes).filter((node) => !read.records.has(node));
  // Before readStale: a report readViews cannot show is then fetched again and verified in this run.
  const unshown = before.views !== undefined && unchanged.length > 0 ? readViews(files, nodes, unchanged, before.views, usable) : null;
  const damaged = unshown !== null;
  const stale = await readStale(nodes, read, { ids, identities, usable, unshown, remote: listed?.remote ?? null, submit });
  if (usable.damaged.size > 0) console.error(damagedTextsNote(files.texts, usable.damaged, stale.texts));
  const changes = read.records.size + plan.removed.length + stale.count + usable.damaged.size;
  // The texts do not depend on the verdicts: they are written while the threads verify.
  const textsWritten = changes > 0 ? writeTexts(files.texts, allTexts(nodes, (node) => stale.texts.get(node) ?? (usable.damaged.has(node) ? undefined : textOf(node)))) : null;
  textsWritten?.catch(() => undefined); // awaited by the write stage
  for (const [node, blob, verdict] of await verified(submit)) setVerdict(nodes[node]!.tip, blob, verdict);
  lap('verify');
  chain(nodes, known, read, await gaps);
  const index: IndexFile = { format: 4, nodes, identities, vouched: [...vouched] };
  const reports = changes === 0 && !damaged && before.views ? before.views : reportsLine(index);
  await textsWritten;
  if (changes > 0 || damaged || idsChanged || before.otherReader || vouched.size !== before.index.vouched.length) writeIndex(files, index, { identities: idsChanged, reports });
  const work = { readOut: read.ms, verify: verifyStats.ms, verifiedOnMainThread: verifyStats.here };
  lap('chain+write', { reports: Object.keys(nodes).length, changed: read.records.size, verified: read.records.size + stale.count, work });
  return new Map(Object.entries(nodes).map(([node, r]) => [node, r.tip]));
}

/** A report to verify, with the node.yaml blob its verdict will be recorded against. */
type Job = VerifyJob & { blob: string };
type Verdicts = Array<[node: string, blob: string, verdict: Verdict]>;
interface Batch { tips: Array<[node: string, oid: string]>; deepen: number }

/** Stage 1: origin's report tips (node → commit) and main, fetched when it moved; where node.yaml lies on main then (`cache`: nodes.json, read-out.ts readNodeFiles). */
async function list(fleet: Fleet, mainRef: string, network: Network & { remote: Promise<Remote> }, cache: string): Promise<{ remote: Remote; tips: Map<string, string>; nodeFiles: Promise<NodeFiles> }> {
  const mainThere = `refs/heads/${network.mainBranch}`;
  const mainHere = git(fleet.dir, ['rev-parse', '--verify', '--quiet', mainRef]).then((out) => out.trim(), () => '');
  const filesHere = nodeFiles(fleet, mainRef); // used unless origin's main moved
  const remote = await network.remote;
  const refs = await remote.lsRefs([REPORT_REFS, mainThere]);
  const here = await mainHere;
  const moved = refs.get(mainThere) !== here;
  const mainFetched = moved ? network.fetchMain() : Promise.resolve();
  const files = readNodeFiles(moved ? mainFetched.then(() => nodeFiles(fleet, mainRef)) : filesHere, cache);
  files.catch(() => undefined); // awaited by identityBlobs
  const onMain = network.onMain;
  // Main's tip goes with it when it did not move (a fetch may bring a newer tip than the one listed).
  if (onMain) mainFetched.then(() => onMain(files.then((f) => f.places), moved ? undefined : here || null), () => undefined);
  const tips = new Map([...refs].filter(([ref]) => ref.startsWith(REPORT_REFS)).map(([ref, oid]) => [ref.slice(REPORT_REFS.length), oid]));
  return { remote, tips, nodeFiles: files };
}

/** What lies under nodes/ on main as the checkout has it (`git ls-tree -r -z`, read by readNodeFiles). */
function nodeFiles(fleet: Fleet, mainRef: string): Promise<string> {
  return git(fleet.dir, ['ls-tree', '-r', '-z', mainRef, '--', 'nodes/']).catch(() => '');
}

/**
 * What to fetch: the changed tips in batches (those seen before first, one commit deep; then the
 * nodes seen the first time, two deep, so that their order can be checked), how many, and the
 * nodes whose branch is gone.
 */
function planFetch(seen: Map<string, string>, tips: Map<string, string> | null): { batches: Batch[]; fresh: number; removed: string[] } {
  if (!tips) return { batches: [], fresh: 0, removed: [] };
  const fresh = [...tips].filter(([node, oid]) => seen.get(node) !== oid);
  const batchesOf = (list: Array<[string, string]>, deepen: number, first = BATCH) => {
    const out: Batch[] = [];
    for (let i = 0, size = first; i < list.length; i += size, size = BATCH) out.push({ tips: list.slice(i, i + size), deepen });
    return out;
  };
  return {
    batches: [...batchesOf(fresh.filter(([node]) => seen.has(node)), 1, FIRST_BATCH), ...batchesOf(fresh.filter(([node]) => !seen.has(node)), 2)],
    fresh: fresh.length,
    removed: [...seen.keys()].filter((node) => !tips.has(node)),
  };
}

/**
 * Stage 1's end, where a report shard did not answer (Network.partial): each node seen before on
 * it keeps the tip it had, so that its record stays as it was (neither fetched nor removed).
 */
function keepUnreachable(listed: { remote: Remote; tips: Map<string, string> }, seen: Map<string, string>, network: Network): void {
  const away = listed.remote.unreachable?.();
  if (!away || away.shards.length === 0) return;
  const nodes = new Map(away.shards.map((s) => [s.url, 0]));
  for (const [node, tip] of seen) {
    const on = away.of(node);
    if (!on || listed.tips.has(node)) continue;
    listed.tips.set(node, tip);
    nodes.set(on.url, nodes.get(on.url)! + 1);
  }
  network.partial?.(away.shards.map((s) => ({ ...s, nodes: nodes.get(s.url)! })), (node) => away.of(node)?.url);
}

/** Stage 2: every batch fetched into the report store, FETCHES at a time, in order: each promise settles when its batch is there. */
function fetch(remote: Remote, batches: Batch[]): Array<Promise<void>> {
  const slot = slots(FETCHES);
  return batches.map(({ tips, deepen }) => {
    const got = slot(() => remote.fetchTips({ wants: tips.map(([, oid]) => oid), nodes: tips.map(([node]) => node), deepen }));
    got.catch(() => undefined); // awaited in order by the read stage
    return got;
  });
}

/** Run each work given at most `width` at a time, in the order given. */
function slots(width: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  return (work) => new Promise((resolve, reject) => {
    const go = () => {
      running++;
      work().then(resolve, reject).finally(() => {
        running--;
        waiting.shift()?.();
      });
    };
    if (running < width) go();
    else waiting.push(go);
  });
}

/** What the read stage read: each changed node's new record and texts, the commits the chain check needs, and the nodes whose new tip does not sit on the one seen before. */
interface ReadOut {
  records: Map<string, NodeRecord>;
  texts: Map<string, ReportTexts>;
  /** The parents of the tips of nodes seen the first time (fetched two deep). */
  parents: Map<string, GitObject>;
  gapped: string[];
  /** Time spent reading reports out (MESH_TIMINGS). */
  ms: number;
}

/**
 * Stage 3: each fetched batch, as it comes in, read out of the store CHUNK reports at a time (the
 * next two chunks read by git while this thread reads one out, so that a chunk's objects are
 * dropped before the next is read) into new records (status.json parsed once; a report that
 * needs no signature check gets its verdict here), each chunk's signature checks handed to the
 * verify threads.
 */
async function readFetched(batches: Batch[], fetched: Array<Promise<void>>, ctx: { remote: Remote | null; known: Record<string, NodeRecord>; ids: Map<string, string>; identities: IndexFile['identities']; submit: Submit }): Promise<ReadOut> {
  const out: ReadOut = { records: new Map(), texts: new Map(), parents: new Map(), gapped: [], ms: 0 };
  for (const [i, { tips, deepen }] of batches.entries()) {
    await fetched[i]!;
    const chunks: Array<Batch['tips']> = [];
    for (let at = 0; at < tips.length; at += CHUNK) chunks.push(tips.slice(at, at + CHUNK));
    const reads: Array<Promise<Map<string, GitObject>> | undefined> = [];
    const readChunk = (c: number) => {
      if (c >= chunks.length) return;
      reads[c] = ctx.remote!.readObjects({ wants: chunks[c]!.map(([, oid]) => oid), deepen });
      reads[c]!.catch(() => undefined); // awaited in order below
    };
    readChunk(0);
    readChunk(1);
    for (const [c, chunk] of chunks.entries()) {
      const got = await reads[c]!;
      reads[c] = undefined;
      readChunk(c + 2);
      const started = performance.now();
      if (deepen > 1) for (const [oid, o] of got) out.parents.set(oid, o);
      ctx.submit(readChunkOut(chunk, got, out, ctx));
      out.ms += performance.now() - started;
    }
  }
  return out;
}

/** One chunk of reports read out of `got` into `out`: the jobs for the verify threads. */
function readChunkOut(tips: Batch['tips'], got: Map<string, GitObject>, out: ReadOut, ctx: { known: Record<string, NodeRecord>; ids: Map<string, string>; identities: IndexFile['identities'] }): Job[] {
  const jobs: Job[] = [];
  for (const [node, oid] of tips) {
    const prev = ctx.known[node];
    // Fields named one by one: an object rest (`{ status, sig, ...rest }`) is V8's slow path, ~10 µs a report here.
    const fetched = tipOf(got, oid);
    const { status, sig, statusId, sigId } = fetched;
    const text = status?.toString('utf8') ?? null;
    const parsed = text === null ? null : parseReport(node, text);
    const report = parsed?.ok ? parsed.value : null;
    const tip: TipRecord = { commit: fetched.commit, parent: fetched.parent, heartbeat: fetched.heartbeat, link: text === null ? null : linkFromText(text, report), parentLink: null, identity: '\0', verdict: { signature: 'missing' }, report: report && reportView(report), chain: 'ok' };
    out.records.set(node, { maxSequence: prev?.maxSequence ?? 0, forked: prev?.forked ?? [], tip });
    // A parent that is neither the tip seen before nor (for a replaced heartbeat) its parent: what lies between is fetched for the chain.
    if (prev && tip.parent !== null && tip.parent !== prev.tip.commit && !(prev.tip.heartbeat && tip.parent === prev.tip.parent)) out.gapped.push(node);
    out.texts.set(node, { commit: oid, status, sig, statusId, sigId });
    const job = judge(tip, node, { status, sig }, parsed, ctx.ids.get(node) ?? '', ctx.identities);
    if (job) jobs.push(job);
  }
  return jobs;
}

/**
 * Stage 3 for the reports that did not change but whose node.yaml did on main since they were
 * verified: verified again from the texts kept beside the index, or fetched again by commit when
 * those are gone; offline and without them, shown as not verified rather than with a verdict made
 * against the old node.yaml. Returns how many, and the texts fetched again.
 */
async function readStale(nodes: Record<string, NodeRecord>, read: ReadOut, ctx: { ids: Map<string, string>; identities: IndexFile['identities']; usable: CheckedTexts; unshown: Set<string> | null; remote: Remote | null; submit: Submit }): Promise<{ count: number; texts: Map<string, ReportTexts> }> {
  const stale = Object.entries(nodes).filter(([node, r]) => !read.records.has(node) && r.tip.identity !== (ctx.ids.get(node) ?? ''));
  const texts = new Map<string, ReportTexts>();
  // A node on a report shard that did not answer (Network.partial) cannot be fetched again now.
  const away = ctx.remote?.unreachable?.();
  const shardOfNode = (node: string) => (away && away.shards.length > 0 ? away.of(node) : undefined);
  const lost = stale.filter(([node, r]) => !ctx.usable(node, r.tip.commit) && !shardOfNode(node));
  if (lost.length && ctx.remote) {
    const objects = await ctx.remote.fetchObjects({ wants: lost.map(([, r]) => r.tip.commit), nodes: lost.map(([node]) => node), deepen: 1 });
    for (const [node, r] of lost) {
      const { status, sig, statusId, sigId } = tipOf(objects, r.tip.commit);
      if (commitOf(objects, r.tip.commit)) texts.set(node, { commit: r.tip.commit, status, sig, statusId, sigId });
    }
  }
  const jobs: Job[] = [];
  for (const [node, r] of stale) {
    const kept = texts.get(node) ?? ctx.usable(node, r.tip.commit);
    const status = kept?.status;
    if (status === undefined && ctx.unshown?.has(node)) continue; // readViews gave the reason
    const down = status === undefined ? shardOfNode(node) : undefined;
    if (down) setVerdict(r.tip, '\0', { signature: 'missing', reason: `node.yaml changed on main since this report was verified, its text is not in the checkout, and its report shard ${down.url} did not answer: run status again when it does` });
    else if (status === undefined) setVerdict(r.tip, '\0', { signature: 'missing', reason: 'node.yaml changed on main since this report was verified, and its text is not in the checkout: run status again with the server reachable' });
    else {
      const parsed = status === null ? null : parseReport(node, status.toString('utf8'));
      // The view too: it is gone when an earlier run found the index's line of reports damaged and this text missing.
      r.tip.report = parsed?.ok ? reportView(parsed.value) : null;
      const job = judge(r.tip, node, kept!, parsed, ctx.ids.get(node) ?? '', ctx.identities);
      if (job) jobs.push(job);
    }
  }
  ctx.submit(jobs);
  return { count: stale.length, texts };
}

/** How the read stage hands chunks to the threads (started on first use); `pending` holds each chunk's verdicts for the verify stage. */
type Submit = ((jobs: Job[]) => void) & { pending: Array<Promise<Verdicts>>; drain(): Promise<void> };

function verifier(start: (expected: number) => VerifyPool, lap: Lap): Submit {
  const pending: Array<Promise<Verdicts>> = [];
  let pool: VerifyPool | null = null;
  const submit = (jobs: Job[]) => {
    if (jobs.length === 0) return;
    lap.mark('first chunk');
    pool ??= start(jobs.length);
    pending.push(pool.verify(jobs).then((results) => jobs.map((j, i): Verdicts[number] => [j.node, j.blob, results[i]!])));
  };
  return Object.assign(submit, { pending, drain: async () => void (await pool?.drain()) });
}

/** Stage 4: every verdict of the chunks handed to the threads (this thread verifies what is left). */
async function verified(submit: Submit): Promise<Verdicts> {
  await submit.drain();
  return (await Promise.all(submit.pending)).flat();
}

/** Stage 5's input: what lies between each gapped node's old tip and its new tip's parent. */
async function fetchGaps(remote: Remote, read: ReadOut, known: Record<string, NodeRecord>): Promise<Map<string, GitObject>> {
  if (read.gapped.length === 0) return new Map();
  return remote.fetchObjects({ wants: read.gapped.map((node) => read.records.get(node)!.tip.parent!), nodes: read.gapped, haves: read.gapped.map((node) => known[node]!.tip.commit) });
}

/** Stage 5: each changed branch's chain verdict, against the tip seen before (chain.ts). */
function chain(nodes: Record<string, NodeRecord>, known: Record<string, NodeRecord>, read: ReadOut, gaps: Map<string, GitObject>): void {
  const lookup = (oid: string) => linkOf(read.parents, oid) ?? linkOf(gaps, oid);
  for (const node of read.records.keys()) nodes[node]!.tip.chain = chainStep(known[node]?.tip, nodes[node]!, lookup);
}

/** The report texts kept from earlier runs, read once, when first needed. */
function keptTexts(files: IndexFiles): () => Map<string, ReportTexts> {
  let kept: Map<string, ReportTexts> | undefined;
  return () => (kept ??= readTexts(files.texts));
}

/**
 * A node's kept texts when they are those of report `commit` and still hash to the blob ids they
 * were fetched as: a damaged text is never judged or shown as the node's report, but fetched again
 * like a lost one. `damaged` names the nodes whose texts were not.
 */
type CheckedTexts = ((node: string, commit: string) => ReportTexts | undefined) & { damaged: Set<string> };

function checkedTexts(textOf: (node: string) => ReportTexts | undefined): CheckedTexts {
  const damaged = new Set<string>();
  const usable = (node: string, commit: string) => {
    const t = textOf(node);
    if (t?.commit !== commit || damaged.has(node)) return undefined;
    if (intact(t)) return t;
    damaged.add(node);
    return undefined;
  };
  return Object.assign(usable, { damaged });
}

/** What status says of the damaged texts: how many, the first few nodes, and whether they were fetched again. */
function damagedTextsNote(file: string, damaged: Set<string>, fetched: Map<string, ReportTexts>): string {
  const names = [...damaged];
  const some = names.slice(0, 3).join(', ') + (names.length > 3 ? ` and ${names.length - 3} more` : '');
  const again = names.every((node) => fetched.has(node)) ? 'they were fetched again from the server' : 'those not fetched again show as not verified until a status run with the server reachable fetches them';
  return `note: ${file} held damaged report texts (${some}): they were not used; ${again}`;
}

function allTexts(nodes: Record<string, NodeRecord>, textOf: (node: string) => ReportTexts | undefined): Map<string, ReportTexts> {
  return new Map(Object.keys(nodes).flatMap((node) => {
    const t = textOf(node);
    return t ? [[node, t] as const] : [];
  }));
}

/**
 * Set the report of each node in `unchanged` from `views` (the index's third line); null when
 * that line reads. When it is damaged, each is read again from its kept text, or, without one
 * (returned), shown as not verified (its verdict is dropped) until it is fetched again: by
 * readStale in this run when the server answers, else by the next run that reaches it.
 */
function readViews(files: IndexFiles, nodes: Record<string, NodeRecord>, unchanged: string[], views: Buffer, usable: CheckedTexts): Set<string> | null {
  try {
    const read = JSON.parse(views.toString('utf8')) as Record<string, ReportView | null>;
    for (const node of unchanged) nodes[node]!.tip.report = read[node] ?? null;
    return null;
  } catch {
    console.error(`note: the reports in ${files.index} could not be read; they are read again from the report texts`);
  }
  const unshown = new Set<string>();
  for (const node of unchanged) {
    const tip = nodes[node]!.tip;
    const kept = usable(node, tip.commit);
    const parsed = kept?.status ? parseReport(node, kept.status.toString('utf8')) : null;
    if (parsed?.ok) tip.report = reportView(parsed.value);
    else {
      unshown.add(node);
      setVerdict(tip, '\0', { signature: 'missing', reason: 'the report index was damaged and this report is not in the checkout: run status again with the server reachable' });
    }
  }
  return unshown;
}


/**
 * With MESH_TIMINGS set, the phases of a refresh (ms of wall time each) as one JSON line on
 * stderr: `npm run bench:fleet` reads it to split status into fetch / parse / verify. `at` is
 * when each phase ended, in ms since the process started (`mark` adds moments inside a phase).
 */
type Lap = ((phase: string, extra?: object) => void) & { mark(name: string): void };

function timer(): Lap {
  if (!process.env.MESH_TIMINGS) return Object.assign(() => undefined, { mark: () => undefined });
  const phases: Record<string, number> = {};
  const at: Record<string, number> = {};
  let last = performance.now();
  const lap = (phase: string, extra?: object) => {
    const now = performance.now();
    phases[phase] = (phases[phase] ?? 0) + now - last;
    at[phase] = Math.round(now);
    last = now;
    if (extra) process.stderr.write(`mesh-timings ${JSON.stringify({ phases, at, ...extra })}\n`);
  };
  return Object.assign(lap, { mark: (name: string) => void (at[name] ??= Math.round(performance.now())) });
}

