/**
 * `serve`'s in-process half of the access rules: a push's ref updates are read from the head of
 * its request (push-commands.ts) and decided by core/access/rules.ts before git starts, so a
 * refused push starts no process at all. A node's commits (sizes, an enrolment's token) are read
 * by the pre-receive hook inside git's quarantine (hooks.ts), only for the ref it may push.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { pusherOf, refusedRef } from '../../core/access/rules.js';
import { readPushCommands, refusalResult, type PushCommands } from './push-commands.js';

/** The headers of receive-pack's answer. */
export const RESULT = { 'Content-Type': 'application/x-git-receive-pack-result', 'Cache-Control': 'no-cache, max-age=0, must-revalidate' };

/** What to do with a push: answer it here (a refusal, or a request that is not a push git could read), or hand `body` to git. */
export type PushDecision =
  | { answer: { status: number; headers: Record<string, string>; body: Buffer }; messages: string[]; body?: undefined }
  | { answer?: undefined; body: Readable; push: PushCommands };

/**
 * Decide the ref updates of the receive-pack request `req` by `who` in the bare repository `dir`;
 * its body is read from `source` (the request itself unless the caller read it first).
 */
export async function decidePush(req: IncomingMessage, who: { user: string; role: 'operator' | 'node' }, dir: string, source: Readable = req): Promise<PushDecision> {
  // git's own client does not compress a push; another may: git is then given the body decoded.
  const gzip = req.headers['content-encoding'] === 'gzip';
  if (gzip) delete req.headers['content-encoding'];
  const push = await readPushCommands(gzip ? source.pipe(createGunzip()) : source);
  if (push === null) {
    source.resume();
    const message = 'mesh: the push does not begin with ref updates git could read';
    return { answer: { status: 400, headers: { 'Content-Type': 'text/plain; charset=utf-8' }, body: Buffer.from(message + '\n') }, messages: [message] };
  }
  const pusher = pusherOf(who.user, who.role === 'operator', who.role === 'node' ? 0 : null);
  const main = mainRef(dir);
  const refused = new Map<string, string>();
  for (const u of push.updates) {
    const why = refusedRef(pusher, u, main);
    if (why) refused.set(u.ref, why.replace(/^mesh: /, ''));
  }
  if (refused.size === 0) return { body: push.body, push };
  push.body.resume(); // the pack is not wanted; read it to its end so the client hears the answer
  const body = refusalResult(push.updates, push.capabilities, refused);
  return { answer: { status: 200, headers: RESULT, body }, messages: [...refused.values()].map((m) => `mesh: ${m}`) };
}

/** The ref HEAD names in the bare repository `dir` (the fleet's main branch), read from its file. */
function mainRef(dir: string): string | null {
  try {
    return /^ref: (\S+)/.exec(readFileSync(join(dir, 'HEAD'), 'utf8'))?.[1] ?? null;
  } catch {
    return null;
  }
}
