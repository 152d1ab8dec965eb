/**
 * The pack cache of `mesh-cli serve` (mesh-cli/server/pack-cache.ts): hosts that fetch the same
 * change of main get one pack, made once, through the real git upload-pack and its
 * uploadpack.packObjectsHook; and the sweep keeps the cache small.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, readdirSync, realpathSync, statSync, utimesSync, writeFileSync } from 'node:fs';
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

/**
 * A served fleet repository and an operator's checkout of it; `run` gets them and the server is
 * closed after it. `push(files)` commits the files on main and pushes them, returning the commit.
 */
async function withFleet(prefix: string, run: (f: { root: string; data: string; url: string; push: (files: Record<string, string>) => Promise<string> }) => Promise<void>): Promise<void> {
  const root = realpathSync(tmp(prefix));
  const data = join(root, 'data');
  mkdirSync(data);
  await git(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
  const server = await startGitServer({ data, port: 0 });
  try {
    const url = `${server.url}fleet.git`;
    const work = join(root, 'work');
    await git(root, 'clone', '--quiet', url, 'work');
    await git(work, 'checkout', '--quiet', '-b', 'main');
    const push = async (files: Record<string, string>) => {
      for (const [name, text] of Object.entries(files)) writeFileSync(join(work, name), text);
      await git(work, 'add', '.');
      await git(work, 'commit', '--quiet', '-m', 'change');
      await git(work, 'push', '--quiet', 'origin', 'main');
      return git(work, 'rev-parse', 'HEAD');
    };
    await run({ root, data, url, push });
  } finally {
    await server.close();
  }
}

describe('the pack cache', { timeout: 60_000 }, () => {
  it('makes the pack of a fetch once: a second host fetching the same change gets the same pack, from the cache', () => withFleet('mesh-pack-cache-', async ({ root, data, url, push }) => {
    const first = await push({ 'app.ini': 'port = 8001\n' });

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
    const second = await push({ 'app.ini': 'port = 8002\n' });
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
  }));

  it('serves many hosts fetching the same change at once, each a whole pack, and leaves no lock behind', () => withFleet('mesh-pack-flight-', async ({ root, data, url, push }) => {
    const tip = await push(Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`file-${i}`, `${i}\n`.repeat(1000 + i)])));
    const hosts = Array.from({ length: 8 }, (_, i) => `host-${i}`);
    await Promise.all(hosts.map((h) => git(root, 'clone', '--quiet', '--depth=1', url, h)));
    for (const h of hosts) {
      expect(await git(join(root, h), 'rev-parse', 'HEAD')).toBe(tip);
      await git(join(root, h), 'fsck', '--no-progress');
    }
    expect(entries(data).size).toBe(1); // the operator's first clone of an empty repository made none
    expect(readdirSync(join(data, '.mesh-pack-cache')).filter((f) => !f.endsWith('.pack'))).toEqual([]);
  }));

  it('keeps nothing with the cache off (serve --no-pack-cache)', async () => {
    const root = realpathSync(tmp('mesh-pack-off-'));
    const data = join(root, 'data');
    mkdirSync(data);
    await git(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
    const server = await startGitServer({ data, port: 0, packCache: false });
    try {
      const url = `${server.url}fleet.git`;
      await git(root, 'clone', '--quiet', url, 'work');
      writeFileSync(join(root, 'work', 'app.ini'), 'port = 8001\n');
      await git(join(root, 'work'), 'add', 'app.ini');
      await git(join(root, 'work'), 'commit', '--quiet', '-m', 'one');
      await git(join(root, 'work'), 'push', '--quiet', 'origin', 'HEAD:main');
      await git(root, 'clone', '--quiet', '--depth=1', url, 'host');
      expect(await git(join(root, 'host'), 'rev-parse', 'HEAD')).toBe(await git(join(root, 'work'), 'rev-parse', 'HEAD'));
      expect(existsSync(join(data, '.mesh-pack-cache'))).toBe(false);
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
    put(`${key('e')}.4242`, 10, 5); // a pack being made now
    mkdirSync(join(dir, `${key('f')}.lock`)); // the lock of a pack whose maker was killed two hours ago
    const t = new Date(now - 120 * 60_000);
    utimesSync(join(dir, `${key('f')}.lock`), t, t);
    sweepPackCache(dir, now, 60 * 60_000, 250);
    expect(readdirSync(dir).sort()).toEqual([key('c'), key('d'), `${key('e')}.4242`].sort());
  });
});
