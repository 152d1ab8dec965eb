/**
 * `POST /NAME.git/mesh/report-pack`: the report commits named in the body (one id a line), each
 * with its tree and files and nothing else, as one pack. It is what `mesh-cli status` fetches
 * from `mesh-cli serve` in place of a shallow `git fetch` of the same tips (status/report-pack.ts):
 * the pack holds the same objects, and the status side indexes it with `git index-pack` into the
 * same store. What it saves is the shallow negotiation: at 10,000 changed tips, git's upload-pack
 * spent ~0.95 s of server CPU and the fetch ~0.9 s of the operator's, where listing the objects
 * (`git rev-list --objects --no-walk`) and packing them (`git pack-objects`) take ~0.35 s and
 * indexing them ~0.3 s (docs/scale.md, session 14).
 *
 * Operators only (a node reads its own branch and main, never the other nodes' reports); on a
 * server started with --open, whoever may read every branch. A request naming anything but a
 * commit of the repository is refused as a whole, before any byte of the pack is sent.
 */
import type { ServerResponse } from 'node:http';
import { spawnGit } from '../git.js';

/** The path after the repository's name. */
export const REPORT_PACK_PATH = '/mesh/report-pack';
/** The most commits one request may name (status asks for at most 5,000 at a time). */
export const MAX_REPORT_PACK_WANTS = 100_000;
/** The largest body: that many ids of SHA-256, one a line. */
export const MAX_REPORT_PACK_BODY = MAX_REPORT_PACK_WANTS * 65;

const ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** Answer `body` (the ids) for the bare repository `dir` on `res`. */
export async function answerReportPack(dir: string, body: Buffer, res: ServerResponse): Promise<void> {
  const wants = body.toString('latin1').split('\n').filter(Boolean);
  if (wants.length === 0 || wants.length > MAX_REPORT_PACK_WANTS || !wants.every((w) => ID.test(w))) {
    return refuse(res, 400, `name 1 to ${MAX_REPORT_PACK_WANTS} commit ids, one a line`);
  }
  // One pack-objects walks from each want, each marked shallow so that none is walked past: each
  // commit with its tree and files, the objects `git rev-list --objects --no-walk` lists, without
  // a second process or the list in between (--window=0: no delta search; the objects are small,
  // and often loose on a server that takes pushes in-process).
  const pack = spawnGit(dir, ['--git-dir', dir, 'pack-objects', '--revs', '--window=0', '--stdout', '-q']);
  let sent = false;
  const code = new Promise<number | null>((resolve) => {
    pack.on('error', () => resolve(null));
    pack.on('close', resolve);
  });
  pack.stderr.resume();
  pack.stdin.on('error', () => {}); // a pack-objects that died is seen by its exit code
  // A client that goes away (a status stopped mid-fetch) must not leave pack-objects blocked on a full pipe for ever.
  res.on('close', () => { if (!res.writableFinished) pack.kill(); });
  pack.stdin.end(wants.map((w) => `--shallow ${w}\n`).join('') + wants.join('\n') + '\n');
  // Nothing is answered before the pack's first byte: a want that is not a commit of the repository
  // makes pack-objects fail before it writes any, and the request is refused as a whole.
  pack.stdout.once('data', (first: Buffer) => {
    sent = true;
    res.writeHead(200, { 'Content-Type': 'application/x-git-packed-objects', 'Cache-Control': 'no-cache' });
    res.write(first);
    pack.stdout.pipe(res, { end: false });
  });
  const exit = await code;
  if (!sent) return refuse(res, 422, 'an id named is not a commit of this repository');
  // A pack cut short must not look whole: the client's index-pack then fails on the missing checksum.
  if (exit !== 0) res.destroy();
  else res.end();
}

function refuse(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`mesh: ${message}\n`);
}
