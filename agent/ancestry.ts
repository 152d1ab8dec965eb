/**
 * Whether one commit descends from another in the host's local object store. The host holds
 * history only from its first shallow fetch onward, so the answer can be "unknown": the walk
 * reached the shallow boundary (or a commit it does not have) before finding the ancestor.
 * `descendsDeepening` then fetches more history a bounded number of times before giving up.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import git from 'isomorphic-git';
import { parseCommitObject } from '../core/git/commit.js';

export type Ancestry = 'yes' | 'no' | 'unknown';

/** At most this many commits are walked for one question. */
const MAX_WALK = 20_000;

/** How much history each deepening asks for, in order; after the last the answer stays "unknown". */
export const DEEPEN_STEPS = [32, 512, 4096];

/** Whether `oid` is `ancestor` or descends from it, in the bare git dir `gitdir`. */
export async function descends(gitdir: string, oid: string, ancestor: string): Promise<Ancestry> {
  if (oid === ancestor) return 'yes';
  const shallow = shallowCommits(gitdir);
  const queue = [oid];
  const seen = new Set(queue);
  let cut = false;
  for (let i = 0; i < queue.length; i++) {
    if (i >= MAX_WALK) return 'unknown';
    const current = queue[i]!;
    const parents = await parentsOf(gitdir, current);
    if (parents === null) {
      cut = true; // a commit we do not have
      continue;
    }
    if (parents.includes(ancestor)) return 'yes';
    if (shallow.has(current)) {
      cut = cut || parents.length > 0;
      continue;
    }
    for (const p of parents) {
      if (seen.has(p)) continue;
      seen.add(p);
      queue.push(p);
    }
  }
  return cut ? 'unknown' : 'no';
}

/** `descends`, deepening the local history with `deepen(depth)` while the answer is "unknown". */
export async function descendsDeepening(gitdir: string, oid: string, ancestor: string, deepen: (depth: number) => Promise<void>): Promise<Ancestry> {
  let answer = await descends(gitdir, oid, ancestor);
  for (const depth of DEEPEN_STEPS) {
    if (answer !== 'unknown') return answer;
    await deepen(depth);
    answer = await descends(gitdir, oid, ancestor);
  }
  return answer;
}

/** The parents of commit `oid`, or null when the object is not here (or is not a commit). */
export async function parentsOf(gitdir: string, oid: string): Promise<string[] | null> {
  const raw = await readCommitBytes(gitdir, oid);
  if (raw === null) return null;
  const parsed = parseCommitObject(raw);
  return parsed.ok ? parsed.commit.parents : null;
}

/** The raw content of commit `oid`, or null when it is not in the object store (or not a commit). */
export async function readCommitBytes(gitdir: string, oid: string): Promise<Uint8Array | null> {
  try {
    const o = await git.readObject({ fs, gitdir, oid, format: 'content' });
    return o.type === 'commit' && o.object instanceof Uint8Array ? o.object : null;
  } catch {
    return null;
  }
}

function shallowCommits(gitdir: string): Set<string> {
  try {
    return new Set(fs.readFileSync(join(gitdir, 'shallow'), 'utf8').split('\n').filter(Boolean));
  } catch {
    return new Set();
  }
}
