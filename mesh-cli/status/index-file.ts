/**
 * The report index on disk, in the checkout's `.git/mesh/`: `reports.json` (format 4, described at
 * readIndex), `identities.json` (each node.yaml parsed once per blob id), `nodes.json` (where
 * each node.yaml lies on main, by the listing it was found in) and, beside them, the report texts
 * (report-texts.ts). Reading and writing only: report-index.ts decides what goes in.
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import type { Verdict } from '../../core/report/claims.js';
import type { NodeIdentity } from '../../schema/fleet.js';
import type { ReportView } from '../../schema/report.js';
import type { ChainVerdict, SeenTip } from '../chain.js';
import type { Fleet } from '../fleet.js';
import { git } from '../git.js';
import { tempBeside } from './temp-file.js';
import { HOST_VERSION } from '../../core/version.js';

/** A node's last report as the index keeps it. */
export interface TipRecord extends SeenTip {
  /** The node.yaml blob the verdict was made against ('' when the node had none). */
  identity: string;
  verdict: Verdict;
  /** The report as status shows it (report-objects.ts reportView), null when status.json is missing or does not parse. */
  report: ReportView | null;
  chain: ChainVerdict;
}

export interface NodeRecord {
  tip: TipRecord;
  /** The highest sequence of a valid report seen on this branch. */
  maxSequence: number;
  /** Tips that did not descend from the tip seen before them (kept while they are the tip). */
  forked: string[];
}

export interface IndexFile {
  format: 4;
  nodes: Record<string, NodeRecord>;
  /** Parsed node.yaml by blob id (null: it does not parse). */
  identities: Record<string, NodeIdentity | null>;
  vouched: string[];
}

/** The last report of every node that has a report branch, verified, with its chain verdict. */
export type ReportIndex = Map<string, TipRecord>;

/** The index's files, in the checkout's .git/mesh/: the index, the parsed node.yaml files it was verified against, and the report texts. */
export interface IndexFiles {
  /** The folder they are in (the report store is there too, status/git-remote.ts). */
  store: string;
  index: string;
  /** The checkout's git config file. */
  config: string;
  identities: string;
  texts: string;
  /** Where node.yaml lies on main, by the listing it was read from (status/read-out.ts readNodeFiles). */
  nodes: string;
}

export async function indexFiles(fleet: Fleet): Promise<IndexFiles> {
  // A checkout whose .git is a folder keeps it in .git/mesh; otherwise (a worktree, GIT_DIR) git says where.
  const plain = !process.env.GIT_DIR && !process.env.GIT_COMMON_DIR && statSync(join(fleet.dir, '.git'), { throwIfNoEntry: false })?.isDirectory();
  const [path, config] = plain ? [join(fleet.dir, '.git', 'mesh'), join(fleet.dir, '.git', 'config')] : (await git(fleet.dir, ['rev-parse', '--git-path', 'mesh', '--git-path', 'config'])).trim().split('\n');
  const abs = (p: string) => (isAbsolute(p) ? p : join(fleet.dir, p));
  const dir = abs(path!);
  return { store: dir, index: join(dir, 'reports.json'), config: abs(config!), identities: join(dir, 'identities.json'), texts: join(dir, 'report-texts.bin'), nodes: join(dir, 'nodes.json') };
}

/**
 * What readIndex read: the index without its records (`index.nodes` is empty), the tip each
 * node had (`seen`), its records when asked for (`records()`: parsed then), and each node's
 * report still unread in `views` (the JSON of node → report).
 */
export interface ReadIndex {
  index: IndexFile;
  seen: Map<string, string>;
  records: () => Record<string, NodeRecord>;
  views?: Buffer;
  /** identities.json as read, parsed into `index.identities` by identityBlobs (after the first fetch is out). */
  identities?: string;
  /** The index was written by another mesh-cli version (or one that did not name itself): this run writes it again. */
  otherReader?: boolean;
}

/**
 * The index. Format 4 is three lines of JSON: format, the mesh-cli version that judged the
 * reports (another version judges again those it found invalid: unjudged), vouches and each
 * node's tip commit; the records without their reports; node → report. A run needs only the first
 * line before its first fetch; the second is parsed while that fetch is out, and the third only if
 * some report is still the node's last (when every report changed, it never is). An index in any
 * other format (those of earlier mesh-cli versions included) is rebuilt from origin, with the note
 * that says so.
 */
