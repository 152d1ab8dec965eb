/** Reading a commit of the fleet repo from the host's object store, without a checkout. */
import * as fs from 'node:fs';
import git, { Errors } from 'isomorphic-git';
import type { TreeReader } from '../../core/declaration/declaration.js';

/** A TreeReader over `commit` in `gitdir`; `cache` hands out isomorphic-git's current cache (renewal replaces it). */
export function treeReader(gitdir: string, commit: string, cache: () => object): TreeReader {
  return {
    async list(dir) {
      const tree = await git.readTree({ fs, gitdir, oid: commit, filepath: dir, cache: cache() }).catch((e) => notFound(e));
      return tree ? tree.tree.filter((e) => e.type === 'blob').map((e) => e.path) : null;
    },
    async folders(dir) {
      const tree = await git.readTree({ fs, gitdir, oid: commit, filepath: dir, cache: cache() }).catch((e) => notFound(e));
      return tree ? tree.tree.filter((e) => e.type === 'tree').map((e) => e.path) : [];
    },
    async read(path) {
      const blob = await git.readBlob({ fs, gitdir, oid: commit, filepath: path, cache: cache() }).catch((e) => notFound(e));
      return blob ? Buffer.from(blob.blob).toString('utf8') : null;
    },
  };
}

function notFound(e: unknown): null {
  if (e instanceof Errors.NotFoundError) return null;
  throw e;
}
