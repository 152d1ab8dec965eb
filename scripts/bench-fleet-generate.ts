/**
 * Reports for 10,000 nodes without 10,000 pushes. Each node's report is built, signed and
 * handed to `repo.commit` by the real report code (agent/report.ts recordReport, node key,
 * SSHSIG); the commit it asks for is then made here, the way isomorphic-git makes it (same
 * object format, SSH-signed through the same onSign callback), and all of them are written as
 * one pack (`git index-pack`) and one `git update-ref --stdin` in a scratch repository. The
 * caller moves them to the server with one `git push`. (isomorphic-git itself takes ~7 ms per
 * commit in loose-object file operations: 10,000 of them would be most of the bench.)
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import type { HostConfig } from '../agent/config.js';
import type { FleetRepo } from '../agent/fleet/git.js';
import { buildReport, recordReport, type ReportBody } from '../agent/report.js';
import { emptyStore, type Store } from '../agent/store/store.js';
import type { NodeKeys } from './bench-fleet-keys.js';

type Obj = { type: 'commit' | 'tree' | 'blob'; data: Buffer };
const CODE = { commit: 1, tree: 2, blob: 3 } as const;
const stores = new Map<string, Store>();
const tips = new Map<string, string>();

/** One more report for every node in `nodes`, on `commit` of main, written into the bare repo `scratch` on reports/<node>. */
export async function generateReports(scratch: string, nodes: NodeKeys[], commit: string, body: Omit<ReportBody, 'commit'>, now: Date): Promise<void> {
  const objects: Obj[] = [];
  const put = (type: Obj['type'], data: Buffer) => (objects.push({ type, data }), oidOf(type, data));
  const updates: string[] = [];
  for (const keys of nodes) {
    let store = stores.get(keys.node);
    if (!store) stores.set(keys.node, (store = { data: emptyStore(), save() {} } as unknown as Store));
    const repo = {
      async commit(ref, files, message, onSign) {
        const entries = Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1));
        const tree = put('tree', Buffer.concat(entries.map(([path, text]) => Buffer.concat([Buffer.from(`100644 ${path}\0`), Buffer.from(put('blob', Buffer.from(text)), 'hex')]))));
        const parent = tips.get(ref);
        const who = `mesh-host <mesh-host@localhost> ${Math.floor(now.getTime() / 1000)} +0000`;
        const headers = `tree ${tree}\n${parent ? `parent ${parent}\n` : ''}author ${who}\ncommitter ${who}\n`;
        const text = message.endsWith('\n') ? message : `${message}\n`;
        const { signature } = await onSign({ payload: `${headers}\n${text}` } as never);
        const oid = put('commit', Buffer.from(`${headers}gpgsig ${signature.trimEnd().split('\n').join('\n ')}\n\n${text}`));
        tips.set(ref, oid);
        updates.push(`update ${ref} ${oid}`);
        return oid;
      },
    } as Pick<FleetRepo, 'commit'> as FleetRepo;
    const config = { node: keys.node, generation: 1, nodeKey: keys.nodeKey, vouch: keys.vouch } as HostConfig;
    await recordReport(repo, store, buildReport(config, store, { ...body, commit } as ReportBody, now), keys.privateKey);
  }
  execFileSync('git', ['index-pack', '--stdin'], { cwd: scratch, input: pack(objects), stdio: ['pipe', 'ignore', 'inherit'] });
  execFileSync('git', ['update-ref', '--stdin'], { cwd: scratch, input: updates.join('\n') + '\n' });
}

function oidOf(type: string, data: Buffer): string {
  return createHash('sha1').update(`${type} ${data.length}\0`).update(data).digest('hex');
}

/** A version 2 packfile of `objects`, undeltified. */
function pack(objects: Obj[]): Buffer {
  const header = Buffer.alloc(12);
  header.write('PACK', 0);
  header.writeUInt32BE(2, 4);
  header.writeUInt32BE(objects.length, 8);
  const parts = [header];
  for (const { type, data } of objects) {
    const head = [(CODE[type] << 4) | (data.length & 0x0f)];
    for (let size = data.length >> 4; size > 0; size >>= 7) {
      head[head.length - 1]! |= 0x80;
      head.push(size & 0x7f);
    }
    parts.push(Buffer.from(head), deflateSync(data));
  }
  const body = Buffer.concat(parts);
  return Buffer.concat([body, createHash('sha1').update(body).digest()]);
}
