/**
 * What a range of commits does to trust, for a reviewer before anything else: a change of
 * mesh.yaml's `trust:` or `signers` (who the hosts will believe from then on), and every commit
 * in the range that is unsigned or signed by a key not trusted at its parent. Hosts refuse such
 * a commit at the tip, but an operator who signs on top of it deploys it, and a signers change
 * in it becomes trusted on every host. `plan`, `verify-range` and the pre-push hook show this.
 * The check is the hosts' own (core/trust/check.ts). With it, a change of `reports.shards` that
 * does more than append: it sends nodes' reports where their history is not, which no host undoes.
 */
import { fleetTrust, verifyCommit } from '../core/trust/check.js';
import { fingerprint } from '../core/sign/sshsig.js';
import { appendsOnly, shardList, shardListChanges } from '../core/report/shard.js';
import type { TrustedKey } from '../core/trust/state.js';
import { git, gitBytes } from './git.js';
import { EMPTY_TREE, fromFiles } from './tree.js';

export interface TrustChange {
  /** One line per change: `trust: signed -> none`, `signer added: NAME (SHA256:…)`. */
  lines: string[];
}

export interface SuspectCommit {
  commit: string;
  subject: string;
  /** Why the hosts would refuse it at the tip: unsigned, or signed by a key not trusted at its parent. */
  problem: string;
}

export interface TrustReview {
  /** How mesh.yaml's trust settings differ between base and head (empty: they do not). */
  changes: string[];
  /** Commits in base..head that the hosts would not accept on their own signature. */
  suspects: SuspectCommit[];
  /** What the range does to `reports.shards` beyond appending to it (empty: nothing). */
  shards: string[];
}

/** Review what `base..head` does to trust; `unsignedHead`: head is the working tree made a commit (not signed yet), so only its trust settings are judged. */
export async function reviewTrust(dir: string, base: string, head: string, unsignedHead = false): Promise<TrustReview> {
  const [before, after] = await Promise.all([meshYamlAt(dir, base), meshYamlAt(dir, head)]);
  const changes = compare(await settingsOf(base, before), await settingsOf(head, after));
  const shards = await shardChanges(dir, head, shardList(before), shardList(after));
  const commits = (await git(dir, ['rev-list', '--reverse', `${base}..${head}`])).split('\n').filter(Boolean);
  const suspects: SuspectCommit[] = [];
  for (const commit of commits) {
    if (unsignedHead && commit === head) continue;
    const parent = (await git(dir, ['rev-list', '--parents', '-n', '1', commit])).trim().split(' ')[1];
    const trusted = parent ? await settingsAt(dir, parent) : null;
    if (!trusted || trusted.mode === 'none') continue; // nothing is checked at that point: there is nothing to break
    const verdict = verifyCommit(await gitBytes(dir, ['cat-file', 'commit', commit]), trusted.signers);
    if (verdict.ok) continue;
    const subject = (await git(dir, ['log', '-1', '--format=%s', commit])).trim();
    suspects.push({ commit, subject, problem: verdict.message });
  }
  return { changes, suspects, shards };
}

type Settings = Awaited<ReturnType<typeof fleetTrust>>;

/** mesh.yaml's text at `rev` (null: there is none): only that one file is read (one git process), not the fleet. */
function meshYamlAt(dir: string, rev: string): Promise<string | null> {
  return rev === EMPTY_TREE ? Promise.resolve(null) : git(dir, ['cat-file', 'blob', `${rev}:mesh.yaml`]).catch(() => null);
}

/** The trust settings of mesh.yaml's `text` at `rev`. */
function settingsOf(rev: string, text: string | null): Promise<Settings> {
  if (rev === EMPTY_TREE) return Promise.resolve(null);
  return fleetTrust(fromFiles(new Map(text === null ? [] : [['mesh.yaml', text]])));
}

async function settingsAt(dir: string, rev: string): Promise<Settings> {
  return settingsOf(rev, await meshYamlAt(dir, rev));
}

/** The shard list's change from `before` to `after`, with the nodes at `head` counted (their names only are read). */
async function shardChanges(dir: string, head: string, before: string[] | null, after: string[] | null): Promise<string[]> {
  if (appendsOnly(before, after)) return [];
  const paths = (await git(dir, ['ls-tree', '-r', '-z', '--name-only', '--full-tree', head, 'nodes'])).split('\0');
  const nodes = paths.filter((p) => p.endsWith('/node.yaml') && p !== 'nodes/node.yaml').map((p) => p.split('/').at(-2)!);
  return shardListChanges(before, after, nodes);
}

function compare(before: Settings, after: Settings): string[] {
  const lines: string[] = [];
  if (!before || !after) return lines; // a mesh.yaml that is missing or does not load is validate's error, not a trust change
  const mode = (s: Settings) => s?.mode ?? '(no mesh.yaml)';
  if (mode(before) !== mode(after)) lines.push(`trust: ${mode(before)} -> ${mode(after)}`);
  const keys = (s: Settings) => new Map((s?.signers ?? []).map((k) => [k.key, k]));
  const [was, now] = [keys(before), keys(after)];
  for (const [key, k] of now) if (!was.has(key)) lines.push(`signer added: ${describe(k)}`);
  for (const [key, k] of was) if (!now.has(key)) lines.push(`signer removed: ${describe(k)}`);
  return lines;
}

function describe(k: TrustedKey): string {
  let print: string;
  try {
    print = fingerprint(k.key);
  } catch {
    print = 'a key that cannot be read';
  }
  return `${k.name ?? '(no name)'} (${print})`;
}

/** The review as text lines for the top of plan's output (empty when there is nothing to say). */
export function trustLines(review: TrustReview): string[] {
  const lines: string[] = [];
  if (review.changes.length > 0) lines.push('TRUST CHANGES: mesh.yaml changes whom every host believes:', ...review.changes.map((c) => `  ${c}`));
  if (review.suspects.length > 0) {
    lines.push(`TRUST: ${review.suspects.length} commit${review.suspects.length === 1 ? '' : 's'} in this range would be refused by the hosts on their own (signing on top of them deploys them):`);
    for (const s of review.suspects) lines.push(`  ${s.commit.slice(0, 12)} "${s.subject}": ${s.problem}`);
  }
  if (review.shards.length > 0) lines.push('REPORT SHARDS: mesh.yaml moves report branches in a way mirror sync does not mend (docs/servers.md):', ...review.shards.map((c) => `  ${c}`));
  return lines;
}
