/**
 * The pack cache of `mesh-cli serve` (mesh-cli/server/pack-cache.ts): hosts that fetch the same
 * change of main get one pack, made once, through the real git upload-pack and its
 * uploadpack.packObjectsHook; and the sweep keeps the cache small.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, readdirSync, realpathSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startGitServer } from '../mesh-cli/server/git-http.js';
import { sweepPackCache } from '../mesh-cli/server/pack-cache.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();
/** git, without blocking this process: the server under test runs in it. */
const git = async (cwd: string, ...args: string[]) => (await promisify(execFile)('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' })).stdout.trim();

/** The cache's entries: name → [inode, mtime]. */
function entries(data: string): Map<string, [number, number]> {
  const dir = join(data, '.mesh-pack-cache');
  return new Map(readdirSync(dir).filter((f) => f.endsWith('.pack')).map((f) => {
    const st = statSync(join(dir, f));
    return [f, [st.ino, st.mtimeMs]];
  }));
}

/** Mark every entry as last used in 2000, so that a use shows as a new mtime. */
function age(data: string): void {
  const old = new Date('2000-01-01T00:00:00Z');
  for (const f of entries(data).keys()) utimesSync(join(data, '.mesh-pack-cache', f), old, old);
}

describe('the pack cache', { timeout: 60_000 }, () => {
  it('makes the pack of a fetch once: a second host fetching the same change gets the same pack, from the cache', async () => {
    const root = realpathSync(tmp('mesh-pack-cache-'));
    const data = join(root, 'data');
    mkdirSync(data);
    await git(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
    const server = await startGitServer({ data, port: 0 });
    try {
      const url = `${server.url}fleet.git`;
      const work = join(root, 'work');
      await git(root, 'clone', '--quiet', url, 'work');
      await git(work, 'checkout', '--quiet', '-b', 'main');
      const commit = async (n: number) => {
        writeFileSync(join(work, 'app.ini'), `port = ${8000 + n}\n`);
        await git(work, 'add', 'app.ini');
        await git(work, 'commit', '--quiet', '-m', `change ${n}`);
        await git(work, 'push', '--quiet', 'origin', 'main');
        return await git(work, 'rev-parse', 'HEAD');
      };
      const first = await commit(1);

      await git(root, 'clone', '--quiet', '--depth=1', url, 'host-a');
      const made = entries(data);
      expect(made.size).toBeGreaterThan(0);
      age(data);
      await git(root, 'clone', '--quiet', '--depth=1', url, 'host-b');
      const after = entries(data);
      expect([...after.keys()]).toEqual([...made.keys()]); // nothing new was made
      const used = [...after].filter(([f, [ino, mtime]]) => ino === made.get(f)![0] && mtime > Date.parse('2001-01-01'));
      expect(used).toHaveLength(1); // one entry, the same file, was read again
      for (const host of ['host-a', 'host-b']) expect(await git(join(root, host), 'rev-parse', 'HEAD')).toBe(first);

      // A change of main: the first host's fetch makes one new pack, the second's reads it.
      const second = await commit(2);
      await git(join(root, 'host-a'), 'fetch', '--quiet', '--depth=1', 'origin', 'main');
      const withChange = entries(data);
      const added = [...withChange.keys()].filter((f) => !after.has(f));
      expect(added).toHaveLength(1);
      age(data);
      await git(join(root, 'host-b'), 'fetch', '--quiet', '--depth=1', 'origin', 'main');
      expect([...entries(data).keys()]).toEqual([...withChange.keys()]);
      expect(entries(data).get(added[0]!)![1]).toBeGreaterThan(Date.parse('2001-01-01'));
      for (const host of ['host-a', 'host-b']) {
        expect(await git(join(root, host), 'rev-parse', 'FETCH_HEAD')).toBe(second);
        await git(join(root, host), 'fsck', '--no-dangling', '--no-progress');
      }
    } finally {
      await server.close();
    }
  });

  it('serves many hosts fetching the same change at once, each a whole pack, and leaves no lock behind', async () => {
    const root = realpathSync(tmp('mesh-pack-flight-'));
    const data = join(root, 'data');
    mkdirSync(data);
    await git(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
    const server = await startGitServer({ data, port: 0 });
    try {
      const url = `${server.url}fleet.git`;
      const work = join(root, 'work');
      await git(root, 'clone', '--quiet', url, 'work');
      await git(work, 'checkout', '--quiet', '-b', 'main');
      for (let i = 0; i < 200; i++) writeFileSync(join(work, `file-${i}`), `${i}\n`.repeat(1000 + i));
      await git(work, 'add', '.');
      await git(work, 'commit', '--quiet', '-m', 'many files');
      await git(work, 'push', '--quiet', 'origin', 'main');
      const tip = await git(work, 'rev-parse', 'HEAD');
      const hosts = Array.from({ length: 8 }, (_, i) => `host-${i}`);
      await Promise.all(hosts.map((h) => git(root, 'clone', '--quiet', '--depth=1', url, h)));
      for (const h of hosts) {
        expect(await git(join(root, h), 'rev-parse', 'HEAD')).toBe(tip);
        await git(join(root, h), 'fsck', '--no-progress');
      }
      expect(entries(data).size).toBe(1); // the operator's first clone of an empty repository made none
      expect(readdirSync(join(data, '.mesh-pack-cache')).filter((f) => !f.endsWith('.pack'))).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it('sweeps what was not used for an hour, and the least recently used beyond its size', () => {
    const dir = tmp('mesh-pack-sweep-');
    const now = Date.parse('2026-12-04T12:00:00Z');
    const put = (name: string, bytes: number, minutesAgo: number) => {
      writeFileSync(join(dir, name), Buffer.alloc(bytes));
      const t = new Date(now - minutesAgo * 60_000);
      utimesSync(join(dir, name), t, t);
    };
    const key = (c: string) => c.repeat(64) + '.pack';
    put(key('a'), 100, 90); // not used for 90 minutes
    put(key('b'), 100, 30);
    put(key('c'), 100, 20);
    put(key('d'), 100, 10);
    put('in.Xyz123', 10, 120); // the input of a hook that was killed
    put(`${key('e')}.4242`, 10, 5); // a pack being made now
    sweepPackCache(dir, now, 60 * 60_000, 250);
    expect(readdirSync(dir).sort()).toEqual([key('c'), key('d'), `${key('e')}.4242`].sort());
  });
});
