/**
 * The report push in ONE request. isomorphic-git's push first asks the server for its refs (a
 * protocol-v1 GET that lists every branch: with 10,000 report branches, ~800 KB) and only then
 * posts the pack. A node owns its report branch and knows the tip it last pushed, so it can post
 * "old → new" and the pack straight away: git's smart HTTP is stateless. When the server's tip is
 * not the one we expected the server refuses the update, and the caller falls back to the usual
 * two-request push, which looks before it leaps — but only over a tip that is the host's own
 * history (`ours`): a report branch that moved on without this host is not pushed over.
 */
import * as fs from 'node:fs';
import git, { type HttpClient } from 'isomorphic-git';
import { pktLine, pktTextLines } from '../../core/git/pkt-line.js';
import { wasReplaced } from './renew.js';

/** What to send: every object of the commits from `tip` back to the first one the server has. */
export interface Outgoing {
  oids: string[];
  /** Whether `tip` descends from the server's tip (false: the push replaces it, e.g. a heartbeat). */
  fastForward: boolean;
}

const MAX_COMMITS = 64;
/** How far back `ours` looks: past any history a host keeps between two renewals of its git cache (renew.ts). */
const MAX_HISTORY = 4096;

/** The objects the server lacks for `tip`, given its tip `remote` (null: the branch is new); null when they cannot be found locally. */
export async function outgoing(gitdir: string, tip: string, remote: string | null): Promise<Outgoing | null> {
  const known = new Set<string>();
  for (let c: string | undefined = remote ?? undefined, i = 0; c && i < MAX_COMMITS; i++) {
    known.add(c);
    c = (await readCommit(gitdir, c))?.parent[0];
  }
  const oids: string[] = [];
  let fastForward = false;
  for (let c: string | undefined = tip, i = 0; c && !known.has(c); i++) {
    const commit = await readCommit(gitdir, c);
    if (!commit || commit.parent.length > 1 || i >= MAX_COMMITS) return null;
    oids.push(c, ...(await treeObjects(gitdir, commit.tree)));
    c = commit.parent[0];
    if (c === remote) fastForward = true;
    if (c === undefined && remote !== null) return null; // unrelated to the server's history: let the usual push decide
  }
  if (tip === remote || remote === null) fastForward = true;
  return { oids, fastForward };
}

/** Post the update `remote → tip` of `ref` (remote null: create it) with the pack of `oids`; the server's verdict ('ok', or its reason). */
export async function pushOne(http: HttpClient, url: string, gitdir: string, ref: string, remote: string | null, tip: string, oids: string[]): Promise<string> {
  const { packfile } = await git.packObjects({ fs, gitdir, oids });
  const old = remote ?? '0'.repeat(40);
  const body = Buffer.concat([Buffer.from(pktLine(`${old} ${tip} ${ref}\0report-status agent=mesh-host\n`) + '0000'), Buffer.from(packfile!)]);
  const res = await http.request({
    url: `${url.replace(/\/+$/, '')}/git-receive-pack`,
    method: 'POST',
    headers: { 'content-type': 'application/x-git-receive-pack-request', accept: 'application/x-git-receive-pack-result' },
    body: [body] as unknown as AsyncIterableIterator<Uint8Array>, // an array is sent with a Content-Length
  });
  const chunks: Buffer[] = [];
  for await (const chunk of res.body ?? []) chunks.push(Buffer.from(chunk));
  if (res.statusCode !== 200) return `HTTP ${res.statusCode}`;
  const lines = pktTextLines(Buffer.concat(chunks)) ?? [];
  if (lines[0] !== 'unpack ok') return lines[0] ?? 'no answer';
  const verdict = lines.find((l) => l === `ok ${ref}` || l.startsWith(`ng ${ref} `));
  return verdict === `ok ${ref}` ? 'ok' : (verdict ?? 'no verdict for the ref');
}

/**
 * Whether the server's tip `server` of a report branch is this host's own history, which a push of
 * `tip` may build on or (a heartbeat) replace: the tip last seen there (`remote`), a commit below
 * `tip`, or a heartbeat this host replaced. Anything else was pushed by someone else, or by this
 * machine before its state folder was restored from an older copy.
 */
export async function ours(gitdir: string, server: string, tip: string, remote: string | null): Promise<boolean> {
  if (server === remote || wasReplaced(gitdir, server)) return true;
  for (let c: string | undefined = tip, i = 0; c && i < MAX_HISTORY; i++) {
    if (c === server) return true;
    c = (await readCommit(gitdir, c))?.parent[0];
  }
  return false;
}

async function readCommit(gitdir: string, oid: string): Promise<{ tree: string; parent: string[] } | null> {
  return git.readCommit({ fs, gitdir, oid }).then((c) => c.commit, () => null);
}

async function treeObjects(gitdir: string, oid: string): Promise<string[]> {
  const { tree } = await git.readTree({ fs, gitdir, oid });
  const nested = await Promise.all(tree.map((e) => (e.type === 'tree' ? treeObjects(gitdir, e.oid) : [e.oid])));
  return [oid, ...nested.flat()];
}
