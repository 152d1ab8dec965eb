/**
 * Keeping the host's local repository from growing with time. isomorphic-git adds a pack
 * for every fetch and never repacks, and every report adds loose objects. Two remedies:
 *
 * - a heartbeat that replaced the tip leaves the old heartbeat behind; once the server has
 *   the new tip, its loose objects are deleted (they are the host's own, and unreachable);
 * - past a threshold of packs or loose objects, a fresh git dir is filled from the server
 *   and swapped in with renames. A crash between the two renames is undone on the next open.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import git from 'isomorphic-git';
import { fsyncDir } from '../atomic.js';

/** How large the local repository may grow before it is renewed. */
export interface Upkeep {
  maxPacks: number;
  maxLoose: number;
}

/** Renew past 32 packs (32 changes of main) or 2,048 loose objects (about 500 real reports). */
export const DEFAULT_UPKEEP: Upkeep = { maxPacks: 32, maxLoose: 2048 };

/** Packs and loose objects in `gitdir`. */
export function objectCounts(gitdir: string): { packs: number; loose: number } {
  const objects = join(gitdir, 'objects');
  const list = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir) : []);
  const packs = list(join(objects, 'pack')).filter((f) => f.endsWith('.pack')).length;
  const loose = list(objects).filter((d) => /^[0-9a-f]{2}$/.test(d)).reduce((n, d) => n + list(join(objects, d)).length, 0);
  return { packs, loose };
}

/** Whether `gitdir` has outgrown `upkeep`. */
export function outgrown(gitdir: string, upkeep: Upkeep): boolean {
  const { packs, loose } = objectCounts(gitdir);
  return packs > upkeep.maxPacks || loose > upkeep.maxLoose;
}

/**
 * When `gitdir` has outgrown `upkeep` and every report on it has reached the server, renew it:
 * `fill` gets a fresh git dir and the branches to fetch into it (the fetched ones, e.g. main,
 * and the report branches), and the result is swapped in. True when it renewed.
 */
export async function renewIfOutgrown(gitdir: string, upkeep: Upkeep, fill: (next: string, fetched: string[], reports: string[]) => Promise<void>): Promise<boolean> {
  if (!outgrown(gitdir, upkeep)) return false;
  const reports = (await git.listBranches({ fs, gitdir })).filter((b) => b.startsWith('reports/'));
  const tip = (ref: string) => git.resolveRef({ fs, gitdir, ref }).catch(() => null);
  for (const r of reports) if ((await tip(`refs/heads/${r}`)) !== (await tip(`refs/remotes/origin/${r}`))) return false; // not sent yet
  const fetched = (await git.listBranches({ fs, gitdir, remote: 'origin' })).filter((b) => b !== 'HEAD' && !b.startsWith('reports/'));
  await swapInFresh(gitdir, (next) => fill(next, fetched, reports));
  return true;
}

/** Undo a swap that a crash cut between its two renames: `gitdir` is missing, the old one is complete. */
export function recoverSwap(gitdir: string): void {
  if (fs.existsSync(join(gitdir, 'HEAD')) || !fs.existsSync(join(`${gitdir}.old`, 'HEAD'))) return;
  fs.rmSync(gitdir, { recursive: true, force: true });
  fs.renameSync(`${gitdir}.old`, gitdir);
}

/** Build a new git dir with `fill` next to `gitdir`, make it durable, then swap it in (old → .old, new → gitdir). */
async function swapInFresh(gitdir: string, fill: (next: string) => Promise<void>): Promise<void> {
  const next = `${gitdir}.next`;
  for (const leftover of [next, `${gitdir}.old`]) fs.rmSync(leftover, { recursive: true, force: true }); // from a crash
  try {
    await fill(next);
    fsyncTree(next);
  } catch (e) {
    fs.rmSync(next, { recursive: true, force: true });
    throw e;
  }
  fs.renameSync(gitdir, `${gitdir}.old`);
  fs.renameSync(next, gitdir);
  fsyncDir(join(gitdir, '..'));
  fs.rmSync(`${gitdir}.old`, { recursive: true, force: true });
}

function fsyncTree(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) fsyncTree(path);
    else if (entry.isFile()) {
      const fd = fs.openSync(path, 'r');
      try {
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
    }
  }
  fsyncDir(dir);
}

const REPLACED = 'mesh-replaced';

/** Remember that the heartbeat commit `oid` was replaced, so its objects can go once the server has moved on. */
export function noteReplaced(gitdir: string, oid: string): void {
  fs.appendFileSync(join(gitdir, REPLACED), `${oid}\n`);
}

/** Whether `oid` is a heartbeat this host replaced and whose objects are still here. */
export function wasReplaced(gitdir: string, oid: string): boolean {
  const file = join(gitdir, REPLACED);
  return fs.existsSync(file) && fs.readFileSync(file, 'utf8').split('\n').includes(oid);
}

/** Delete the loose objects of replaced heartbeats that the tree of `keep` (the pushed tip) does not use. */
export async function pruneReplaced(gitdir: string, keep: string): Promise<void> {
  const file = join(gitdir, REPLACED);
  if (!fs.existsSync(file)) return;
  const used = new Set(await treeObjects(gitdir, keep).catch(() => []));
  for (const oid of fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    if (oid === keep) continue;
    for (const o of [oid, ...(await treeObjects(gitdir, oid).catch(() => []))]) {
      if (!used.has(o)) fs.rmSync(join(gitdir, 'objects', o.slice(0, 2), o.slice(2)), { force: true });
    }
  }
  fs.rmSync(file, { force: true });
}

/** The tree of commit `oid` and the blobs directly in it (a report commit has no subfolders). */
async function treeObjects(gitdir: string, oid: string): Promise<string[]> {
  const { commit } = await git.readCommit({ fs, gitdir, oid });
  const { tree } = await git.readTree({ fs, gitdir, oid: commit.tree });
  return [commit.tree, ...tree.map((e) => e.oid)];
}
