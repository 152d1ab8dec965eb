/**
 * Fleet scale, as behaviour: the host's poll is one request whose size does not depend on how
 * many report branches the server holds; a heartbeat replaces the heartbeat before it while
 * every real change stays in history; the local repository is renewed (fresh git dir, swapped
 * in) without losing the report branch; a busy server's Retry-After is honoured. The host's
 * own fleet code (agent/fleet/) runs against the built `mesh-cli serve --open` (real git
 * http-backend); docs/scale.md has the numbers, from `npm run bench:fleet`.
 */
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nextWait } from '../agent/commands/run.js';
import { MeshError } from '../core/errors.js';
import { openFleetRepo, type FleetRepo } from '../agent/fleet/git.js';
import { fleetHttp, type FleetHttp } from '../agent/fleet/http.js';
import { objectCounts } from '../agent/fleet/renew.js';
import { generateKeyPair, gitSigner } from '../core/sign/sshsig.js';
import { git, startServer, type Server } from './helpers/fleet.js';

const sign = gitSigner(generateKeyPair().privateKey);
const REF = 'refs/heads/reports/web-1';
let dir: string;
let server: Server;
let bare: string;
let url: string;
let n = 0;

/** Commit one more change to main on the server; returns the new tip. */
async function commitMain(): Promise<string> {
  n += 1;
  const work = join(dir, 'work');
  writeFileSync(join(work, 'nodes/web-1/base.yaml'), `resources: []\n# change ${n}\n`);
  await git(work, 'add', '-A');
  await git(work, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '--quiet', '-m', `change ${n}`);
  await git(work, 'push', '--quiet', 'origin', 'main');
  return git(work, 'rev-parse', 'HEAD');
}

async function host(name: string, upkeep?: { maxPacks: number; maxLoose: number }): Promise<{ repo: FleetRepo; http: FleetHttp; gitdir: string }> {
  const http = fleetHttp();
  const gitdir = join(dir, 'hosts', name);
  return { repo: await openFleetRepo(gitdir, url, http, upkeep ? { upkeep } : {}), http, gitdir };
}

const report = (repo: FleetRepo, i: number, heartbeat = false, ref = REF) =>
  repo.commit(ref, { 'status.json': `{"sequence":${i}}\n` }, `report web-1 #${i}`, sign, { heartbeat });

/** 2,000 report branches, written the way a server holds them after `git pack-refs` (update-ref takes ~4 ms of disk locking per ref here). */
async function withManyReportBranches<T>(work: () => Promise<T>): Promise<T> {
  const tip = await git(bare, 'rev-parse', 'main');
  const refs = Array.from({ length: 2000 }, (_, i) => `refs/heads/reports/node-${String(i).padStart(4, '0')}`);
  writeFileSync(join(bare, 'packed-refs'), `# pack-refs with: peeled fully-peeled sorted \n${refs.map((r) => `${tip} ${r}\n`).join('')}`);
  try {
    expect((await git(bare, 'for-each-ref', 'refs/heads/reports/node-*')).split('\n')).toHaveLength(2000);
    return await work();
  } finally {
    rmSync(join(bare, 'packed-refs'));
  }
}
const serverLog = () => git(bare, 'log', '--format=%s', REF);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mesh-scale-'));
  mkdirSync(join(dir, 'data'));
  bare = join(dir, 'data/fleet.git');
  await git(join(dir, 'data'), 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
  server = await startServer(join(dir, 'data'));
  url = `${server.url}fleet.git`;
  await git(dir, 'init', '--quiet', '--initial-branch=main', 'work');
  mkdirSync(join(dir, 'work/nodes/web-1'), { recursive: true });
  await git(join(dir, 'work'), 'remote', 'add', 'origin', url);
  await commitMain();
});
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the poll budget', () => {
  it('a no-op poll is one request whose size does not grow with the number of report branches', async () => {
    const tip = await git(bare, 'rev-parse', 'main');
    const poll = async () => {
      const { repo, http } = await host(`poll-${n++}`);
      expect(await repo.poll('main')).toBe(tip);
      return http.meter();
    };
    const before = await poll();
    const after = await withManyReportBranches(poll);
    expect(before.requests).toBe(1);
    expect(after).toEqual(before);
    expect(before.sent + before.received).toBeLessThanOrEqual(4096);
  });

  it('a report push is one request whose size does not grow with the number of report branches', async () => {
    const ref = 'refs/heads/reports/push-1';
    const { repo, http } = await host('push');
    const push = async (i: number) => {
      await report(repo, i, false, ref);
      const m0 = http.meter();
      await repo.push(ref);
      const m1 = http.meter();
      expect(await git(bare, 'rev-parse', ref)).toBe(await repo.local(ref));
      return { requests: m1.requests - m0.requests, bytes: m1.sent + m1.received - m0.sent - m0.received };
    };
    expect((await push(1)).requests).toBe(1); // a new branch
    const before = await push(2);
    const after = await withManyReportBranches(() => push(3));
    expect(before.requests).toBe(1);
    expect(after.requests).toBe(1);
    expect(Math.abs(after.bytes - before.bytes)).toBeLessThanOrEqual(16); // the same report but for its number
    expect(before.bytes).toBeLessThanOrEqual(4096);
  });
});

