/**
 * Status over report shards (mesh.yaml `reports.shards`): each node's report branch is read from
 * the shard core/report/shard.ts picks for it, and from nowhere else; main from origin. The shards
 * are listed at once and fetched in parallel, each into the one report store (git-remote.ts), so
 * the stages of report-index.ts see one Remote.
 *
 * The operator's credential for a shard: that of the checkout's remote whose URL is the shard's
 * (`git remote add reports-1 https://operator:SECRET@host/fleet-reports-1.git`); else origin's,
 * when the shard is on origin's server (scheme, host and port); else none in the URL, for git's
 * credential helpers.
 */
import { shardOf } from '../../core/report/shard.js';
import { REPORT_REFS } from '../../core/report/branch.js';
import { MeshError, messageOf } from '../../core/errors.js';
import type { Fleet } from '../fleet.js';
import { git } from '../git.js';
import type { GitObject, Remote, UnreachableShard } from './git-remote.js';

/** A report shard that did not answer a status run, and how many nodes seen before are on it (shown as that run saw them). */
export type UnreachableShards = Array<UnreachableShard & { nodes: number }>;

/** What status says of a shard that did not answer, on stderr and on the page. */
export function outageNote(s: UnreachableShards[number]): string {
  return `the ${s.fleet ? 'fleet server' : 'report shard'} ${s.url} did not answer (${s.error}): ${s.nodes ? `its ${s.nodes} node(s) are shown as the last status run saw them` : 'no report on it was read'}; try again later`;
}

/** One shard as status reaches it: its URL as mesh.yaml names it, and the remote or URL (with the credential) git is given. */
export interface ShardSource {
  url: string;
  remote: string;
}

/** The shards of `fleet` (null: its reports are not sharded), each with what git is given to reach it. */
export async function shardSources(fleet: Fleet): Promise<ShardSource[] | null> {
  const shards = fleet.config.reports?.shards;
  if (!shards) return null;
  const urls = new Map<string, string>();
  const listed = await git(fleet.dir, ['config', '--get-regexp', '^remote\\..*\\.url$']).catch(() => '');
  for (const line of listed.split('\n')) {
    const m = /^remote\.(.+)\.url (.+)$/.exec(line);
    if (m) urls.set(m[1]!, m[2]!);
  }
  const named = new Map([...urls].map(([name, url]) => [plainUrl(url), name]));
  const origin = urls.get('origin');
  return shards.map((url) => ({ url: plainUrl(url), remote: named.get(plainUrl(url)) ?? withCredentialOf(url, origin) }));
}

/** `url` with `origin`'s user and password when both are on the same server; else as it is. */
function withCredentialOf(url: string, origin: string | undefined): string {
  try {
    const shard = new URL(url);
    const from = new URL(origin ?? '');
    if (shard.protocol !== from.protocol || shard.host !== from.host || shard.username || !from.username) return url;
    shard.username = from.username;
    shard.password = from.password;
    return shard.toString();
  } catch {
    return url;
  }
}

/** `url` without a credential and without a trailing slash, to compare two. */
export function plainUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return url.replace(/\/$/, '');
  }
}

/**
 * One Remote over `origin` (main) and `shards` (the report branches; `urls[i]` names shard i): a
 * node's branch counts only on its own shard. A branch found on another shard, or on the fleet
 * repository (`originUrl`) when that is no shard (`reports.shards` changed and `mesh-cli mirror
 * sync` has not moved it yet, or pushed there by hand), is not read, and `note` says so once.
 * With `partial`, a listing goes on without the shards that fail it (unless every shard does):
 * `unreachable()` names them, and their nodes' tips are unknown.
 */
