/**
 * The host's view of the fleet repo, through isomorphic-git (no git binary on machines).
 * It polls the tip of main with one protocol-v2 ls-refs request, fetches only when the tip
 * moved (shallow the first time, incremental after), reads only nodes/<node>/ from the
 * object store without a checkout, and pushes its own report branch. A heartbeat replaces
 * the heartbeat before it, and the local repository is renewed before it grows too large.
 * Every URL comes from the caller (the host's config), never from the cache's .git/config; a fetch
 * cut off mid-transfer moves no ref (fetch.ts), and an unreadable cache is started afresh (cache.ts).
 */
import * as fs from 'node:fs';
import git, { Errors, type HttpClient } from 'isomorphic-git';
import type { TreeReader } from '../../core/declaration/declaration.js';
import { MeshError, messageOf } from '../../core/errors.js';
import { heartbeatMessage } from '../../core/report/branch.js';
import { isHeartbeat, replacement } from './heartbeat.js';
import { cacheFault, forgetRecovery, moveAside, pendingAdoptions, recoveryNote, rememberRecovery, setPendingAdoptions } from './cache.js';
import { fetchBranch, readable } from './fetch.js';
import { lsRefs } from './ls-refs.js';
import { treeReader } from './tree.js';
import { ours, outgoing, pushOne } from './push.js';
import { DEFAULT_UPKEEP, noteReplaced, pruneReplaced, recoverSwap, renewIfOutgrown, type Upkeep } from './renew.js';

export interface CommitOptions {
  /** The report says nothing new: mark the commit a heartbeat, and when the tip is a heartbeat too, replace it (parent: the tip's parent). */
  heartbeat?: boolean;
}

export interface FleetRepo {
  /** The tip of `branch` on the server, or null when the branch does not exist. One request. */
  poll(branch: string): Promise<string | null>;
  /** Fetch `branch` into the local object store; returns its tip. */
  fetch(branch: string): Promise<string>;
  /** The tip of `branch` as last fetched, or null. */
  fetched(branch: string): Promise<string | null>;
  /** Read files of `commit` without a checkout. */
  tree(commit: string): TreeReader;
  /** Commit `files` on the local branch `ref` (parent: its current tip), signed by `onSign`. */
  commit(ref: string, files: Record<string, string>, message: string, onSign: git.SignCallback, opts?: CommitOptions): Promise<string>;
  /** Push local `ref` to the same name on the server; `force` defaults to "the tip is a heartbeat" (it may have replaced the server's tip). */
  push(ref: string, opts?: { force?: boolean }): Promise<void>;
  /** The tip of a local ref, or null. */
  local(ref: string): Promise<string | null>;
  /** Fetch the server's `ref` (its tip and parent) and point the local `ref` at it; null when the server has none. */
  adopt(ref: string): Promise<string | null>;
  /** Fetch the tip (and parent) of the server's report branch `ref` from the push URL, moving no ref here; its tip, or null when the server has none. */
  peek(ref: string): Promise<string | null>;
  /** Point the local `ref` and its remote-tracking ref at `oid`, a commit `peek` fetched (the caller has checked it). */
  point(ref: string, oid: string): Promise<void>;
  /** How long the server asked us to wait (HTTP 429/503 Retry-After) when it last refused us, in ms; null after a success. */
  retryAfterMs(): number | null;
  /** Fetch `depth` more commits of `branch`'s history behind the shallow boundary (trust/check.ts: to decide ancestry). */
  deepen(branch: string, depth: number): Promise<void>;
  /** When the local repository was found unreadable and started afresh (cache.ts), what happened; null once a report said so. */
  recovered(): string | null;
  /** Push reports to `url` from now on (the node's report shard moved: mesh.yaml `reports.shards`). */
  reportTo(url: string): void;
}

