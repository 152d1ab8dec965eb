/**
 * `mesh-cli serve` runs at most --git-processes git processes at once for nodes' requests, lets
 * --git-queue more wait, and answers the rest 429 with Retry-After (mesh-cli/server/git-slots.ts),
 * through the real `git http-backend`; an operator's request never waits.
 */
import { execFileSync } from 'node:child_process';
import { request, type IncomingMessage } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { startGitServer, type Authorizer } from '../mesh-cli/server/git-http.js';
import { gitSlots } from '../mesh-cli/server/git-slots.js';
import { gitBytes } from '../mesh-cli/git.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: string;
}

const answered = (res: IncomingMessage): Promise<Answer> => new Promise((resolve) => {
  let body = '';
  res.on('data', (b: Buffer) => (body += b.toString('utf8')));
  res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] as string | undefined, body }));
});

/** GET `path` as `user` (basic auth, password "x"). */
function get(url: string, path: string, user = 'node-a'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    request(new URL(path, url), { auth: `${user}:x` }, (res) => resolve(answered(res))).on('error', reject).end();
  });
}

/** A fetch whose body is never finished until `finish()`: its git process holds a slot till then. */
function slowFetch(url: string): { answer: Promise<Answer>; finish: () => void } {
  let finish = () => {};
  const answer = new Promise<Answer>((resolve, reject) => {
    const req = request(new URL('fleet.git/git-upload-pack', url), { method: 'POST', auth: 'node-a:x', headers: { 'Content-Type': 'application/x-git-upload-pack-request' } }, (res) => resolve(answered(res)));
    req.on('error', reject);
    req.write('00'); // half a pkt-line: upload-pack waits for the rest
    finish = () => req.end();
  });
  return { answer, finish };
}

const until = async (ok: () => boolean) => {
  for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 25));
};

/** Everyone may read; "operator" is an operator, anyone else a node. */
const roles: Authorizer = ({ user }) => ({ ok: true, user: user ?? 'anonymous', role: user === 'operator' ? 'operator' : 'node' });

