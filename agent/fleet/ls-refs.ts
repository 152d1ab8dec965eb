/**
 * The poll: which commit a ref points to on the server, in ONE request. isomorphic-git's
 * listServerRefs makes two (a capability GET, then the ls-refs POST); git's protocol v2 is
 * stateless over HTTP, so the POST alone is enough. With a ref prefix the answer names only
 * the refs asked for, so its size does not grow with the number of report branches.
 * A server that does not answer protocol v2 gets isomorphic-git's two-request poll instead.
 */
import git, { Errors, type HttpClient } from 'isomorphic-git';

export interface ServerRef {
  ref: string;
  oid: string;
}

/** The refs under `prefix` on the server at `url` (a smart HTTP repository URL). */
export async function lsRefs(http: HttpClient, url: string, prefix: string): Promise<ServerRef[]> {
  const body = Buffer.concat([pkt('command=ls-refs\n'), pkt('agent=mesh-host\n'), Buffer.from('0001'), pkt(`ref-prefix ${prefix}\n`), Buffer.from('0000')]);
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

function pkt(line: string): Buffer {
  const data = Buffer.from(line, 'utf8');
  return Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0')), data]);
}

async function collect(body: AsyncIterableIterator<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** "<oid> <ref>[ attributes]\n" pkt-lines up to a flush; null when the bytes are anything else. */
export function parseLsRefs(buf: Buffer): ServerRef[] | null {
  const refs: ServerRef[] = [];
  let at = 0;
  while (at + 4 <= buf.length) {
    const len = Number.parseInt(buf.subarray(at, at + 4).toString('latin1'), 16);
    if (Number.isNaN(len)) return null;
    if (len === 0) return at + 4 === buf.length ? refs : null;
    if (len < 4 || at + len > buf.length) return null;
    const line = buf.subarray(at + 4, at + len).toString('utf8').replace(/\n$/, '');
    at += len;
    const m = /^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)/.exec(line);
    if (!m) return null;
    refs.push({ oid: m[1]!, ref: m[2]! });
  }
  return null;
}