export function shardedRemote(origin: Remote, shards: Remote[], urls: string[], note: (line: string) => void, opts: { originUrl?: string | null; partial?: boolean } = {}): Remote {
  const k = shards.length;
  const originUrl = opts.originUrl ?? null;
  const away = new Map<number, UnreachableShard>();
  /** `wants` (with their nodes) split by shard: each non-empty part with its shard. */
  const split = (wants: string[], nodes: string[] | undefined): Array<[Remote, string[], string[]]> => {
    if (!nodes || nodes.length !== wants.length) throw new MeshError('E_INTERNAL', 'a sharded report fetch was asked for commits without their nodes');
    const parts = new Map<number, [string[], string[]]>();
    wants.forEach((want, i) => {
      const s = shardOf(nodes[i]!, k);
      const part = parts.get(s) ?? parts.set(s, [[], []]).get(s)!;
      part[0].push(want);
      part[1].push(nodes[i]!);
    });
    return [...parts].map(([s, [w, n]]) => [shards[s]!, w, n]);
  };
  return {
    async lsRefs(prefixes) {
      const reports = prefixes.filter((p) => p.startsWith(REPORT_REFS));
      const others = prefixes.filter((p) => !p.startsWith(REPORT_REFS));
      // One node's branch (status --node) is asked of its shard only.
      const one = reports.length === 1 && reports[0]!.length > REPORT_REFS.length ? shardOf(reports[0]!.slice(REPORT_REFS.length), k) : null;
      // The fleet repository's own report branches are listed with main (git lists every branch in one answer) to be named, never read.
      const originToo = originUrl !== null && !urls.includes(originUrl) && one === null ? reports : [];
      const none = () => Promise.resolve(new Map<string, string>());
      const asked = shards.map((s, i) => (reports.length && (one === null || one === i) ? s.lsRefs(reports) : none()));
      const [main, answers] = await Promise.all([others.length || originToo.length ? origin.lsRefs([...others, ...originToo]) : none(), Promise.allSettled(asked)]);
      away.clear();
      const failed = answers.flatMap((a, i) => (a.status === 'rejected' ? [[i, a.reason] as const] : []));
      if (failed.length > 0 && (!opts.partial || failed.length === shards.length)) throw failed[0]![1];
      for (const [i, e] of failed) away.set(i, { url: urls[i]!, error: messageOf(e).split('\n')[0]! });
      const listed = answers.map((a) => (a.status === 'fulfilled' ? a.value : new Map<string, string>()));
      const refs = new Map([...main!].filter(([ref]) => !ref.startsWith(REPORT_REFS)));
      const astray: string[] = [];
      for (const ref of main!.keys()) if (ref.startsWith(REPORT_REFS) && originToo.length) astray.push(`${ref.slice(REPORT_REFS.length)} on ${originUrl}`);
      listed.forEach((got, i) => {
        for (const [ref, oid] of got) {
          if (!ref.startsWith(REPORT_REFS)) continue;
          const node = ref.slice(REPORT_REFS.length);
          if (shardOf(node, k) === i) refs.set(ref, oid);
          else astray.push(`${node} on ${urls[i]}`);
        }
      });
      if (astray.length) {
        note(`note: ${astray.length} report branch(es) away from their node's shard, not read: ${astray.slice(0, 5).join(', ')}${astray.length > 5 ? ', …' : ''}. `
          + "A node's shard follows mesh.yaml's reports.shards: after a change of the list, 'mesh-cli mirror sync' moves each branch to its node's shard");
      }
      return refs;
    },
    async fetchObjects({ wants, haves, deepen, nodes }) {
      const got = await Promise.all(split(wants, nodes).map(([s, w, n]) => s.fetchObjects({ wants: w, nodes: n, ...(haves ? { haves } : {}), ...(deepen === undefined ? {} : { deepen }) })));
      return new Map<string, GitObject>(got.flatMap((m) => [...m]));
    },
    async fetchTips({ wants, deepen, nodes }) {
      await Promise.all(split(wants, nodes).map(([s, w, n]) => s.fetchTips({ wants: w, deepen, nodes: n })));
    },
    // Every shard fetches into the same store: any of them reads it.
    readObjects: (o) => origin.readObjects(o),
    unreachable: () => ({ shards: [...away.values()], of: (node) => away.get(shardOf(node, k)) }),
    async close() {
      await Promise.all([origin, ...shards].map((r) => r.close()));
    },
  };
}