describe('git processes for nodes, at most so many at once', () => {
  it('queues a request beyond the limit, refuses one beyond the queue with 429 and Retry-After, and serves the queued one when a slot frees', async () => {
    const data = tmp('mesh-git-slots-');
    mkdirSync(data, { recursive: true });
    execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', join(data, 'fleet.git')]);
    const logged: string[] = [];
    const server = await startGitServer({ data, port: 0, authorize: roles, gitProcesses: 1, gitQueue: 1, log: (msg) => logged.push(msg) });
    try {
      const slow = slowFetch(server.url);
      await until(() => server.gitLoad().running === 1); // its git process is running
      let queuedDone = false;
      const queued = get(server.url, 'fleet.git/info/refs?service=git-upload-pack').then((a) => ((queuedDone = true), a));
      await until(() => server.gitLoad().waiting === 1);
      expect(server.gitLoad()).toEqual({ running: 1, waiting: 1 });
      const refused = await get(server.url, 'fleet.git/info/refs?service=git-upload-pack');
      expect(refused.status).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(refused.body).toMatch(/try again later/);
      expect(logged).toContain('busy');
      // git, as mesh-cli runs it, is refused the same: a passing fault (exit 3, try again), not a person's to fix
      const viaGit = await gitBytes(data, ['-c', 'credential.helper=', 'ls-remote', server.url.replace('://', '://node-b:x@') + 'fleet.git']).catch((e: unknown) => e);
      expect(viaGit).toMatchObject({ code: 'E_GIT', next: 'retry' });
      // an operator's request does not wait for a slot
      expect((await get(server.url, 'fleet.git/info/refs?service=git-upload-pack', 'operator')).status).toBe(200);
      expect(queuedDone).toBe(false);
      slow.finish();
      await slow.answer;
      const served = await queued;
      expect(served.status).toBe(200);
      expect(served.body).toContain('# service=git-upload-pack');
      await until(() => server.gitLoad().running === 0);
      expect(server.gitLoad()).toEqual({ running: 0, waiting: 0 });
    } finally {
      await server.close();
    }
  }, 30_000);

  it('drops a waiting request whose client hung up at once: its place in the queue goes to the next, and no git runs for it', async () => {
    const data = tmp('mesh-git-slots-');
    mkdirSync(data, { recursive: true });
    execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', join(data, 'fleet.git')]);
    const logged: string[] = [];
    const server = await startGitServer({ data, port: 0, authorize: roles, gitProcesses: 1, gitQueue: 1, log: (msg, fields) => logged.push(`${msg} ${JSON.stringify(fields ?? {})}`) });
    try {
      const slow = slowFetch(server.url);
      await until(() => server.gitLoad().running === 1);
      const impatient = request(new URL('fleet.git/info/refs?service=git-upload-pack', server.url), { auth: 'node-b:x' }).on('error', () => {});
      impatient.end();
      await until(() => server.gitLoad().waiting === 1);
      expect(server.gitLoad()).toEqual({ running: 1, waiting: 1 });
      impatient.destroy();
      await until(() => server.gitLoad().waiting === 0);
      expect(server.gitLoad()).toEqual({ running: 1, waiting: 0 });
      const next = get(server.url, 'fleet.git/info/refs?service=git-upload-pack', 'node-c'); // waits, where it was refused before
      await until(() => server.gitLoad().waiting === 1);
      slow.finish();
      await slow.answer;
      expect((await next).status).toBe(200);
      expect(logged.filter((line) => line.startsWith('busy'))).toEqual([]);
      expect(logged.filter((line) => line.includes('node-b') && line.includes('info/refs') && !line.includes('aborted'))).toEqual([]);
    } finally {
      await server.close();
    }
  }, 30_000);

  it('gives slots in the order asked, and a slot given back twice frees one', async () => {
    const slots = gitSlots({ processes: 2, queue: 2 });
    const a = (await slots.enter())!;
    const b = (await slots.enter())!;
    const order: string[] = [];
    const c = slots.enter().then((r) => (order.push('c'), r!));
    const d = slots.enter().then((r) => (order.push('d'), r!));
    expect(await slots.enter()).toBeNull();
    expect(slots.load).toEqual({ running: 2, waiting: 2 });
    a();
    a();
    (await c)();
    b();
    (await d)();
    expect(order).toEqual(['c', 'd']);
    expect(slots.load).toEqual({ running: 0, waiting: 0 });
    expect(slots.retryAfter()).toBeGreaterThanOrEqual(1);
  });

  it("tells a burst's first refused requests to come back when the queue may have drained, not a flat guess of a second a run", async () => {
    const slots = gitSlots({ processes: 1, queue: 40 });
    const first = (await slots.enter())!;
    const queued = Array.from({ length: 40 }, () => slots.enter());
    expect(await slots.enter()).toBeNull();
    // Nothing has finished yet: a short guess for a run (0.25 s) times the 41 runs ahead. It was 1 s a run: 41 s.
    expect(slots.retryAfter()).toBeLessThanOrEqual(11);
    // A run in flight for half a second says runs take at least that long.
    await sleep(500);
    expect(slots.retryAfter()).toBeGreaterThanOrEqual(21);
    first();
    for (const next of queued) (await next)!();
    expect(slots.load).toEqual({ running: 0, waiting: 0 });
  });

  it('lets a waiting request whose client hung up leave the queue at once, so that its place is free for a live one', async () => {
    const slots = gitSlots({ processes: 1, queue: 1 });
    const first = (await slots.enter())!;
    const gone = new AbortController();
    const waiting = slots.enter(gone.signal);
    expect(await slots.enter()).toBeNull(); // the queue is full
    gone.abort();
    const left = (await waiting)!;
    expect(slots.load).toEqual({ running: 1, waiting: 0 });
    left(); // frees nothing: it never had a slot
    expect(slots.load).toEqual({ running: 1, waiting: 0 });
    const live = slots.enter(new AbortController().signal);
    expect(slots.load).toEqual({ running: 1, waiting: 1 });
    first();
    (await live)!();
    expect(slots.load).toEqual({ running: 0, waiting: 0 });
  });
});
