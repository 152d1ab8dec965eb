/**
 * The poll: which commit a ref points to on the server, in ONE request. isomorphic-git's
 * listServerRefs makes two (a capability GET, then the ls-refs POST); git's protocol v2 is
 * stateless over HTTP, so the POST alone is enough. With a ref prefix the answer names only
 * the refs asked for, so its size does not grow with the number of report branches.
 * A server that does not answer protocol v2 gets isomorphic-git's two-request poll instead.
 */
import git, { Errors, type HttpClient } from 'isomorphic-git';
import { pktLine, pktLines } from '../../core/git/pkt-line.js';

export interface ServerRef {
  ref: string;
  oid: string;
}

/** The refs under `prefix` on the server at `url` (a smart HTTP repository URL). */
export async function lsRefs(http: HttpClient, url: string, prefix: string): Promise<ServerRef[]> {
  const body = Buffer.from(pktLine('command=ls-refs\n') + pktLine('agent=mesh-host\n') + '0001' + pktLine(`ref-prefix ${prefix}\n`) + '0000');
  const res = await http.request({
    url: `${url.replace(/\/+$/, '')}/git-upload-pack`,
    method: 'POST',
    headers: {
      'content-type': 'application/x-git-upload-pack-request',
      accept: 'application/x-git-upload-pack-result',
      'git-protocol': 'version=2',
    },
    body: [body] as unknown as AsyncIterableIterator<Uint8Array>, // an array is sent with a Content-Length
  });
  const answer = res.body ? await collect(res.body) : Buffer.alloc(0);
  if (res.statusCode === 401 || res.statusCode === 403) throw new Errors.HttpError(res.statusCode, res.statusMessage, answer.toString('utf8'));
  const refs = res.statusCode === 200 ? parseLsRefs(answer) : null;
  if (refs) return refs;
  // Not a protocol v2 answer: ask the way isomorphic-git does (it falls back to protocol v1 itself).
  return (await git.listServerRefs({ http, url, protocolVersion: 2, prefix })).map(({ ref, oid }) => ({ ref, oid }));
}

async function collect(body: AsyncIterableIterator<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** "<oid> <ref>[ attributes]\n" pkt-lines up to a flush that ends the answer; null when the bytes are anything else. */
export function parseLsRefs(buf: Buffer): ServerRef[] | null {
  const refs: ServerRef[] = [];
  try {
    let flushed = false;
    for (const p of pktLines(buf)) {
      if (flushed || p === 1 || p === 2) return null;
      if (p === 0) {
        flushed = true;
        continue;
      }
      const m = /^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)/.exec((p as Buffer).toString('utf8'));
      if (!m) return null;
      refs.push({ oid: m[1]!, ref: m[2]! });
    }
    return flushed ? refs : null;
  } catch {
    return null;
  }
}
