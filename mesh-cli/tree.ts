/**
 * The fleet repo as a TreeReader (agent/declaration.ts): one commit read from git objects
 * without a checkout (one `git ls-tree -r`, then one `git cat-file --batch` for every
 * declaration-shaped blob), or the working tree on disk, which is what `validate` checks
 * before anything is committed.
 */
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { TreeReader } from '../core/declaration/load.js';
import { MeshError } from '../core/errors.js';
import { catFiles } from './fleet.js';
import { git, gitOk } from './git.js';
import { pathsReader } from './layout.js';

/** git's well-known empty tree: the "parent" of a root commit. */
export const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** A TreeReader that can also list folders, so that every node folder can be found. */
export interface FleetTree extends TreeReader {
  /** Names of the folders directly in `dir`; empty when `dir` does not exist. */
  folders(dir: string): Promise<string[]>;
}

/** Only these parts of the fleet repo feed declarations; the rest (README, CI files) is never read. */
const FEEDS = (path: string) => path === 'mesh.yaml' || path.startsWith('nodes/') || path.startsWith('roles/');

/** `rev` of the repository at `dir`, read from git objects with two git processes. */
export async function commitTree(dir: string, rev: string): Promise<FleetTree> {
  const listing = await git(dir, ['ls-tree', '-r', '-z', '--full-tree', rev]).catch((e: unknown) => {
      throw new MeshError('E_REV', `cannot read ${rev} in ${dir}: ${e instanceof Error ? e.message.trim() : String(e)}`);
    });
  const oids = new Map<string, string>();
  for (const entry of listing.split('\0')) {
    const m = /^\d+ blob ([0-9a-f]+)\t(.*)$/s.exec(entry);
    if (m && FEEDS(m[2]!)) oids.set(m[2]!, m[1]!);
  }
  const blobs = await catFiles(dir, [...new Set(oids.values())]);
  return fromFiles(new Map([...oids].map(([path, oid]) => [path, blobs.get(oid)?.toString('utf8') ?? ''])));
}

/** A tree over an in-memory map of repo-relative path → text (its folders indexed once). */
export function fromFiles(files: Map<string, string>): FleetTree {
  const folders = pathsReader(files.keys());
  return {
    list: (dir) => folders.list(dir),
    async read(path) {
      return files.get(path) ?? null;
    },
    folders: (dir) => folders.folders(dir),
  };
}

/** The working tree at `dir` as it is on disk, committed or not. */
export function workingTree(dir: string): FleetTree {
  const at = (path: string) => join(dir, path);
  const kinds = (path: string) => {
    if (!existsSync(at(path)) || !statSync(at(path)).isDirectory()) return null;
    return readdirSync(at(path), { withFileTypes: true }).filter((e) => !e.name.startsWith('.'));
  };
  return {
    async list(path) {
      return kinds(path)?.filter((e) => e.isFile()).map((e) => e.name).sort() ?? null;
    },
    async read(path) {
      return existsSync(at(path)) && statSync(at(path)).isFile() ? readFileSync(at(path), 'utf8') : null;
    },
    async folders(path) {
      return kinds(path)?.filter((e) => e.isDirectory()).map((e) => e.name).sort() ?? [];
    },
  };
}

/**
 * The working tree as a commit on top of HEAD (what `git add -A` would take, new files included),
 * made with a private index: HEAD, the index and every branch stay as they are, and the commit is
 * an unreferenced object git collects in time.
 */
export async function workingCommit(dir: string): Promise<string> {
  const gitDir = (await git(dir, ['rev-parse', '--absolute-git-dir'])).trim();
  const index = join(gitDir, `mesh-working-index-${process.pid}`);
  const env = { GIT_INDEX_FILE: index, GIT_AUTHOR_NAME: 'mesh-cli', GIT_AUTHOR_EMAIL: 'mesh-cli@localhost', GIT_COMMITTER_NAME: 'mesh-cli', GIT_COMMITTER_EMAIL: 'mesh-cli@localhost' };
  try {
    await git(dir, ['read-tree', 'HEAD'], '', env);
    await git(dir, ['add', '--all', '--', '.'], '', env);
    const tree = (await git(dir, ['write-tree'], '', env)).trim();
    return (await git(dir, ['commit-tree', '--no-gpg-sign', tree, '-p', 'HEAD', '-m', 'the working tree'], '', env)).trim();
  } finally {
    rmSync(index, { force: true });
  }
}

/** The full commit id of `rev`, or an error that says what was asked for. */
export async function resolveCommit(dir: string, rev: string): Promise<string> {
  const sha = await git(dir, ['rev-parse', '--verify', '--quiet', `${rev}^{commit}`]).catch(() => '');
  if (!sha.trim()) throw new MeshError('E_REV', `${rev} is not a commit in ${dir}: fetch it first, or name a branch, tag or commit id`);
  return sha.trim();
}

/** The first parent of `commit`, or the empty tree for a root commit. */
export async function firstParent(dir: string, commit: string): Promise<string> {
  const line = await git(dir, ['rev-list', '--parents', '-n', '1', commit]);
  return line.trim().split(' ')[1] ?? EMPTY_TREE;
}

/** Whether `ancestor` is `commit` or one of its ancestors (`git merge-base --is-ancestor`); false for unknown commits. */
export function isAncestor(dir: string, ancestor: string, commit: string): Promise<boolean> {
  return gitOk(dir, ['merge-base', '--is-ancestor', ancestor, commit]);
}