export async function readIndex(files: IndexFiles): Promise<ReadIndex> {
  const empty = (): ReadIndex => ({ index: { format: 4, nodes: {}, identities: {}, vouched: [] }, seen: new Map(), records: () => ({}) });
  const [bytes, identities] = await Promise.all([readWhole(files.index).catch(() => null), readWhole(files.identities).then((b) => b.toString('utf8'), () => '')]);
  if (bytes === null && !existsSync(files.index)) return empty();
  try {
    // Only the first line is decoded here: the rest stays bytes until it is needed.
    const lines = bytes ? splitLines(bytes, 3) : [];
    const first = JSON.parse(lines[0]?.toString('utf8') ?? '') as IndexV4;
    if (first.format === 4 && lines.length === 3 && Array.isArray(first.vouched) && first.tips && typeof first.tips === 'object') {
      const seen = new Map(Object.entries(first.tips));
      const parse = (): Record<string, NodeRecord> => {
        try {
          const read = (JSON.parse(lines[1]!.toString('utf8')) as { nodes: Record<string, NodeRecord> }).nodes;
          for (const record of Object.values(read)) record.tip.report = null;
          return read;
        } catch {
          throw new DamagedIndex(files.index);
        }
      };
      const parsed = first.reader === HOST_VERSION ? undefined : unjudged(parse(), seen, first.reader, files.index);
      // The records must be those of the tips the run began with: a node in one line and not the
      // other, or at another commit, means the file was damaged.
      const records = () => {
        const read = parsed ?? parse();
        if (Object.keys(read).length !== seen.size || [...seen].some(([node, commit]) => read[node]?.tip.commit !== commit)) throw new DamagedIndex(files.index);
        return read;
      };
      return { index: { format: 4, nodes: {}, identities: {}, vouched: first.vouched }, seen, records, views: lines[2], identities, otherReader: first.reader !== HOST_VERSION };
    }
  } catch {
    // said below
  }
  console.error(damagedNote(files.index));
  return empty();
}

/**
 * `records` without the nodes whose report another mesh-cli (version `reader`) found invalid, which
 * are also taken out of `seen`: this run fetches and judges them again, as a node seen the first
 * time. A reader of another version may read what that one could not (a newer host's report), or
 * refuse what it took; what it found valid stays, with the chain the index remembers.
 */
function unjudged(records: Record<string, NodeRecord>, seen: Map<string, string>, reader: string | undefined, file: string): Record<string, NodeRecord> {
  const again = Object.keys(records).filter((node) => records[node]!.tip.verdict.signature === 'invalid');
  for (const node of again) {
    seen.delete(node);
    delete records[node];
  }
  if (again.length > 0) console.error(`note: ${file} was written by ${reader ? `mesh-cli ${reader}` : 'an earlier mesh-cli'}; the ${again.length === 1 ? 'report' : `${again.length} reports`} it found invalid ${again.length === 1 ? 'is' : 'are'} judged again by this one (${HOST_VERSION})`);
  return records;
}

/**
 * The file at `path` in one read off this thread: readFile reads 512 KiB at a time, each read
 * waiting for this thread's next turn, which a run keeps busy (a 12 MB index took ~0.2 s so).
 */
async function readWhole(path: string): Promise<Buffer> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    const buf = Buffer.allocUnsafe(size);
    let at = 0;
    for (let got = -1; at < size && got !== 0; at += got) got = (await file.read(buf, at, size - at, at)).bytesRead;
    return at < size ? buf.subarray(0, at) : buf;
  } finally {
    await file.close();
  }
}

/**
 * The index is a cache of what origin has, so a damaged one is rebuilt from origin; what is lost
 * is the memory of earlier tips, so a branch rewound before this run is not caught as replayed or
 * forked by it.
 */
export function damagedNote(file: string): string {
  return `note: ${file} could not be read; it is rebuilt from origin, and reports seen before it are not compared with this run's`;
}

/** Thrown when the index's records turn out damaged after the run has begun with its first line. */
export class DamagedIndex extends Error {
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
  /** The version of the mesh-cli that judged the reports (absent: one from before it was kept). */
  reader?: string;
  vouched: string[];
  tips: Record<string, string>;
}

/**
 * Parsed node.yaml files by blob id, from the text of identities.json; a cache (an unreadable one
 * is parsed again from main, and so is one another mesh-cli version parsed: it may have read a
 * node.yaml this one reads otherwise).
 */
export function parseIdentities(text: string): IndexFile['identities'] {
  try {
    const read = JSON.parse(text) as { reader?: string; identities?: IndexFile['identities'] };
    return read.reader === HOST_VERSION && read.identities && typeof read.identities === 'object' ? read.identities : {};
  } catch {
    return {};
  }
}

/** What nodes.json keeps: the hash of a listing of nodes/ on main, each node's node.yaml path in it and its blob id. */
export interface NodesCache {
  key: string;
  places: Array<[node: string, file: string | null]>;
  ids: Array<[node: string, blob: string]>;
}

