/**
 * A fetch that moves the remote-tracking ref only once the objects it names are here.
 * isomorphic-git writes the ref (and the shallow file) before it has read the pack off the wire,
 * so a fetch cut off mid-transfer would leave the ref naming a commit the host never received,
 * and every later pass would find main's tip unreadable and call it untrusted. Here the ref, the
 * shallow file and any half-written pack are put back as they were when the fetch fails or
 * brings less than it names; the failure stays what it was, a network fault.
 *
 * The URL is always the one the caller passes (the host's config), never a remote's URL from
 * the cache's own .git/config, and nothing else is taken from that file either (no corsProxy,
 * no `branch.*.merge`).
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import git, { Errors, type HttpClient } from 'isomorphic-git';

export interface FetchArgs {
  gitdir: string;
  http: HttpClient;
  url: string;
  branch: string;
  cache: object;
  /** Shallow: how many commits; with `relative`, how many more behind the shallow boundary. */
  depth?: number;
  relative?: boolean;
  /** Bring the objects only: the remote-tracking ref stays where it was (the caller checks the tip before it points anything at it). */
  moveNoRef?: boolean;
}

/** Fetch `branch` from `url` into `gitdir`; its tip, or null when the server has no such branch. Throws, with every ref as before, when the transfer fails. */
export async function fetchBranch(a: FetchArgs): Promise<string | null> {
  const before = await snapshot(a.gitdir, a.branch);
  try {
    const result = await git
      .fetch({
        fs, http: a.http, gitdir: a.gitdir, cache: a.cache, url: a.url, corsProxy: '', remote: 'origin', ref: a.branch, remoteRef: a.branch,
        singleBranch: true, tags: false, ...(a.depth ? { depth: a.depth } : {}), ...(a.relative ? { relative: true } : {}),
      })
      .catch((e) => {
        if (e instanceof Errors.NotFoundError) return { fetchHead: null }; // the server has no such branch
        throw e;
      });
    const tip = result.fetchHead ?? null;
    if (tip && !(await readable(a.gitdir, tip, a.cache))) throw new Error(`the transfer ended before commit ${tip.slice(0, 12)} of ${a.branch} had arrived`);
    if (a.moveNoRef) await restoreTracking(a.gitdir, a.branch, before.tracking);
    return tip;
  } catch (e) {
    await restore(a.gitdir, a.branch, before);
    throw e;
  }
}

/** Whether commit `oid` and its top folder can be read here. */
export async function readable(gitdir: string, oid: string, cache: object = {}): Promise<boolean> {
  try {
    const { commit } = await git.readCommit({ fs, gitdir, oid, cache });
    await git.readTree({ fs, gitdir, oid: commit.tree, cache });
    return true;
  } catch {
    return false;
  }
}

interface Snapshot {
  tracking: string | null;
  shallow: string | null;
  packs: Set<string>;
}

async function snapshot(gitdir: string, branch: string): Promise<Snapshot> {
  const tracking = await git.resolveRef({ fs, gitdir, ref: `refs/remotes/origin/${branch}` }).catch(() => null);
  const shallowFile = join(gitdir, 'shallow');
  return { tracking, shallow: fs.existsSync(shallowFile) ? fs.readFileSync(shallowFile, 'utf8') : null, packs: new Set(packFiles(gitdir)) };
}

async function restore(gitdir: string, branch: string, s: Snapshot): Promise<void> {
  await restoreTracking(gitdir, branch, s.tracking);
  const shallowFile = join(gitdir, 'shallow');
  if (s.shallow === null) fs.rmSync(shallowFile, { force: true });
  else fs.writeFileSync(shallowFile, s.shallow);
  // A pack written without its index (the library indexes after writing) is never read: remove it.
  for (const f of packFiles(gitdir)) {
    if (!s.packs.has(f) && f.endsWith('.pack') && !fs.existsSync(join(gitdir, 'objects/pack', f.replace(/\.pack$/, '.idx')))) fs.rmSync(join(gitdir, 'objects/pack', f), { force: true });
  }
}

async function restoreTracking(gitdir: string, branch: string, tracking: string | null): Promise<void> {
  const ref = `refs/remotes/origin/${branch}`;
  if (tracking) await git.writeRef({ fs, gitdir, ref, value: tracking, force: true });
  else await git.deleteRef({ fs, gitdir, ref }).catch(() => undefined);
}

function packFiles(gitdir: string): string[] {
  const dir = join(gitdir, 'objects/pack');
  return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
}
