/**
 * A node's ref advertisement answered by `mesh-cli serve` itself (mesh-cli/server/ref-advert.ts):
 * once git has answered a node in a repository, the next advertisements that can list only HEAD,
 * main and the node's own branch are built from the ref files, byte for byte what git says (a
 * second server over the same repository, with the in-process answers off, is git); anything a
 * node could see besides goes to git; a real git client fetches through it.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { startGitServer, type GitServer } from '../mesh-cli/server/git-http.js';
import { SETTLE_MS } from '../mesh-cli/server/main-stamp.js';
import { nodeRefs } from '../mesh-cli/server/mesh-auth.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();
/** git, without blocking this process: the servers under test run in it. */
const run = async (cwd: string, ...args: string[]) => (await promisify(execFile)('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' })).stdout.trim();

interface Logged { method: string; path: string; cached?: boolean; user: string | null }

describe("a node's ref advertisement", () => {
  it('is built in-process once git has answered, the same bytes as git, and left to git when the node could see more', async () => {
    const root = realpathSync(tmp('mesh-ref-advert-'));
    const data = join(root, 'data');
    mkdirSync(data);
    await run(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
    const bare = join(data, 'fleet.git');
    const work = join(root, 'work');
    await run(root, 'init', '--quiet', '--initial-branch=main', work);
    await run(work, 'commit', '--quiet', '--allow-empty', '-m', 'first');
    await run(work, 'push', '--quiet', bare, 'main');
    const main = await run(work, 'rev-parse', 'HEAD');

    // Every user is a node here, with serve's per-node configuration.
    const authorize = async ({ user }: { user: string | null }) => ({ ok: true as const, user: user ?? '', role: 'node' as const, gitConfig: nodeRefs(user ?? '') });
    const logged: Logged[] = [];
    const servers: GitServer[] = [];
    try {
      const served = await startGitServer({ data, port: 0, authorize, log: (msg, fields) => { if (msg === 'request') logged.push(fields as Logged); } });
      servers.push(served);
      const plainGit = await startGitServer({ data, port: 0, authorize, packCache: false });
      servers.push(plainGit);
      const advert = async (server: GitServer, node: string) => {
        const r = await fetch(`${server.url}fleet.git/info/refs?service=git-upload-pack`, { headers: { authorization: `Basic ${Buffer.from(`${node}:x`).toString('base64')}` } });
        return { status: r.status, type: r.headers.get('content-type'), cache: r.headers.get('cache-control'), body: Buffer.from(await r.arrayBuffer()) };
      };
      const lastCached = () => logged.filter((l) => l.path.endsWith('/info/refs')).at(-1)?.cached ?? false;
      /** The node's advertisement from the server under test, checked against git's; whether it was built in-process. */
      const sameAsGit = async (node: string) => {
        const [ours, git] = [await advert(served, node), await advert(plainGit, node)];
        expect(ours.status).toBe(200);
        expect({ ...ours, body: ours.body.toString('latin1') }).toEqual({ ...git, body: git.body.toString('latin1') });
        return { built: lastCached(), body: ours.body.toString('latin1') };
      };

      // The first advertisement in the repository is git's; the next ones are built.
      expect(await sameAsGit('web-1')).toMatchObject({ built: false });
      const built = await sameAsGit('web-1');
      expect(built.built).toBe(true);
      expect(built.body).toContain(`${main} HEAD\0`);
      expect(built.body).toContain(`${main} refs/heads/main\n`);

      // With report branches: the node's own is listed, another node's is not.
      await run(bare, 'update-ref', 'refs/heads/reports/web-1', main);
      await run(bare, 'update-ref', 'refs/heads/reports/web-2', main);
      const own = await sameAsGit('web-1');
      expect(own).toMatchObject({ built: true });
      expect(own.body).toContain(`${main} refs/heads/reports/web-1\n`);
      expect(own.body).not.toContain('web-2');
      expect(await sameAsGit('web-3')).toMatchObject({ built: true }); // a node that has not reported yet

      // Packed refs: read from packed-refs once it has settled (a packed-refs written just now goes to git).
      await run(bare, 'pack-refs', '--all');
      expect(await sameAsGit('web-2')).toMatchObject({ built: false });
      await sleep(SETTLE_MS + 200);
      expect(await sameAsGit('web-2')).toMatchObject({ built: true });

      // Anything else a node could see goes to git: a tag, another branch.
      await run(bare, 'tag', 'v1', main);
      const tagged = await sameAsGit('web-1');
      expect(tagged).toMatchObject({ built: false });
      expect(tagged.body).toContain('refs/tags/v1');
      await run(bare, 'tag', '-d', 'v1');
      await run(bare, 'update-ref', 'refs/heads/feature', main);
      expect(await sameAsGit('web-1')).toMatchObject({ built: false });
      await run(bare, 'update-ref', '-d', 'refs/heads/feature');
      await sleep(SETTLE_MS + 200); // deleting a ref rewrites packed-refs
      expect(await sameAsGit('web-1')).toMatchObject({ built: true });

      // A real git client, speaking protocol v0 as the hosts' client does, fetches through the built advertisement.
      const step = join(root, 'step');
      await run(root, 'init', '--quiet', '--bare', step);
      await run(step, '-c', 'protocol.version=0', 'fetch', '--quiet', served.url.replace('://', '://web-1:x@') + 'fleet.git', 'main:refs/heads/fetched');
      expect(lastCached()).toBe(true);
      expect(await run(step, 'rev-parse', 'refs/heads/fetched')).toBe(main);
    } finally {
      for (const s of servers) await s.close();
    }
  }, 60_000);
});