/** nodes.json, or null when it is missing or unreadable (a cache: it is made again). */
export function readNodesCache(file: string): NodesCache | null {
  try {
    const read = JSON.parse(readFileSync(file, 'utf8')) as NodesCache;
    return typeof read.key === 'string' && Array.isArray(read.places) && Array.isArray(read.ids) ? read : null;
  } catch {
    return null;
  }
}

/** Keep `cache` in nodes.json; a checkout that cannot be written to only loses the cache. */
export function writeNodesCache(file: string, cache: NodesCache): void {
  let tmp: string | undefined;
  try {
    mkdirSync(dirname(file), { recursive: true });
    tmp = tempBeside(file);
    writeFileSync(tmp, JSON.stringify(cache));
    renameSync(tmp, file);
  } catch {
    if (tmp) rmSync(tmp, { force: true }); // made again next run
  }
}

/** A node's record as the first line of the index keeps it: without its report. */
export function recordJson({ tip: { report: _report, ...tip }, ...record }: NodeRecord): string {
  return JSON.stringify({ ...record, tip });
}

/**
 * The index's second line: each node's record without its report (as recordJson writes one), in
 * one JSON.stringify (a call per record took ~2.5× as long at 10,000 nodes): the reports are set
 * aside while it runs (JSON leaves a field out whose value is undefined) and put back.
 */
function recordsLine(nodes: Record<string, NodeRecord>): string {
  const tips = Object.values(nodes).map((r) => r.tip);
  const reports = tips.map((tip) => tip.report);
  try {
    for (const tip of tips) (tip as { report: ReportView | null | undefined }).report = undefined;
    return JSON.stringify({ nodes });
  } finally {
    for (const [i, tip] of tips.entries()) tip.report = reports[i]!;
  }
}

/** The index's third line: node → report. */
export function reportsLine(index: IndexFile): string {
  const reports: Record<string, ReportView | null> = {};
  for (const [node, { tip }] of Object.entries(index.nodes)) reports[node] = tip.report;
  return JSON.stringify(reports);
}

/**
 * Write the index (format 4, see readIndex) from each node's record as JSON (`records`) and the
 * line of reports; and the parsed node.yaml files when `identities` (they change only when main's do).
 */
export function writeIndex(files: IndexFiles, index: IndexFile, opts: { identities: boolean; reports: string | Buffer }): void {
  mkdirSync(dirname(files.index), { recursive: true });
  if (opts.identities) writeParts(files.identities, [JSON.stringify({ reader: HOST_VERSION, identities: index.identities })]);
  const nodes = Object.keys(index.nodes);
  const tips = Object.fromEntries(nodes.map((node) => [node, index.nodes[node]!.tip.commit]));
  writeParts(files.index, [JSON.stringify({ format: index.format, reader: HOST_VERSION, vouched: index.vouched, tips }), '\n', recordsLine(index.nodes), '\n', opts.reports, '\n']);
}

/** How many UTF-16 units of a string writeParts encodes at a time: at most 3 bytes each, so a slice always fits WRITE_BUFFER. */
const SLICE_UNITS = 64 * 1024;
const WRITE_BUFFER = 3 * SLICE_UNITS;

/**
 * Write `parts` one after the other to `file` (through a temporary file of its own renamed into place: temp-file.ts).
 * Strings are encoded slice by slice into one reused buffer: writeFileSync of the joined text
 * made a flat copy of it and then its UTF-8 in new memory (~24 MB at 10,000 nodes, ~6,000 new
 * pages, each a page fault), where this touches 192 KB. A slice never ends between the two
 * halves of a surrogate pair, so every character is encoded whole.
 */
export function writeParts(file: string, parts: Array<string | Uint8Array>): void {
  const tmp = tempBeside(file);
  const fd = openSync(tmp, 'w');
  let whole = false;
  try {
    const buffer = Buffer.allocUnsafe(WRITE_BUFFER);
    const put = (bytes: Uint8Array) => {
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
    };
    for (const part of parts) {
      if (typeof part !== 'string') {
        put(part);
        continue;
      }
      for (let at = 0; at < part.length; ) {
        let end = Math.min(at + SLICE_UNITS, part.length);
        if (end < part.length && isHighSurrogate(part.charCodeAt(end - 1))) end--;
        put(buffer.subarray(0, buffer.write(part.slice(at, end), 0, 'utf8')));
        at = end;
      }
    }
    whole = true;
  } finally {
    closeSync(fd);
    if (!whole) rmSync(tmp, { force: true });
  }
  renameSync(tmp, file);
}

const isHighSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
