/**
 * The fetch cache of `mesh-cli serve` (mesh-cli/server/fetch-cache.ts): hosts that fetch the same
 * step of main with the same request get git's first answer again, without git; anything that
 * wants more than main's tip goes to git as before. The hosts here fetch as mesh-host does
 * (agent/fleet/fetch.ts over isomorphic-git), against the real `git http-backend`.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import git from 'isomorphic-git';
import { describe, expect, it } from 'vitest';
import { fetchBranch } from '../agent/fleet/fetch.js';
import { pktLine } from '../core/git/pkt-line.js';
import { fleetHttp } from '../agent/fleet/http.js';
import { startGitServer } from '../mesh-cli/server/git-http.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();
/** git, without blocking this process: the server under test runs in it. */
const run = async (cwd: string, ...args: string[]) => (await promisify(execFile)('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' })).stdout.trim();

interface Logged { path: string; cached?: boolean; status: number }

/** A served fleet repository with a first commit; hosts fetch main as mesh-host does. */
async function withFleet(opts: { packCache?: boolean }, test: (f: {
  push: (files: Record<string, string>) => Promise<string>;
  host: (name: string) => Promise<{ fetch: (depth?: number) => Promise<string | null>; read: (oid: string, path: string) => Promise<string> }>;
  fetches: (count: number) => Promise<Logged[]>;
  url: string;
  work: string;
}) => Promise<void>): Promise<void> {
  const root = realpathSync(tmp('mesh-fetch-cache-'));
  const data = join(root, 'data');
  mkdirSync(data);
  await run(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
  const logged: Logged[] = [];
  const server = await startGitServer({ data, port: 0, ...opts, log: (msg, fields) => { if (msg === 'request') logged.push(fields as Logged); } });
  try {
    const url = `${server.url}fleet.git`;
    const work = join(root, 'work');
    await run(root, 'clone', '--quiet', url, 'work');
    await run(work, 'checkout', '--quiet', '-b', 'main');
    const push = async (files: Record<string, string>) => {
      for (const [name, text] of Object.entries(files)) writeFileSync(join(work, name), text);
      await run(work, 'add', '.');
      await run(work, 'commit', '--quiet', '-m', 'change');
      await run(work, 'push', '--quiet', 'origin', 'main');
      return run(work, 'rev-parse', 'HEAD');
    };
    const host = async (name: string) => {
      const gitdir = join(root, name);
      await git.init({ fs, gitdir, bare: true, defaultBranch: 'main' });
      await git.addRemote({ fs, gitdir, remote: 'origin', url });
      const http = fleetHttp();
      const cache = {};
      return {
        async fetch(depth?: number) {
          const tip = await fetchBranch({ gitdir, http, url, branch: 'main', cache, ...(depth ? { depth } : {}) });
          if (tip) await git.writeRef({ fs, gitdir, ref: 'refs/heads/main', value: tip, force: true });
          return tip;
        },
        read: async (oid: string, path: string) => Buffer.from((await git.readBlob({ fs, gitdir, oid, filepath: path })).blob).toString('utf8'),
      };
    };
    /** The first `count` fetches the server logged; a request's line is written when its response closes, which may be just after the client has it all. */
    // The operator's clone asked once too (its line may come just after the clone ends): not one of the hosts' fetches.
    for (const until = Date.now() + 5000; !logged.some((l) => l.path.endsWith('/git-upload-pack')) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
    const setup = logged.length;
    const fetches = async (count: number) => {
      const all = () => logged.slice(setup).filter((l) => l.path.endsWith('/git-upload-pack'));
      for (const until = Date.now() + 5000; all().length < count && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
      return all();
    };
    await test({ push, host, fetches, url, work });
  } finally {
    await server.close();
  }
}

describe('the fetch cache', { timeout: 60_000 }, () => {
  it("answers a host's fetch of main that another host made before from memory, and both hosts get the same commit", () => withFleet({}, async ({ push, host, fetches }) => {
    const first = await push({ 'app.ini': 'port = 8001\n' });
    const [a, b] = [await host('host-a'), await host('host-b')];
    expect(await a.fetch(1)).toBe(first);
    expect(await b.fetch(1)).toBe(first);
    expect((await fetches(2)).map((f) => f.cached ?? false)).toEqual([false, true]);

    // main moves: both hosts sit on the same commit and ask for the same step; git answers the first only.
    const second = await push({ 'app.ini': 'port = 8002\n', 'db.conf': 'size = 1\n' });
    expect(await a.fetch()).toBe(second);
    expect(await b.fetch()).toBe(second);
    expect((await fetches(4)).map((f) => f.cached ?? false)).toEqual([false, true, false, true]);
    for (const h of [a, b]) {
      expect(await h.read(second, 'app.ini')).toBe('port = 8002\n');
      expect(await h.read(second, 'db.conf')).toBe('size = 1\n');
    }

    // A host that missed a step asks a different question (other haves): git answers it.
    const third = await push({ 'app.ini': 'port = 8003\n' });
    const c = await host('host-c');
    expect(await c.fetch(1)).toBe(third);
    expect(await a.fetch()).toBe(third);
    expect((await fetches(6)).slice(4).map((f) => f.cached ?? false)).toEqual([false, false]);
    expect(await c.read(third, 'db.conf')).toBe('size = 1\n');
  }));

  it('never answers from memory what wants more than main: a request that also wants an older commit goes to git every time', () => withFleet({}, async ({ push, url, fetches }) => {
    const first = await push({ 'app.ini': 'port = 8001\n' });
    const second = await push({ 'app.ini': 'port = 8002\n' });
    // A protocol v1 request as a host would send it, wanting main's tip and an older commit.
    const body = pktLine(`want ${second} side-band-64k ofs-delta\n`) + pktLine(`want ${first}\n`) + '0000' + pktLine('done\n');
    const ask = async () => {
      const res = await fetch(`${url}/git-upload-pack`, { method: 'POST', headers: { 'content-type': 'application/x-git-upload-pack-request' }, body });
      return Buffer.from(await res.arrayBuffer());
    };
    const answers = [await ask(), await ask()];
    expect(answers[0]!.length).toBeGreaterThan(0);
    expect((await fetches(2)).map((f) => f.cached ?? false)).toEqual([false, false]);
    // The same request wanting main's tip alone is kept, and answered with git's own bytes.
    const onlyMain = pktLine(`want ${second} side-band-64k ofs-delta\n`) + '0000' + pktLine('done\n');
    const again = async () => Buffer.from(await (await fetch(`${url}/git-upload-pack`, { method: 'POST', headers: { 'content-type': 'application/x-git-upload-pack-request' }, body: onlyMain })).arrayBuffer());
    const [fromGit, fromMemory] = [await again(), await again()];
    expect(fromMemory.equals(fromGit)).toBe(true);
    expect((await fetches(4)).slice(2).map((f) => f.cached ?? false)).toEqual([false, true]);
  }));

  it('is off with the pack cache (serve --no-pack-cache): every fetch goes to git', () => withFleet({ packCache: false }, async ({ push, host, fetches }) => {
    const first = await push({ 'app.ini': 'port = 8001\n' });
    for (const name of ['host-a', 'host-b']) expect(await (await host(name)).fetch(1)).toBe(first);
    expect((await fetches(2)).map((f) => f.cached ?? false)).toEqual([false, false]);
  }));
});
