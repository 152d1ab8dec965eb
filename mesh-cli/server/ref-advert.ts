/**
 * A node's ref advertisement answered in-process. Before each fetch a host asks which refs it
 * may see (`GET info/refs?service=git-upload-pack`, protocol v0/v1, as isomorphic-git asks):
 * through git that is `git http-backend` starting `upload-pack --http-backend-info-refs`, which
 * reads every ref of the repository to hide all but a few (17–61 ms of server CPU at 10,000
 * report branches, docs/scale.md). With the other nodes' report branches hidden (mesh-auth.ts
 * nodeRefs), a node sees HEAD, main and its own branch; when the repository holds nothing else a
 * node could see, that answer is built here from the ref files (main-stamp.ts).
 *
 * What git says besides the refs (its capabilities, the answer's headers) is learned from git
 * itself: a repository's first node advertisement goes to git, and what it said is kept only
 * when the same bytes are rebuilt from the refs it listed. It is learned again when the
 * repository's config changes (a change to the system's or the user's git config is seen at
 * serve's next start). Anything else goes to git as before: another ref a node could
 * see (a tag, another branch, a ref under its own branch's name), refs that are not plain files
 * or a packed-refs file rewritten in the last seconds, main not born yet, protocol v2.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pktLine, pktLines } from '../../core/git/pkt-line.js';
import { REPORT_REFS, reportRef } from '../../core/report/branch.js';
import type { CachedAnswer } from './fetch-cache.js';
import { mainTipFromFiles, packedRefNames, refFromFiles, stat } from './main-stamp.js';

const SERVICE = pktLine('# service=git-upload-pack\n') + '0000';

export interface NodeAdverts {
  /** `node`'s advertisement in the bare repository `dir`, or null when git must answer. */
  answer(dir: string, node: string): CachedAnswer | null;
  /** When git must answer and has not taught `dir` yet: what to hand git's answer to, to learn from it. */
  learn(dir: string, node: string): ((answer: CachedAnswer | null) => void) | undefined;
}

/** What git said in a repository besides the refs: its capabilities (naming HEAD's branch) and the answer's headers. */
interface Learned {
  config: string;
  head: string;
  caps: string;
  headers: Array<[string, string]>;
}

/** The refs a node sees: main (HEAD's branch) and its own report branch. */
interface NodeRefs {
  head: string;
  main: string;
  own: string | null;
}

export function nodeAdverts(now = () => Date.now()): NodeAdverts {
  const learned = new Map<string, Learned>();
  return {
    answer(dir, node) {
      const known = learned.get(dir);
      if (!known || known.config !== configStamp(dir)) return null;
      const refs = visibleRefs(dir, node, now());
      if (!refs || refs.head !== known.head) return null;
      return { status: 200, headers: known.headers, body: advert(known.caps, refs, node) };
    },
    learn(dir, node) {
      const config = configStamp(dir);
      if (learned.get(dir)?.config === config) return undefined;
      return (answer) => {
        const read = answer?.status === 200 ? readAdvert(answer.body, node) : null;
        if (read && advert(read.caps, read.refs, node).equals(answer!.body)) {
          learned.set(dir, { config, head: read.refs.head, caps: read.caps, headers: answer!.headers });
        }
      };
    },
  };
}

/** The advertisement git gives a node that sees `refs`: HEAD with the capabilities, then the refs by name. */
function advert(caps: string, refs: NodeRefs, node: string): Buffer {
  const own = refs.own === null ? '' : pktLine(`${refs.own} ${reportRef(node)}\n`);
  return Buffer.from(`${SERVICE}${pktLine(`${refs.main} HEAD\0${caps}\n`)}${pktLine(`${refs.main} ${refs.head}\n`)}${own}0000`);
}

/** git's advertisement to `node` read back into capabilities and refs, when it lists HEAD, its branch and at most the node's own branch. */
function readAdvert(body: Buffer, node: string): { caps: string; refs: NodeRefs } | null {
  if (!body.subarray(0, SERVICE.length).equals(Buffer.from(SERVICE))) return null;
  const lines: string[] = [];
  try {
    for (const p of pktLines(body.subarray(SERVICE.length))) {
      if (typeof p === 'number') break;
      lines.push(p.toString('latin1'));
    }
  } catch {
    return null;
  }
  const first = /^([0-9a-f]{40}|[0-9a-f]{64}) HEAD\0([^\n]*)\n$/.exec(lines[0] ?? '');
  const head = /^([0-9a-f]{40}|[0-9a-f]{64}) (refs\/heads\/\S+)\n$/.exec(lines[1] ?? '');
  if (!first || !head || head[1] !== first[1] || !first[2]!.includes(`symref=HEAD:${head[2]}`)) return null;
  const own = lines.length === 3 ? new RegExp(`^([0-9a-f]{40}|[0-9a-f]{64}) ${reportRef(node)}\\n$`).exec(lines[2]!) : null;
  if (lines.length > 3 || (lines.length === 3 && !own)) return null;
  return { caps: first[2]!, refs: { head: head[2]!, main: head[1]!, own: own?.[1] ?? null } };
}

/** What `node` sees in `dir` as the ref files say, or null when it may see more (or git must be asked). */
function visibleRefs(dir: string, node: string, now: number): NodeRefs | null {
  const main = mainTipFromFiles(dir, now);
  if (!main?.oid) return null;
  const own = refFromFiles(dir, reportRef(node), now);
  if (own === undefined) return null;
  const packed = packedRefNames(dir, now);
  if (packed === undefined) return null;
  const nested = `${reportRef(node)}/`;
  for (const name of packed) if (name !== main.ref && (!name.startsWith(REPORT_REFS) || name.startsWith(nested))) return null;
  return looseRefsOnly(dir, main.ref, node) ? { head: main.ref, main: main.oid, own } : null;
}

/** Whether the loose refs hold nothing but main and report branches, the node's own one a file (not a folder of refs). */
function looseRefsOnly(dir: string, mainRef: string, node: string): boolean {
  const walk = (rel: string): boolean => {
    for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const path = `${rel}/${e.name}`;
      if (path === REPORT_REFS.slice(0, -1)) {
        if (isFolder(join(dir, reportRef(node)))) return false;
      } else if (e.isDirectory()) {
        if (!walk(path)) return false;
      } else if (path !== mainRef) {
        return false;
      }
    }
    return true;
  };
  try {
    return walk('refs');
  } catch {
    return false;
  }
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The repository's config file as a stamp (its capabilities follow from it), '' when it cannot be read. */
function configStamp(dir: string): string {
  try {
    return stat(join(dir, 'config'))?.stamp ?? '';
  } catch {
    return '';
  }
}