describe('heartbeats', () => {
  it('a heartbeat replaces the heartbeat before it, while every real change is kept', async () => {
    const { repo, gitdir } = await host('heartbeat');
    await report(repo, 1);
    await repo.push(REF);
    const first = await report(repo, 2, true); // the first heartbeat after a real report stacks on it
    await repo.push(REF);
    await report(repo, 3, true); // the next one takes its place
    await repo.push(REF);
    expect(await serverLog()).toBe(['report web-1 #3', 'report web-1 #1'].join('\n'));
    expect(await git(bare, 'log', '-1', '--format=%b', REF)).toBe('Mesh-Heartbeat: yes');
    expect(objectExists(gitdir, first)).toBe(false); // the replaced heartbeat is gone from the host too
    await report(repo, 4); // a real change stacks on the heartbeat
    await report(repo, 5, true);
    await report(repo, 6, true); // replaces #5 before it was ever sent
    await repo.push(REF);
    expect(await serverLog()).toBe(['#6', '#4', '#3', '#1'].map((s) => `report web-1 ${s}`).join('\n'));
  });
});

describe('the local repository is renewed before it grows without bound', () => {
  it('past the threshold a fetch swaps in a fresh git dir, and the report branch keeps working', async () => {
    const { repo, gitdir } = await host('renew', { maxPacks: 2, maxLoose: 100_000 });
    await repo.fetch('main');
    await repo.adopt(REF);
    await report(repo, 7);
    await repo.push(REF);
    await report(repo, 8, true);
    await repo.push(REF);
    for (let i = 0; i < 4; i++) await repo.fetch((await commitMain(), 'main'));
    expect(objectCounts(gitdir).packs).toBeLessThanOrEqual(3); // 6 without renewal; at most the threshold + the fetch that crossed it
    expect(readdirSync(join(dir, 'hosts')).filter((d) => d.startsWith('renew.'))).toEqual([]);
    const tip = await commitMain();
    expect(await repo.fetch('main')).toBe(tip);
    expect(await repo.tree(tip).read('nodes/web-1/base.yaml')).toBe(`resources: []\n# change ${n}\n`);
    // The adopted heartbeat tip is replaced by the next heartbeat, and real reports stack as before.
    await report(repo, 9, true);
    await repo.push(REF);
    await report(repo, 10);
    await repo.push(REF);
    expect((await serverLog()).split('\n').slice(0, 3)).toEqual(['report web-1 #10', 'report web-1 #9', 'report web-1 #7']);
  });

  it('an unsent report postpones the renewal until it is pushed', async () => {
    const { repo, gitdir } = await host('pending', { maxPacks: 2, maxLoose: 100_000 });
    await repo.fetch('main');
    await repo.adopt(REF);
    const unsent = await report(repo, 11);
    await repo.fetch((await commitMain(), 'main'));
    await repo.fetch((await commitMain(), 'main'));
    expect(objectCounts(gitdir).packs).toBe(4);
    expect(await repo.local(REF)).toBe(unsent);
    await repo.push(REF); // delivered: now the renewal may happen
    expect(objectCounts(gitdir).packs).toBe(2); // main, and the report branch's tip and parent
    expect(await repo.local(REF)).toBe(unsent);
    expect(await git(bare, 'rev-parse', REF)).toBe(unsent);
  });

  it('a swap interrupted between its two renames is undone when the repository is opened', async () => {
    const { repo, gitdir } = await host('crash');
    const tip = await repo.fetch('main');
    renameSync(gitdir, `${gitdir}.old`);
    mkdirSync(`${gitdir}.next`);
    const reopened = await openFleetRepo(gitdir, url, fleetHttp());
    expect(await reopened.fetched('main')).toBe(tip);
    expect(readdirSync(join(dir, 'hosts')).filter((d) => d.startsWith('crash.'))).toEqual(['crash.next']); // the next renewal clears it
  });
});

describe('a busy server', () => {
  it('HTTP 429 with Retry-After is a retryable error that says how long to wait, and the loop never comes back sooner', async () => {
    const busy = createServer((_req, res) => res.writeHead(429, { 'Retry-After': '120' }).end('slow down\n'));
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const repo = await openFleetRepo(join(dir, 'hosts/busy'), `http://127.0.0.1:${(busy.address() as AddressInfo).port}/fleet.git`, fleetHttp());
    const error = await repo.poll('main').catch((e: unknown) => e);
    busy.close();
    expect(error).toBeInstanceOf(MeshError);
    expect(error).toMatchObject({ code: 'E_FLEET_BUSY', next: 'retry', data: { status: 429, retryAfterMs: 120_000 } });
    expect(repo.retryAfterMs()).toBe(120_000);
    for (const r of [0, 0.5, 1]) {
      expect(nextWait(60_000, 1, 120_000, () => r)).toBeGreaterThanOrEqual(120_000);
      expect(nextWait(60_000, 0, null, () => r)).toBeGreaterThanOrEqual(48_000);
      expect(nextWait(60_000, 20, null, () => r)).toBeLessThanOrEqual(15 * 60_000 * 1.5);
    }
  });
});

function objectExists(gitdir: string, oid: string): boolean {
  try {
    execFileSync('git', ['--git-dir', gitdir, 'cat-file', '-e', oid], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
