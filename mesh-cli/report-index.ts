/**
 * What the operator's checkout knows about every report branch: one file,
 * `.git/mesh/reports.json`, with each node's last report as status shows it, the verdict of its
 * signature against the node.yaml it was checked with, and its chain state (beside it: the
 * parsed node.yaml files, and the report texts in report-texts.ts).
 * It is kept up to date without a remote-tracking ref per node (writing 10,000 refs costs more
 * than everything else status does): one protocol-v2 ls-refs lists the report tips, one fetch
 * brings the changed ones one commit deep (two deep for a node seen the first time, so its
 * order can be checked), and only a report whose parent is neither the tip seen before nor,
 * for a replaced heartbeat, that tip's parent needs a second fetch, of the commits in between
 * (upload-pack.ts). The index's format is described at readIndex.
 * A report is verified once per (report commit, node.yaml blob): both are immutable.
 */
import { existsSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import type { IdentityKeys, VouchMemo } from '../core/report/claims.js';
import { parseReport } from '../core/report/verify.js';
import { NodeIdentity } from '../schema/fleet.js';
import type { ReportView } from '../schema/report.js';
import { chainStep, type ChainVerdict, type SeenTip } from './chain.js';
import { commitOf, linkFromText, linkOf, reportView, tipOf } from './report-objects.js';
import { readTexts, writeTexts, type ReportTexts } from './report-texts.js';
import { catFiles, type Fleet } from './fleet.js';
import { openRemote as openGitRemote, type GitObject, type Remote } from './status/git-remote.js';
import { verifyPool, verifyStats, type Verdict, type VerifyJob, type VerifyPool } from './verify-pool.js';
import { REPORT_REFS } from '../core/report/branch.js';
import { git } from './git.js';

/** A node's last report as the index keeps it. */
export interface TipRecord extends SeenTip {
  /** The node.yaml blob the verdict was made against ('' when the node had none). */
  identity: string;
  verdict: Verdict;
  /** The report as status shows it (report-objects.ts reportView), null when status.json is missing or does not parse. */
  report: ReportView | null;
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
  format: 4;
  nodes: Record<string, NodeRecord>;
  /** Parsed node.yaml by blob id (null: it does not parse). */
  identities: Record<string, NodeIdentity | null>;
  vouched: string[];
}

/** The last report of every node that has a report branch, verified, with its chain verdict. */
export type ReportIndex = Map<string, TipRecord>;

/** Reports handed to the verify threads at a time, as they are read out of the pack. */
const CHUNK = 250;
/**
 * Report tips asked for in one fetch, and fetches in flight at once: the first reports are
 * verified while the server packs the next. The first fetch is smaller, so that the verify
 * threads have work sooner.
 */
const BATCH = 1000;
const FIRST_BATCH = CHUNK;
const FETCHES = 2;

function batchesOf(tips: Array<[string, string]>, deepen: number, first = BATCH): Array<{ tips: Array<[string, string]>; deepen: number }> {
  const out = [];
  for (let i = 0, size = first; i < tips.length; i += size, size = BATCH) out.push({ tips: tips.slice(i, i + size), deepen });
  return out;
}

/** Run `work` on every item, at most `width` at a time. */
async function inParallel<T>(items: T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
}

/**
 * How refreshIndex reaches origin: the main branch's name there, and how to fetch it into
 * `mainRef` (done only when origin's main is not what `mainRef` already holds).
 */
export interface Network {
  mainBranch: string;
  fetchMain(): Promise<unknown>;
  /** Called once `mainRef` holds origin's main (fetched, or found there already), while the reports are still being read. */
  onMain?(): void;
}

/** Bring the index up to date (with origin when `network`), verify what changed, and keep it. */
export async function refreshIndex(fleet: Fleet, mainRef: string, network: Network | null): Promise<ReportIndex> {
  let pool: VerifyPool | null = null;
  const remote = network && openReportStore(fleet);
  remote?.catch(() => undefined); // awaited in refresh
  const run = () => refresh(fleet, mainRef, network && { ...network, remote: remote! }, (expected, memo) => (pool ??= verifyPool(expected, memo)));
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

/** Origin's report branches as status reads them, fetched objects kept beside the index (status/git-remote.ts). */
export async function openReportStore(fleet: Fleet): Promise<Remote> {
  const files = await indexFiles(fleet);
  return openGitRemote(fleet.dir, { store: dirname(files.index), config: files.config });
}

/** refreshIndex's work; `pool(n, memo)` starts the verify threads (once) as soon as about n reports are known to need them. */
async function refresh(fleet: Fleet, mainRef: string, network: (Network & { remote: Promise<Remote> }) | null, pool: (expected: number, memo: VouchMemo) => VerifyPool): Promise<ReportIndex> {
  const lap = timer();
  const mainThere = network && `refs/heads/${network.mainBranch}`;
  // The report tips are listed, and this checkout's main read, while the index is read (from
  // disk without holding this thread, so that the ls-refs request is out before it is parsed).
  const asked = network && network.remote.then(async (remote) => ({ remote, listed: await remote.lsRefs([REPORT_REFS, mainThere!]).finally(() => lap.mark('ls-refs answer')) }));
  asked?.catch(() => undefined);
  const mainHere = network && git(fleet.dir, ['rev-parse', '--verify', '--quiet', mainRef]).then((out) => out.trim(), () => '');
  // Where node.yaml lies on main, as this checkout has it: used unless origin's main moved.
  const nodeFiles = () => git(fleet.dir, ['ls-tree', '-r', mainRef, '--', 'nodes/']).catch(() => '');
  const filesHere = network && nodeFiles();
  const files = await indexFiles(fleet);
  lap.mark('index files');
  const { index, seen, records, views, identities: identitiesText } = await readIndex(files);
  lap.mark('index read');
  // Each node's record is read once the first fetches are out (they need only `seen`); everything after the fetches needs them.
  let recordsRead: Promise<void> | null = null;
  const readRecords = () => (recordsRead ??= Promise.resolve().then(() => {
    Object.assign(index.nodes, records());
    for (const node of removed) delete index.nodes[node];
    lap.mark('records read');
  }));
  // The texts kept from earlier runs are read only when needed: to verify an unchanged report again, or to carry it over.
  let keptTexts: Map<string, ReportTexts> | undefined;
  const texts = new Map<string, ReportTexts>();
  const textOf = (node: string) => texts.get(node) ?? (keptTexts ??= readTexts(files.texts)).get(node);
  const vouched: VouchMemo = new Set(index.vouched);
  // A fleet this big has most of its reports changed whenever status runs at heartbeat pace: start the threads now.
  if (network && seen.size > 0) pool(seen.size, vouched);
  lap('read');
  let mainFetched: Promise<unknown> = Promise.resolve();
  const changed = new Map<string, NodeRecord | undefined>();
  const removed: string[] = [];
  const objects = new Map<string, GitObject>();
  const verdicts: Array<Promise<void>> = [];
  let remote: Remote | null = null;
  // node.yaml on main (node → blob id), read while the reports are fetched.
  let idsReady: Promise<{ ids: Map<string, string>; listed: boolean }> | undefined;
  let verify: VerifyPool | null = null;
  let readOutMs = 0;
  /**
   * Each node's record as the index keeps it (JSON), made once its verdict and chain are final: as
   * each chunk's verdicts come in (while the threads verify the next), except for a node whose
   * chain needs the commits between its old and new tip, which waits for that fetch.
   */
  const recorded = new Map<string, string>();
  const gapped = new Set<string>();
  let gapsFetched = false;
  const record = (node: string) => {
    const state = index.nodes[node]!;
    if (changed.has(node)) state.tip.chain = chainStep(changed.get(node)?.tip, state, (oid) => linkOf(objects, oid));
    recorded.set(node, recordJson(state));
  };
  /** Hand `jobs` to the threads; each verdict is recorded against the node.yaml blob it was made with. */
  const submit = (jobs: Array<VerifyJob & { blob: string }>) => {
    lap.mark('first chunk');
    verdicts.push(verify!.verify(jobs).then((results) => jobs.forEach((j, i) => {
      setVerdict(index.nodes[j.node]!.tip, j.blob, results[i]!);
      if (gapsFetched || !gapped.has(j.node)) record(j.node);
    })));
  };
  if (network) {
    const answer = await asked!;
    remote = answer.remote;
    const listed = answer.listed;
    lap('ls-refs');
    // main is fetched (in parallel with the reports) only when it moved.
    const moved = listed.get(mainThere!) !== (await mainHere);
    if (moved) mainFetched = network.fetchMain();
    if (network.onMain) mainFetched.then(network.onMain, () => undefined);
    const tips = new Map([...listed].filter(([ref]) => ref.startsWith(REPORT_REFS)).map(([ref, oid]) => [ref.slice(REPORT_REFS.length), oid]));
    for (const node of seen.keys()) if (!tips.has(node)) removed.push(node);
    const fresh = [...tips].filter(([node, oid]) => seen.get(node) !== oid);
    verify = pool(fresh.length, vouched); // the threads load while the packs are on their way
    // node.yaml is read once the first fetches are out (setImmediate), while their packs are on the way.
    const listing = moved ? mainFetched.then(nodeFiles) : filesHere!;
    const ids = (idsReady = new Promise(setImmediate).then(() => identityBlobs(listing, fleet, index, identitiesText)).finally(() => lap.mark('ids')));
    ids.catch(() => undefined);
    const batches = [
      ...batchesOf(fresh.filter(([node]) => seen.has(node)), 1, FIRST_BATCH),
      // two deep for a node seen the first time, so that its order can be checked
      ...batchesOf(fresh.filter(([node]) => !seen.has(node)), 2),
    ];
    const take = (tips: Array<[string, string]>, got: Map<string, GitObject>, { ids }: { ids: Map<string, string> }) => {
      const started = performance.now();
      let jobs: Array<VerifyJob & { blob: string }> = [];
      for (const [node, oid] of tips) {
        const prev = index.nodes[node];
        changed.set(node, prev);
        const { status, sig, ...fetchedTip } = tipOf(got, oid);
        const text = status?.toString('utf8') ?? null;
        const parsed = text === null ? null : parseReport(node, text);
        const report = parsed?.ok ? parsed.value : null;
        const tip: TipRecord = { ...fetchedTip, link: text === null ? null : linkFromText(text, report), parentLink: null, identity: '\0', verdict: { signature: 'missing' }, report: report && reportView(report), chain: 'ok' };
        index.nodes[node] = { maxSequence: prev?.maxSequence ?? 0, forked: prev?.forked ?? [], tip };
        // A parent that is neither the tip seen before nor (for a replaced heartbeat) its parent: what lies between is fetched after.
        if (prev && tip.parent !== null && tip.parent !== prev.tip.commit && !(prev.tip.heartbeat && tip.parent === prev.tip.parent)) gapped.add(node);
        texts.set(node, { commit: oid, status, sig });
        const job = judge(tip, node, { status, sig }, parsed, ids.get(node) ?? '', index);
        if (job) jobs.push(job);
        if (jobs.length >= CHUNK) submit(jobs.splice(0));
      }
      submit(jobs);
      readOutMs += performance.now() - started;
    };
    // A few fetches at a time, each read and handed to the verify threads as soon as it is in.
    const fetched: Promise<void> = inParallel(batches, FETCHES, async ({ tips, deepen }) => {
      const got = await remote!.fetchObjects({ wants: tips.map(([, oid]) => oid), deepen });
      lap.mark('first pack');
      // The tips' parents are needed after this only for nodes seen the first time (their order).
      if (deepen > 1) for (const [oid, o] of got) objects.set(oid, o);
      await readRecords();
      take(tips, got, await ids);
      // What lies between a gapped node's old tip and its new tip's parent, while the other batches are read and verified.
      const gaps = tips.filter(([node]) => gapped.has(node));
      if (gaps.length) {
        const between = await remote!.fetchObjects({ wants: gaps.map(([node]) => index.nodes[node]!.tip.parent!), haves: gaps.map(([node]) => changed.get(node)!.tip.commit) });
        for (const [oid, o] of between) objects.set(oid, o);
      }
    });
    fetched.catch(() => undefined); // awaited below, once the records are read
    await new Promise(setImmediate); // the first requests are out
    await readRecords();
    await fetched;
    lap('fetch+parse');
  }
  await readRecords();
  const { ids, listed } = await (idsReady ??= identityBlobs(nodeFiles(), fleet, index, identitiesText));
  // Reports fetched before whose node.yaml changed since they were verified are verified again, from their kept text.
  const stale = Object.entries(index.nodes).filter(([node, r]) => !changed.has(node) && r.tip.identity !== (ids.get(node) ?? ''));
  if (stale.length) await reverify(stale, { ids, index, textOf, setText: (node, t) => texts.set(node, t), remote, submit: (jobs) => (verify ??= pool(jobs.length, vouched), submit(jobs)) });
  // The texts do not depend on the verdicts: they are written while the threads verify. (Each is
  // kept with its commit, so texts newer than an index that was not written are not mistaken for its.)
  const dirty = changed.size + removed.length + stale.length > 0;
  const textsWritten = dirty
    ? writeTexts(files.texts, new Map(Object.keys(index.nodes).flatMap((node) => {
      const t = textOf(node);
      return t ? [[node, t] as const] : [];
    })))
    : null;
  textsWritten?.catch(() => undefined); // awaited below
  // The reports that did not change are read from the index as it was (when every report changed,
  // they never are), and the line of reports is made, while the threads verify.
  const unchanged = Object.keys(index.nodes).filter((node) => !changed.has(node));
  const damaged = views !== undefined && unchanged.length > 0 && !readViews(files, index, unchanged, views, textOf);
  const reports = changed.size + removed.length === 0 && !damaged && views ? views : reportsLine(index);
  gapsFetched = true;
  lap.mark('drain');
  await verify?.drain();
  await Promise.all(verdicts);
  lap('verify');
  for (const node of Object.keys(index.nodes)) if (!recorded.has(node)) record(node);
  await textsWritten;
  const indexDirty = dirty || vouched.size !== index.vouched.length || listed || damaged;
  index.vouched = [...vouched];
  if (indexDirty) writeIndex(files, index, { identities: listed, records: recorded, reports });
  // Besides the wall time of each phase: CPU time of the work that overlaps (packs parsed, reports read out of them, signatures verified on every thread).
  const work = { readOut: readOutMs, verify: verifyStats.ms, verifiedOnMainThread: verifyStats.here };
  lap('chain+write', { reports: Object.keys(index.nodes).length, changed: changed.size, verified: changed.size + stale.length, work });
  return new Map(Object.entries(index.nodes).map(([node, r]) => [node, r.tip]));
}

/**
 * Set the report of each node in `unchanged` from `views` (the index's third line); false when
 * that line is damaged, and then each is read again from its kept text, or, without one, shown
 * as not verified until a run with the server reachable fetches it again (its verdict is dropped).
 */
function readViews(files: IndexFiles, index: IndexFile, unchanged: string[], views: Buffer, textOf: (node: string) => ReportTexts | undefined): boolean {
  try {
    const read = JSON.parse(views.toString('utf8')) as Record<string, ReportView | null>;
    for (const node of unchanged) index.nodes[node]!.tip.report = read[node] ?? null;
    return true;
  } catch {
    console.error(`note: the reports in ${files.index} could not be read; they are read again from the report texts`);
  }
  for (const node of unchanged) {
    const tip = index.nodes[node]!.tip;
    const kept = textOf(node);
    const parsed = kept?.commit === tip.commit && kept.status ? parseReport(node, kept.status.toString('utf8')) : null;
    if (parsed?.ok) tip.report = reportView(parsed.value);
    else setVerdict(tip, '\0', { signature: 'missing', reason: 'the report index was damaged and this report is not in the checkout: run status again with the server reachable' });
  }
  return false;
}

/** What a verify thread needs of node.yaml: its generation and token keys. */
function keysOf(identity: NodeIdentity | null | undefined): IdentityKeys | null {
  if (!identity) return null;
  return { generation: identity.generation, ...(identity.token ? { token: { publicKey: identity.token.publicKey } } : {}), ...(identity.previous ? { previous: identity.previous } : {}) };
}

/**
 * A report's verdict when it needs no signature check (no status.json, or one that does not
 * parse: `parsed` is its text parsed), set on `tip`; otherwise the job that verifies its
 * signature against node.yaml `blob`.
 */
function judge(tip: TipRecord, node: string, { status, sig }: { status: Buffer | null; sig: Buffer | null }, parsed: ReturnType<typeof parseReport> | null, blob: string, index: IndexFile): (VerifyJob & { blob: string }) | null {
  if (status === null) setVerdict(tip, blob, { signature: 'missing', reason: 'no status.json on the report branch' });
  else if (!parsed!.ok) setVerdict(tip, blob, { signature: 'invalid', reason: `status.json does not parse: ${parsed!.problems[0]?.message}` });
  else {
    // Only the claimed fields go to the verify thread: the whole report would be copied across for nothing.
    const { node: named, generation, nodeKey, vouch } = parsed!.value;
    return { node, status, sig, claims: { node: named, generation, nodeKey, vouch }, identity: keysOf(index.identities[blob]), blob };
  }
  return null;
}

function setVerdict(tip: TipRecord, blob: string, verdict: Verdict): void {
  tip.identity = blob;
  tip.verdict = verdict;
}

/**
 * Verify again the reports in `stale` (their node.yaml changed on main), from the texts kept beside
 * the index, or fetched again by commit when those are gone; offline and without them, the
 * report is shown as not verified rather than with a verdict made against the old node.yaml.
 */
async function reverify(
  stale: Array<[string, NodeRecord]>,
  ctx: {
    ids: Map<string, string>;
    index: IndexFile;
    textOf: (node: string) => ReportTexts | undefined;
    setText: (node: string, texts: ReportTexts) => void;
    remote: Remote | null;
    submit: (jobs: Array<VerifyJob & { blob: string }>) => void;
  },
): Promise<void> {
  const lost = stale.filter(([node, r]) => ctx.textOf(node)?.commit !== r.tip.commit);
  if (lost.length && ctx.remote) {
    const objects = await ctx.remote.fetchObjects({ wants: lost.map(([, r]) => r.tip.commit), deepen: 1 });
    for (const [node, r] of lost) {
      const { status, sig } = tipOf(objects, r.tip.commit);
      if (commitOf(objects, r.tip.commit)) ctx.setText(node, { commit: r.tip.commit, status, sig });
    }
  }
  const jobs: Array<VerifyJob & { blob: string }> = [];
  for (const [node, r] of stale) {
    const blob = ctx.ids.get(node) ?? '';
    const kept = ctx.textOf(node);
    const status = kept?.commit === r.tip.commit ? kept.status : undefined;
    if (status === undefined) setVerdict(r.tip, '\0', { signature: 'missing', reason: 'node.yaml changed on main since this report was verified, and its text is not in the checkout: run status again with the server reachable' });
    else {
      const job = judge(r.tip, node, kept!, status === null ? null : parseReport(node, status.toString('utf8')), blob, ctx.index);
      if (job) jobs.push(job);
    }
  }
  ctx.submit(jobs);
}

/**
 * With MESH_TIMINGS set, the phases of a refresh (ms of wall time each) as one JSON line on
 * stderr: `npm run bench:fleet` reads it to split status into fetch / parse / verify. `at` is
 * when each phase ended, in ms since the process started (`mark` adds moments inside a phase).
 */
function timer(): ((phase: string, extra?: object) => void) & { mark(name: string): void } {
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

/**
 * node → blob id of nodes/<node>/node.yaml on main (`listing`: `git ls-tree -r` of nodes/), each
 * blob parsed once into the index, whose parsed node.yaml files are first read from `kept` (the
 * text of identities.json) when given (listed: the index's identities changed).
 */
async function identityBlobs(listing: Promise<string>, fleet: Fleet, index: IndexFile, kept: string | undefined): Promise<{ ids: Map<string, string>; listed: boolean }> {
  if (kept !== undefined) index.identities = parseIdentities(kept);
  const ids = new Map<string, string>();
  for (const line of (await listing).split('\n')) {
    const m = /^\d+ blob ([0-9a-f]+)\tnodes\/([^/]+)\/node\.yaml$/.exec(line);
    if (m) ids.set(m[2]!, m[1]!);
  }
  const missing = [...new Set(ids.values())].filter((id) => !(id in index.identities));
  const blobs = await catFiles(fleet.dir, missing);
  const used = new Set(ids.values());
  const unused = Object.keys(index.identities).filter((id) => !used.has(id));
  for (const id of unused) delete index.identities[id];
  for (const id of missing) index.identities[id] = parseIdentity(blobs.get(id)?.toString('utf8'));
  return { ids, listed: missing.length + unused.length > 0 };
}

function parseIdentity(text: string | undefined): NodeIdentity | null {
  try {
    const parsed = NodeIdentity.safeParse(parse(text ?? '', { uniqueKeys: true }));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The index's files, in the checkout's .git/mesh/: the index, the parsed node.yaml files it was verified against, and the report texts. */
interface IndexFiles {
  index: string;
  /** The checkout's git config file. */
  config: string;
  identities: string;
  texts: string;
}

async function indexFiles(fleet: Fleet): Promise<IndexFiles> {
  // A checkout whose .git is a folder keeps it in .git/mesh; otherwise (a worktree, GIT_DIR) git says where.
  const plain = !process.env.GIT_DIR && !process.env.GIT_COMMON_DIR && statSync(join(fleet.dir, '.git'), { throwIfNoEntry: false })?.isDirectory();
  const [path, config] = plain ? [join(fleet.dir, '.git', 'mesh'), join(fleet.dir, '.git', 'config')] : (await git(fleet.dir, ['rev-parse', '--git-path', 'mesh', '--git-path', 'config'])).trim().split('\n');
  const abs = (p: string) => (isAbsolute(p) ? p : join(fleet.dir, p));
  const dir = abs(path!);
  return { index: join(dir, 'reports.json'), config: abs(config!), identities: join(dir, 'identities.json'), texts: join(dir, 'report-texts.bin') };
}

/**
 * What readIndex read: the index without its records (`index.nodes` is empty), the tip each
 * node had (`seen`), its records when asked for (`records()`: parsed then), and each node's
 * report still unread in `views` (the JSON of node → report).
 */
interface ReadIndex {
  index: IndexFile;
  seen: Map<string, string>;
  records: () => Record<string, NodeRecord>;
  views?: Buffer;
  /** identities.json as read, parsed into `index.identities` by identityBlobs (after the first fetch is out). */
  identities?: string;
}

/**
 * The index. Format 4 is three lines of JSON: format, vouches and each node's tip commit; the
 * records without their reports; node → report. A run needs only the first line before its first
 * fetch; the second is parsed while that fetch is out, and the third only if some report is still
 * the node's last (when every report changed, it never is). An index in any other format (those
 * of earlier mesh-cli versions included) is rebuilt from origin, with the note that says so.
 */
async function readIndex(files: IndexFiles): Promise<ReadIndex> {
  const empty = (): ReadIndex => ({ index: { format: 4, nodes: {}, identities: {}, vouched: [] }, seen: new Map(), records: () => ({}) });
  const [bytes, identities] = await Promise.all([readFile(files.index).catch(() => null), readFile(files.identities, 'utf8').catch(() => '')]);
  if (bytes === null && !existsSync(files.index)) return empty();
  try {
    // Only the first line is decoded here: the rest stays bytes until it is needed.
    const lines = bytes ? splitLines(bytes, 3) : [];
    const first = JSON.parse(lines[0]?.toString('utf8') ?? '') as IndexV4;
    if (first.format === 4 && lines.length === 3 && Array.isArray(first.vouched) && first.tips && typeof first.tips === 'object') {
      const seen = new Map(Object.entries(first.tips));
      // The records must be those of the tips the run began with: a node in one line and not the
      // other, or at another commit, means the file was damaged.
      const records = () => {
        let read: Record<string, NodeRecord>;
        try {
          read = (JSON.parse(lines[1]!.toString('utf8')) as { nodes: Record<string, NodeRecord> }).nodes;
          for (const record of Object.values(read)) record.tip.report = null;
        } catch {
          throw new DamagedIndex(files.index);
        }
        if (Object.keys(read).length !== seen.size || [...seen].some(([node, commit]) => read[node]?.tip.commit !== commit)) throw new DamagedIndex(files.index);
        return read;
      };
      return { index: { format: 4, nodes: {}, identities: {}, vouched: first.vouched }, seen, records, views: lines[2], identities };
    }
  } catch {
    // said below
  }
  console.error(damagedNote(files.index));
  return empty();
}

/**
 * The index is a cache of what origin has, so a damaged one is rebuilt from origin; what is lost
 * is the memory of earlier tips, so a branch rewound before this run is not caught as replayed or
 * forked by it.
 */
function damagedNote(file: string): string {
  return `note: ${file} could not be read; it is rebuilt from origin, and reports seen before it are not compared with this run's`;
}

/** Thrown when the index's records turn out damaged after the run has begun with its first line. */
class DamagedIndex extends Error {
  constructor(readonly file: string) {
    super(`${file} is damaged`);
  }
}

/** The first `n - 1` lines of `bytes` and the rest (trailing blank space trimmed), as views. */
function splitLines(bytes: Buffer, n: number): Buffer[] {
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 10 || bytes[end - 1] === 13 || bytes[end - 1] === 32)) end--;
  const lines: Buffer[] = [];
  let at = 0;
  while (lines.length < n - 1) {
    const nl = bytes.indexOf(10, at);
    if (nl < 0 || nl >= end) break;
    lines.push(bytes.subarray(at, nl));
    at = nl + 1;
  }
  lines.push(bytes.subarray(at, end));
  return lines;
}

/** The first line of a format-4 index. */
interface IndexV4 {
  format: 4;
  vouched: string[];
  tips: Record<string, string>;
}

/** Parsed node.yaml files by blob id, from the text of identities.json; a cache (an unreadable one is parsed again from main). */
function parseIdentities(text: string): IndexFile['identities'] {
  try {
    const read = JSON.parse(text) as { identities?: IndexFile['identities'] };
    return read.identities && typeof read.identities === 'object' ? read.identities : {};
  } catch {
    return {};
  }
}

/** A node's record as the first line of the index keeps it: without its report. */
function recordJson({ tip: { report: _report, ...tip }, ...record }: NodeRecord): string {
  return JSON.stringify({ ...record, tip });
}

/** The index's third line: node → report. */
function reportsLine(index: IndexFile): string {
  const reports: Record<string, ReportView | null> = {};
  for (const [node, { tip }] of Object.entries(index.nodes)) reports[node] = tip.report;
  return JSON.stringify(reports);
}

/**
 * Write the index (format 4, see readIndex) from each node's record as JSON (`records`) and the
 * line of reports; and the parsed node.yaml files when `identities` (they change only when main's do).
 */
function writeIndex(files: IndexFiles, index: IndexFile, opts: { identities: boolean; records: Map<string, string>; reports: string | Buffer }): void {
  mkdirSync(dirname(files.index), { recursive: true });
  const put = (file: string, text: string | Uint8Array) => {
    writeFileSync(`${file}.tmp`, text);
    renameSync(`${file}.tmp`, file);
  };
  if (opts.identities) put(files.identities, JSON.stringify({ identities: index.identities }));
  const nodes = Object.keys(index.nodes);
  const tips = Object.fromEntries(nodes.map((node) => [node, index.nodes[node]!.tip.commit]));
  const records = nodes.map((node) => `${JSON.stringify(node)}:${opts.records.get(node)!}`);
  const head = `${JSON.stringify({ format: index.format, vouched: index.vouched, tips })}\n{"nodes":{${records.join(',')}}}\n`;
  put(files.index, typeof opts.reports === 'string' ? `${head}${opts.reports}\n` : Buffer.concat([Buffer.from(head), opts.reports, Buffer.from('\n')]));
}
