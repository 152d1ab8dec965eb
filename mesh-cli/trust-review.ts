/**
 * What a range of commits does to trust, for a reviewer before anything else: a change of
 * mesh.yaml's `trust:` or `signers` (who the hosts will believe from then on), and every commit
 * in the range that is unsigned or signed by a key not trusted at its parent. Hosts refuse such
 * a commit at the tip, but an operator who signs on top of it deploys it, and a signers change
 * in it becomes trusted on every host. `plan`, `verify-range` and the pre-push hook show this.
 * The check is the hosts' own (core/trust/check.ts).
 */
import { fleetTrust, verifyCommit } from '../core/trust/check.js';
import { fingerprint } from '../core/sign/sshsig.js';
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
}

/** Review what `base..head` does to trust; `unsignedHead`: head is the working tree made a commit (not signed yet), so only its trust settings are judged. */
export async function reviewTrust(dir: string, base: string, head: string, unsignedHead = false): Promise<TrustReview> {
  const [before, after] = await Promise.all([settingsAt(dir, base), settingsAt(dir, head)]);
  const changes = compare(before, after);
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
  return { changes, suspects };
}

type Settings = Awaited<ReturnType<typeof fleetTrust>>;

/** mesh.yaml's trust settings at `rev`: only that one file is read (one git process), not the fleet. */
async function settingsAt(dir: string, rev: string): Promise<Settings> {
  if (rev === EMPTY_TREE) return null;
  const text = await git(dir, ['cat-file', 'blob', `${rev}:mesh.yaml`]).catch(() => null);
  return fleetTrust(fromFiles(new Map(text === null ? [] : [['mesh.yaml', text]])));
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
  return lines;
}
