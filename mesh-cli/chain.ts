/**
 * The hash chain of each node's reports, as `mesh-cli status` checks it. Each report names the
 * sha256 of the one before it and the next sequence number, so:
 *
 * - reordered: the tip's `previous` is not the hash of its parent commit's status.json, or its
 *   sequence is not the parent's + 1 (a heartbeat that replaced an earlier heartbeat may skip
 *   numbers: the report it names is gone by design);
 * - forked: the tip does not descend from the tip status saw last time (kept in the checkout as
 *   refs/mesh/chain/<node>), unless that one was a heartbeat and the new tip descends from its
 *   parent (it was replaced); the verdict stays while that tip does;
 * - replayed: the tip's sequence is lower than one status has already seen from a valid report.
 *
 * What status has seen lives in the checkout's git dir (mesh-chain.json and those refs), so
 * a server that rewinds a report branch between two runs of status is caught on the second.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { VerifiedReport } from '../agent/verify-report.js';
import { catFiles, type Fleet } from './fleet.js';
import { REPORTS } from './reports.js';

export type ChainVerdict = 'ok' | 'replayed' | 'reordered' | 'forked';

/** What each verdict other than ok means, as status prints it. */
export const CHAIN_NOTES: Record<Exclude<ChainVerdict, 'ok'>, string> = {
  replayed: 'the last report is older than one status has already seen: the report branch was rewound to a replayed report',
  reordered: 'the last report does not follow the report before it on its branch (wrong previous hash or sequence)',
  forked: 'the report branch was rewritten: its tip does not descend from the tip status saw before',
};

interface Seen {
  sequence: number;
  forked: string[];
}

const HEARTBEAT = 'Mesh-Heartbeat: yes';
const SEEN_REFS = 'refs/mesh/chain/';

/** Check every node's report chain against what status saw before, and remember what it sees now. */
export async function checkChains(fleet: Fleet, nodes: string[], reports: Map<string, VerifiedReport>): Promise<Map<string, ChainVerdict>> {
  const file = await statePath(fleet);
  const state = readState(file);
  const tips = await refs(fleet, REPORTS);
  const seenTips = await refs(fleet, SEEN_REFS);
  const specs = nodes.flatMap((n) => [`${REPORTS}${n}`, `${REPORTS}${n}^:status.json`, `${REPORTS}${n}^`]);
  const blobs = await catFiles(fleet.dir, specs);
  const verdicts = new Map<string, ChainVerdict>();
  const updates: string[] = [];
  for (const node of nodes) {
    const tip = tips.get(node);
    if (!tip) continue;
    const seen = (state[node] ??= { sequence: 0, forked: [] });
    const before = seenTips.get(node);
    if (before && before !== tip && !(await descendsOrReplaces(fleet, tip, before))) seen.forked = [...seen.forked.slice(-19), tip];
    if (before !== tip) updates.push(`update ${SEEN_REFS}${node} ${tip}\n`);
    const report = reports.get(node)?.signature === 'valid' ? reports.get(node)!.report! : undefined;
    const replayed = report !== undefined && report.sequence < seen.sequence;
    if (report) seen.sequence = Math.max(seen.sequence, report.sequence);
    const message = commitMessage(blobs.get(`${REPORTS}${node}`) ?? null);
    const parent = blobs.get(`${REPORTS}${node}^`) ? (blobs.get(`${REPORTS}${node}^:status.json`)?.toString('utf8') ?? '') : null;
    const ordered = !report || inOrder(report.previous, report.sequence, parent, message.includes(HEARTBEAT));
    verdicts.set(node, replayed ? 'replayed' : seen.forked.includes(tip) ? 'forked' : ordered ? 'ok' : 'reordered');
  }
  if (updates.length > 0) spawnSync('git', ['update-ref', '--stdin'], { cwd: fleet.dir, input: updates.join(''), stdio: ['pipe', 'ignore', 'ignore'] });
  writeFileSync(file, JSON.stringify({ format: 1, nodes: state }) + '\n');
  return verdicts;
}

/** Whether a report (previous, sequence) follows the report in its parent commit (`parent`: its status.json, '' if none, null for no parent). */
export function inOrder(previous: string | null, sequence: number, parent: string | null, heartbeat: boolean): boolean {
  if (parent === null) return true; // the first report on the branch
  const parentSequence = sequenceOf(parent);
  if (parentSequence === null) return false;
  if (previous === sha256(parent) && sequence === parentSequence + 1) return true;
  return heartbeat && sequence > parentSequence;
}

async function descendsOrReplaces(fleet: Fleet, tip: string, before: string): Promise<boolean> {
  if (await isAncestor(fleet, before, tip)) return true;
  const message = commitMessage((await catFiles(fleet.dir, [before])).get(before) ?? null);
  if (!message.includes(HEARTBEAT)) return false;
  const parent = (await fleet.git.raw(['rev-parse', '--verify', '--quiet', `${before}^`]).catch(() => '')).trim();
  return parent !== '' && (await isAncestor(fleet, parent, tip));
}

async function isAncestor(fleet: Fleet, ancestor: string, oid: string): Promise<boolean> {
  // The exit code is the answer (simple-git would take a silent exit 1 for success).
  return spawnSync('git', ['merge-base', '--is-ancestor', ancestor, oid], { cwd: fleet.dir, stdio: 'ignore' }).status === 0;
}

async function refs(fleet: Fleet, prefix: string): Promise<Map<string, string>> {
  const out = await fleet.git.raw(['for-each-ref', '--format=%(objectname) %(refname)', prefix]).catch(() => '');
  return new Map(out.split('\n').filter(Boolean).map((l) => [l.slice(l.indexOf(' ') + 1 + prefix.length), l.slice(0, l.indexOf(' '))]));
}

function commitMessage(raw: Buffer | null): string {
  if (!raw) return '';
  const text = raw.toString('utf8');
  const end = text.indexOf('\n\n');
  return end < 0 ? '' : text.slice(end + 2);
}

function sequenceOf(text: string): number | null {
  try {
    const n = (JSON.parse(text) as { sequence?: unknown }).sequence;
    return typeof n === 'number' && Number.isInteger(n) ? n : null;
  } catch {
    return null;
  }
}

async function statePath(fleet: Fleet): Promise<string> {
  const path = (await fleet.git.raw(['rev-parse', '--git-path', 'mesh-chain.json'])).trim();
  return isAbsolute(path) ? path : join(fleet.dir, path);
}

function readState(file: string): Record<string, Seen> {
  try {
    return existsSync(file) ? ((JSON.parse(readFileSync(file, 'utf8')) as { nodes?: Record<string, Seen> }).nodes ?? {}) : {};
  } catch {
    return {};
  }
}

function sha256(text: string): string {
  return 'sha256:' + createHash('sha256').update(text).digest('hex');
}
