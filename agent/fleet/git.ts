/**
 * The host's view of the fleet repo, through isomorphic-git (no git binary on machines).
 * It polls the tip of main with one protocol-v2 ls-refs, fetches only when the tip moved
 * (shallow the first time, incremental after), reads only nodes/<node>/ from the object
 * store without a checkout, and pushes its own report branch.
 */
import * as fs from 'node:fs';
import git, { Errors, type HttpClient } from 'isomorphic-git';
import type { TreeReader } from '../declaration.js';
import { MeshError, messageOf } from '../errors.js';

export interface FleetRepo {
  /** The tip of `branch` on the server, or null when the branch does not exist. */
  poll(branch: string): Promise<string | null>;
  /** Fetch `branch` into the local object store; returns its tip. */
  fetch(branch: string): Promise<string>;
  /** The tip of `branch` as last fetched, or null. */
  fetched(branch: string): Promise<string | null>;
  /** Read files of `commit` without a checkout. */
  tree(commit: string): TreeReader;
  /** Commit `files` on the local branch `ref` (parent: its current tip), signed by `onSign`. */
  commit(ref: string, files: Record<string, string>, message: string, onSign: git.SignCallback): Promise<string>;
  /** Push local `ref` to the same name on the server. */
  push(ref: string): Promise<void>;
  /** The tip of a local ref, or null. */
  local(ref: string): Promise<string | null>;
  /** Fetch the server's `ref` (shallow) and point the local `ref` at it; null when the server has none. */
  adopt(ref: string): Promise<string | null>;
}

/** A FleetRepo over the bare git dir `gitdir`, talking to `url` with `http`. */
export async function openFleetRepo(gitdir: string, url: string, http: HttpClient): Promise<FleetRepo> {
  if (!fs.existsSync(`${gitdir}/HEAD`)) await git.init({ fs, gitdir, bare: true, defaultBranch: 'main' });
  await git.addRemote({ fs, gitdir, remote: 'origin', url, force: true });
  const cache = {};

  const resolveOr = async (ref: string) => git.resolveRef({ fs, gitdir, ref }).catch(() => null);
  return {
    async poll(branch) {
      const refs = await network('poll', url, () => git.listServerRefs({ http, url, protocolVersion: 2, prefix: `refs/heads/${branch}` }));
      return refs.find((r) => r.ref === `refs/heads/${branch}`)?.oid ?? null;
    },
    async fetch(branch) {
      const first = (await resolveOr(`refs/remotes/origin/${branch}`)) === null;
      const result = await network('fetch', url, () =>
        git.fetch({ fs, http, gitdir, remote: 'origin', ref: branch, singleBranch: true, tags: false, ...(first ? { depth: 1 } : {}) }),
      );
      if (!result.fetchHead) throw new MeshError('E_NO_MAIN', `the fleet repo ${url} has no branch ${branch}`, { next: 'wait' });
      return result.fetchHead;
    },
    fetched: (branch) => resolveOr(`refs/remotes/origin/${branch}`),
    local: (ref) => resolveOr(ref),
    tree(commit) {
      return {
        async list(dir) {
          const tree = await git.readTree({ fs, gitdir, oid: commit, filepath: dir, cache }).catch((e) => notFound(e));
          return tree ? tree.tree.filter((e) => e.type === 'blob').map((e) => e.path) : null;
        },
        async read(path) {
          const blob = await git.readBlob({ fs, gitdir, oid: commit, filepath: path, cache }).catch((e) => notFound(e));
          return blob ? Buffer.from(blob.blob).toString('utf8') : null;
        },
      };
    },
    async commit(ref, files, message, onSign) {
      const entries = await Promise.all(
        Object.entries(files)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(async ([path, text]) => ({ mode: '100644', path, type: 'blob' as const, oid: await git.writeBlob({ fs, gitdir, blob: Buffer.from(text) }) })),
      );
      const tree = await git.writeTree({ fs, gitdir, tree: entries });
      const parent = await resolveOr(ref);
      const who = { name: 'mesh-host', email: 'mesh-host@localhost' };
      return git.commit({ fs, gitdir, ref, tree, parent: parent ? [parent] : [], message, author: who, committer: who, signingKey: 'node', onSign });
    },
    async adopt(ref) {
      const branch = ref.replace(/^refs\/heads\//, '');
      const refs = await network('poll', url, () => git.listServerRefs({ http, url, protocolVersion: 2, prefix: ref }));
      const tip = refs.find((r) => r.ref === ref)?.oid;
      if (!tip) return null;
      await network('fetch', url, () => git.fetch({ fs, http, gitdir, remote: 'origin', ref: branch, singleBranch: true, tags: false, depth: 1 }));
      await git.writeRef({ fs, gitdir, ref, value: tip, force: true });
      return tip;
    },
    async push(ref) {
      const result = await network('push', url, () => git.push({ fs, http, gitdir, remote: 'origin', ref, remoteRef: ref, force: false }));
      const status = result.refs[ref];
      if (!result.ok || (status && !status.ok)) {
        throw new MeshError('E_PUSH_REJECTED', `the server refused the report push to ${ref}: ${status?.error ?? result.error ?? 'unknown reason'}`, { next: 'retry' });
      }
    },
  };
}

function notFound(e: unknown): null {
  if (e instanceof Errors.NotFoundError) return null;
  throw e;
}

/** Run a network operation; failures to reach the server become retryable errors that say what was tried. */
async function network<T>(what: string, url: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (e) {
    if (e instanceof MeshError) throw e;
    const http = e instanceof Errors.HttpError ? ` (HTTP ${(e.data as { statusCode?: number }).statusCode})` : '';
    throw new MeshError('E_FLEET_UNREACHABLE', `cannot ${what} the fleet repo at ${url}${http}: ${messageOf(e)}`, { next: 'retry', cause: e });
  }
}