/**
 * A FleetRepo over the bare git dir `gitdir`, talking to `url` with `http`; reports go to
 * `pushUrl` when given (else `url`), and `upkeep` bounds the local repository. With `mirrors`,
 * main is polled and fetched from the first of them that answers, then from `url`: a mirror is
 * as untrusted as any server (the trust check is the caller's), and one that is down costs one
 * failed request. Report branches live only on the push URL.
 */
export async function openFleetRepo(gitdir: string, url: string, http: HttpClient, opts: { upkeep?: Upkeep; pushUrl?: string; mirrors?: string[] } = {}): Promise<FleetRepo> {
  const upkeep = opts.upkeep ?? DEFAULT_UPKEEP;
  let pushUrl = opts.pushUrl ?? url;
  const reads = [...new Set([...(opts.mirrors ?? []), url])];
  let readUrl = reads[0]!; // the one that answered last
  recoverSwap(gitdir);
  let cache = {};
  const fresh = !fs.existsSync(gitdir) || fs.readdirSync(gitdir).length === 0;
  const fault = fresh ? null : await cacheFault(gitdir, cache);
  if (fresh || fault !== null) {
    const aside = fault === null ? null : moveAside(gitdir, fault);
    cache = {};
    await init(gitdir, url);
    if (aside) rememberRecovery(gitdir, aside.note, aside.reports);
  } else await keepRemoteUrl(gitdir, url);
  let retryAfter: number | null = null;

  const resolveOr = async (ref: string, dir = gitdir) => git.resolveRef({ fs, gitdir: dir, ref }).catch(() => null);
  const network = async <T>(what: string, op: () => Promise<T>, at = what === 'push' ? pushUrl : url): Promise<T> => {
    try {
      const result = await op();
      retryAfter = null;
      return result;
    } catch (e) {
      if (e instanceof MeshError && typeof e.data.retryAfterMs === 'number') retryAfter = e.data.retryAfterMs;
      throw networkError(what, at, e, at !== url && at === pushUrl ? 'the report shard' : 'the fleet repo');
    }
  };
  const serverTip = async (ref: string, at: string) => (await network('poll', () => lsRefs(http, at, ref), at)).find((r) => r.ref === ref)?.oid ?? null;
  /** `op` at the read URL that answered last, then at the others in order; the last failure when none answers. */
  const fromReads = async <T>(op: (at: string) => Promise<T>): Promise<T> => {
    let failure: unknown;
    for (const at of [readUrl, ...reads.filter((r) => r !== readUrl)]) {
      try {
        const result = await op(at);
        readUrl = at;
        return result;
      } catch (e) {
        if (!(e instanceof MeshError && e.code === 'E_FLEET_UNREACHABLE') || reads.length === 1) throw e;
        failure = e;
      }
    }
    throw failure;
  };
  /**
   * Fetch `branch` into `dir` (depth: shallow, or incremental when undefined) and point the local
   * branch of that name at it: isomorphic-git offers the server only a local branch of the name it
   * fetches as "have", and without one every fetch would send the whole tree again.
   * Returns the fetched tip, or null when the server has no such branch.
   */
  const fetchInto = async (dir: string, branch: string, depth?: number, from?: string) => {
    const get = (at: string) => network('fetch', () => fetchBranch({ gitdir: dir, http, url: at, branch, cache, ...(depth ? { depth } : {}) }), at);
    const tip = from === undefined ? await fromReads(get) : await get(from);
    if (tip) await git.writeRef({ fs, gitdir: dir, ref: `refs/heads/${branch}`, value: tip, force: true });
    return tip;
  };
  /** The tip of `branch` as last fetched, when its commit is here: a ref whose objects never arrived counts as not fetched. */
  const fetchedTip = async (branch: string) => {
    const tip = await resolveOr(`refs/remotes/origin/${branch}`);
    return tip && (await readable(gitdir, tip, cache)) ? tip : null;
  };
  /** Past the upkeep threshold, with every report sent: main (and `also`) shallow and each report branch's tip and parent, into a fresh git dir. */
  const renew = async (also?: string) => {
    const renewed = await renewIfOutgrown(gitdir, upkeep, async (next, fetched, reports) => {
      await init(next, url);
      for (const b of new Set([...fetched, ...(also ? [also] : [])])) await fetchInto(next, b, 1);
      for (const r of reports) await fetchInto(next, r, 2, pushUrl);
    });
    if (renewed) cache = {};
    return renewed;
  };

  /** isomorphic-git's push: asks for the server's refs first, then sends what they lack. */
  const slowPush = async (ref: string, force: boolean) => {
    const result = await network('push', () =>
      git.push({ fs, http, gitdir, cache, url: pushUrl, corsProxy: '', ref, remoteRef: ref, force }).catch((e: unknown) => {
        if (e instanceof Errors.PushRejectedError) throw new MeshError('E_PUSH_REJECTED', `the server refused the report push to ${ref}: its tip moved while this host pushed; the next pass pushes again`, { next: 'retry', cause: e });
        throw e;
      }),
    );
    const status = result.refs[ref];
    if (!result.ok || (status && !status.ok)) {
      throw new MeshError('E_PUSH_REJECTED', `the server refused the report push to ${ref}: ${status?.error ?? result.error ?? 'unknown reason'}`, { next: 'retry' });
    }
  };

  const repo: FleetRepo = {
    poll: (branch) => fromReads((at) => serverTip(`refs/heads/${branch}`, at)),
    async fetch(branch) {
      const renewed = await renew(branch).catch(() => false); // a failed renewal leaves the old repository: fetch into it
      const first = !renewed && (await fetchedTip(branch)) === null;
      const tip = renewed ? await resolveOr(`refs/remotes/origin/${branch}`) : await fetchInto(gitdir, branch, first ? 1 : undefined);
      if (!tip) throw new MeshError('E_NO_MAIN', `the fleet repo ${readUrl} has no branch ${branch}`, { next: 'wait' });
      return tip;
    },
    fetched: (branch) => fetchedTip(branch),
    local: (ref) => resolveOr(ref),
    tree: (commit) => treeReader(gitdir, commit, () => cache),
    async commit(ref, files, message, onSign, opts = {}) {
      const entries = await Promise.all(
        Object.entries(files)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(async ([path, text]) => ({ mode: '100644', path, type: 'blob' as const, oid: await git.writeBlob({ fs, gitdir, blob: Buffer.from(text) }) })),
      );
      const tree = await git.writeTree({ fs, gitdir, tree: entries });
      const tip = await resolveOr(ref);
      const replaced = opts.heartbeat && tip ? await replacement(gitdir, tip) : null;
      const parent = replaced ? replaced.parents : tip ? [tip] : [];
      const who = { name: 'mesh-host', email: 'mesh-host@localhost' };
      const text = opts.heartbeat ? heartbeatMessage(message) : message;
      const oid = await git.commit({ fs, gitdir, ref, tree, parent, message: text, author: who, committer: who, signingKey: 'node', onSign });
      if (replaced) noteReplaced(gitdir, tip!);
      return oid;
    },
    async adopt(ref) {
      const tip = await serverTip(ref, pushUrl);
      if (!tip) return null;
      return fetchInto(gitdir, ref.replace(/^refs\/heads\//, ''), 2, pushUrl);
    },
    async peek(ref) {
      if (!(await serverTip(ref, pushUrl))) return null;
      return network('fetch', () => fetchBranch({ gitdir, http, url: pushUrl, branch: ref.replace(/^refs\/heads\//, ''), cache, depth: 2, moveNoRef: true }));
    },
    async point(ref, oid) {
      await git.writeRef({ fs, gitdir, ref, value: oid, force: true });
      await git.writeRef({ fs, gitdir, ref: ref.replace(/^refs\/heads\//, 'refs/remotes/origin/'), value: oid, force: true });
    },
    async push(ref, opts = {}) {
      const tip = await resolveOr(ref);
      if (!tip) throw new MeshError('E_NOTHING_TO_PUSH', `there is no local ${ref} to push`);
      const force = opts.force ?? (await isHeartbeat(gitdir, tip));
      const tracking = ref.replace(/^refs\/heads\//, 'refs/remotes/origin/');
      const remote = await resolveOr(tracking);
      if (remote !== tip) {
        // One request, from the server's tip as we last saw it (none: a new branch); if that is
        // stale the server refuses, and the two-request push looks before it leaps.
        const out = await outgoing(gitdir, tip, remote);
        const quick = out && (out.fastForward || force) ? await network('push', () => pushOne(http, pushUrl, gitdir, ref, remote, tip, out.oids)) : null;
        if (quick === 'ok') await git.writeRef({ fs, gitdir, ref: tracking, value: tip, force: true });
        else {
          // The server's tip is not the one we last saw: replace (or build on) it only if it is ours.
          const server = await serverTip(ref, pushUrl);
          if (server !== null && !(await ours(gitdir, server, tip, remote))) throw branchAhead(ref, server);
          await slowPush(ref, force);
        }
      }
      forgetRecovery(gitdir); // the report that said so is delivered
      await pruneReplaced(gitdir, tip);
      await renew().catch(() => false); // upkeep: the report is already delivered
    },
    retryAfterMs: () => retryAfter,
    async deepen(branch, depth) {
      await fromReads((at) => network('fetch', () => fetchBranch({ gitdir, http, url: at, branch, cache, depth, relative: true }), at));
    },
    recovered: () => recoveryNote(gitdir),
    reportTo: (url) => {
      pushUrl = url;
    },
  };
  // The report branches of a cache that was moved aside, from the server (retried at the next open while it cannot be reached).
  const pending = pendingAdoptions(gitdir);
  if (pending.length > 0) {
    const left: string[] = [];
    for (const ref of pending) await repo.adopt(ref).catch(() => left.push(ref));
    setPendingAdoptions(gitdir, left);
  }
  return repo;
}

async function init(gitdir: string, url: string): Promise<void> {
  await git.init({ fs, gitdir, bare: true, defaultBranch: 'main' });
  await git.addRemote({ fs, gitdir, remote: 'origin', url, force: true });
}

/** The cache's remote names the configured URL (nothing reads it to fetch; a person looking at the cache sees the truth). */
async function keepRemoteUrl(gitdir: string, url: string): Promise<void> {
  const written = await git.getConfig({ fs, gitdir, path: 'remote.origin.url' }).catch(() => undefined);
  if (written !== url) await git.setConfig({ fs, gitdir, path: 'remote.origin.url', value: url });
}

/** The server's report branch `ref` is at `tip`, a commit this host's history does not have: it must not be pushed over (report.ts decides what to do). */
function branchAhead(ref: string, tip: string): MeshError {
  return new MeshError('E_REPORT_BRANCH_AHEAD', `the server's ${ref.replace(/^refs\/heads\//, '')} is at ${tip.slice(0, 12)}, a report this machine's git cache does not have`, { next: 'retry', data: { ref, tip } });
}

/**
 * Failures to reach the server become retryable errors that say what was tried; a busy server's
 * error passes as it is. A 404 is retried too (a repository being moved answers so for a moment),
 * but said for what it is: the server answers, and has no repository at that URL.
 */
function networkError(what: string, url: string, e: unknown, where: string): unknown {
  if (e instanceof MeshError) return e;
  const status = e instanceof Errors.HttpError ? (e.data as { statusCode?: number }).statusCode : undefined;
  const http = status === undefined ? '' : ` (HTTP ${status})`;
  const why = status === 404 ? `the server answers, but has no repository at this URL (moved, renamed, or not made yet): this host asks again at each pass; 'mesh-host state' shows the URLs it uses, which its config.json keeps` : messageOf(e);
  return new MeshError('E_FLEET_UNREACHABLE', `cannot ${what} ${where} at ${url}${http}: ${why}`, { next: 'retry', cause: e });
}
