import { build } from 'esbuild';
import * as fs from 'node:fs';
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import git from 'isomorphic-git';
import http from 'isomorphic-git/http/node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseCgiHead } from '../mesh-cli/server/cgi.js';
import { startGitServer } from '../mesh-cli/server/git-http.js';
import { mainStamp, SETTLE_MS } from '../mesh-cli/server/main-stamp.js';
import { passwordHash } from '../mesh-cli/server/operators.js';
import {
  childrenOf, git as gitBin, gitProcessesServing, gitSpy, halfPost, isAlive, makeData, rawGet, startServe, waitFor, type Serve,
} from './serve.helpers.js';

let tmp: string;
let bundle: string;
const running: Serve[] = [];

beforeAll(async () => {
  tmp = realpathSync(mkdtempSync(join(tmpdir(), 'mesh-serve-')));
  bundle = join(tmp, 'serve.mjs');
  await build({
    entryPoints: ['mesh-cli/serve-main.ts'], outfile: bundle, bundle: true, platform: 'node', format: 'esm', logLevel: 'error',
    banner: { js: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);" },
  });
});

afterEach(() => {
  for (const s of running.splice(0)) if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
});

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A fresh folder with DATA/fleet.git, and a serve process on a free port. */
async function fleet(): Promise<{ root: string; data: string; serve: Serve }> {
  const root = mkdtempSync(join(tmp, 'case-'));
  const data = await makeData(root);
  const serve = await startServe(bundle, ['--data', data, '--port', '0', '--open']); // authentication: trust.test.ts
  running.push(serve);
  return { root, data, serve };
}

/** Clone, commit one file on main and push it; returns the pushed commit. */
async function pushMain(root: string, url: string): Promise<string> {
  await gitBin(root, root, 'clone', '--quiet', url, 'work');
  const work = join(root, 'work');
  await gitBin(root, work, 'checkout', '--quiet', '-b', 'main');
  writeFileSync(join(work, 'mesh.yaml'), 'name: test\n');
  await gitBin(root, work, 'add', 'mesh.yaml');
  await gitBin(root, work, 'commit', '--quiet', '-m', 'first');
  await gitBin(root, work, 'push', '--quiet', 'origin', 'main');
  return (await gitBin(root, work, 'rev-parse', 'HEAD')).trim();
}

describe('mesh-cli serve', { timeout: 30_000 }, () => {
  it('prints "listening on http://127.0.0.1:PORT/" as its first line with --port 0', async () => {
    const { serve } = await fleet();
    expect(serve.firstLine).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(serve.port).toBeGreaterThan(0);
  });

  it('lets the git binary clone, commit and push main, and a second clone sees the push', async () => {
    const { root, serve } = await fleet();
    const tip = await pushMain(root, `${serve.url}fleet.git`);
    await gitBin(root, root, 'clone', '--quiet', `${serve.url}fleet.git`, 'second');
    expect((await gitBin(root, join(root, 'second'), 'rev-parse', 'HEAD')).trim()).toBe(tip);
    expect(serve.stderr()).toMatch(/"method":"POST","path":"\/fleet.git\/git-receive-pack","status":200/);
  });

  it('answers isomorphic-git: listServerRefs v2 with a prefix, and a push of a report branch', async () => {
    const { root, serve } = await fleet();
    const url = `${serve.url}fleet.git`;
    const tip = await pushMain(root, url);
    const refs = await git.listServerRefs({ http, url, protocolVersion: 2, prefix: 'refs/heads/main', headers: {} });
    expect(refs).toEqual([{ ref: 'refs/heads/main', oid: tip }]);

    const dir = join(root, 'host');
    await git.init({ fs, dir, defaultBranch: 'main' });
    writeFileSync(join(dir, 'status.json'), '{"outcome":"applied"}\n');
    await git.add({ fs, dir, filepath: 'status.json' });
    const report = await git.commit({ fs, dir, message: 'report', author: { name: 'web-1', email: 'web-1@mesh' } });
    const pushed = await git.push({ fs, http, dir, url, ref: 'main', remoteRef: 'refs/heads/reports/web-1', headers: {} });
    expect(pushed.ok).toBe(true);
    expect(await gitBin(root, root, 'ls-remote', url, 'refs/heads/reports/web-1')).toBe(`${report}\trefs/heads/reports/web-1\n`);
  });

  it('answers 404 for an unknown repository and refuses ".." without reaching outside DATA', async () => {
    const { root, serve } = await fleet();
    await gitBin(root, root, 'init', '--quiet', '--bare', 'outside.git'); // a sibling of DATA
    const unknown = await rawGet(serve.port, '/nope.git/info/refs?service=git-upload-pack');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toContain('repository not found: /nope.git');
    for (const path of ['/../outside.git/info/refs?service=git-upload-pack', '/fleet.git/../../outside.git/info/refs?service=git-upload-pack',
      '/%2e%2e/outside.git/info/refs?service=git-upload-pack', '/packages/../data/fleet.git/HEAD']) {
      const res = await rawGet(serve.port, path);
      expect([400, 404], path).toContain(res.status);
    }
    expect(serve.stderr()).not.toContain('git http-backend failed');
  });

  it('closes, stops the git processes of requests in flight and exits 0 on SIGTERM', async () => {
    const { data, serve } = await fleet();
    const client = halfPost(serve.port, '/fleet.git/git-receive-pack', Buffer.from('0032'));
    expect(await waitFor(() => childrenOf(serve.proc.pid!).length >= 1, 10_000)).toBe(true);
    serve.proc.kill('SIGTERM');
    expect(await serve.exited, serve.stderr()).toEqual({ code: 0, signal: null });
    expect(gitProcessesServing(data)).toEqual([]);
    expect(serve.stderr()).toContain('"signal":"SIGTERM","msg":"shutting down"');
    client.destroy();
  });

  it('leaves no git process behind when SIGKILLed while idle', async () => {
    const { root, data, serve } = await fleet();
    await pushMain(root, `${serve.url}fleet.git`);
    const before = childrenOf(serve.proc.pid!);
    serve.proc.kill('SIGKILL');
    await serve.exited;
    expect(await waitFor(() => gitProcessesServing(data).length === 0 && !before.some(isAlive), 2500)).toBe(true);
  });

  it('leaves no git process behind when SIGKILLed with half-sent pushes and fetches in flight', async () => {
    const { data, serve } = await fleet();
    const pkt = Buffer.from('0032want 0000000000000000000000000000000000000000\n');
    // A fetch body small enough for the fetch cache is read whole before git starts (fetch-cache.ts): these say they are larger.
    const clients = ['git-upload-pack', 'git-receive-pack'].flatMap((service) => [
      halfPost(serve.port, `/fleet.git/${service}`, pkt.subarray(0, 20), { 'Content-Length': '100000' }),
      halfPost(serve.port, `/fleet.git/${service}`, gzipSync(pkt).subarray(0, 15), { 'Content-Encoding': 'gzip' }),
    ]);
    expect(await waitFor(() => childrenOf(serve.proc.pid!).length >= 4, 10_000)).toBe(true);
    const inFlight = gitProcessesServing(data);
    expect(inFlight.length).toBeGreaterThanOrEqual(4);
    serve.proc.kill('SIGKILL');
    await serve.exited;
    const gone = await waitFor(() => gitProcessesServing(data).length === 0 && !inFlight.some(isAlive), 2500);
    for (const pid of gitProcessesServing(data)) process.kill(pid, 'SIGKILL'); // don't leak them if the test fails
    clients.forEach((c) => c.destroy());
    expect(gone).toBe(true);
  });

  it('exits 2 with an actionable message when --data does not exist', async () => {
    const missing = join(tmp, 'no-such-dir');
    await expect(startServe(bundle, ['--data', missing, '--port', '0'])).rejects.toThrow(
      `exited with 2 before listening: error: --data ${missing} does not exist: pass --data a folder that holds bare repositories`,
    );
  });
});

/** Commit nodes/web-1/node.yaml naming the sha256 of `password` (none: revoked) in the checkout `work`; returns the commit. */
async function commitIdentity(root: string, work: string, password: string | null): Promise<string> {
  const credential = password === null ? '' : `credential:\n  sha256: ${passwordHash(password)}\n`;
  fs.mkdirSync(join(work, 'nodes/web-1'), { recursive: true });
  writeFileSync(join(work, 'nodes/web-1/node.yaml'), `node: web-1\ngeneration: 1\n${credential}`);
  await gitBin(root, work, 'add', '-A');
  await gitBin(root, work, 'commit', '--quiet', '-m', `web-1: ${password ?? 'revoked'}`);
  return (await gitBin(root, work, 'rev-parse', 'HEAD')).trim();
}

/**
 * DATA/fleet.git whose main lets web-1 in with the password "one", a checkout of it, and an
 * authenticating serve (operator:op-secret); with `spy`, the git commands serve runs are logged.
 * `statuses()` answers [status for "one", status for "two"] of a request as web-1.
 */
async function nodeFleet(spy = false) {
  const root = mkdtempSync(join(tmp, 'auth-'));
  const data = await makeData(root);
  writeFileSync(join(data, 'operators'), `operator:${passwordHash('op-secret')}\n`, { mode: 0o600 });
  const bare = join(data, 'fleet.git');
  const work = join(root, 'work');
  await gitBin(root, root, 'init', '--quiet', '--initial-branch', 'main', work);
  const first = await commitIdentity(root, work, 'one');
  await gitBin(root, work, 'push', '--quiet', bare, 'main');
  const git = spy ? gitSpy(root) : undefined;
  const serve = await startServe(bundle, ['--data', data, '--port', '0'], git?.env);
  running.push(serve);
  const asWeb1 = async (password: string) => {
    const res = await fetch(`${serve.url}fleet.git/info/refs?service=git-upload-pack`, {
      headers: { Authorization: `Basic ${Buffer.from(`web-1:${password}`).toString('base64')}` },
    });
    await res.arrayBuffer();
    return res.status;
  };
  const statuses = async () => [await asWeb1('one'), await asWeb1('two')];
  return { root, bare, work, first, serve, statuses, gitCommands: () => git!.commands() };
}

/** Wait until files changed now are old enough for serve to trust their stamp (main-stamp.ts). */
const settle = () => new Promise((r) => setTimeout(r, SETTLE_MS + 100));

describe('mesh-cli serve: a node authenticates against main as it is now', { timeout: 30_000 }, () => {
  it('refuses a credential at the first request after a revoke is pushed, though main was cached', async () => {
    const f = await nodeFleet();
    await settle();
    expect(await f.statuses()).toEqual([200, 401]);
    expect(await f.statuses()).toEqual([200, 401]);
    const origin = `${f.serve.url.replace('://', '://operator:op-secret@')}fleet.git`;
    await commitIdentity(f.root, f.work, null);
    await gitBin(f.root, f.work, 'push', '--quiet', origin, 'main');
    expect(await f.statuses()).toEqual([401, 401]);
    await commitIdentity(f.root, f.work, 'two');
    await gitBin(f.root, f.work, 'push', '--quiet', origin, 'main');
    expect(await f.statuses()).toEqual([401, 200]);
  });

  it('sees main moved in the bare repository itself, by update-ref and then only in packed-refs', async () => {
    const f = await nodeFleet();
    const second = await commitIdentity(f.root, f.work, 'two');
    await gitBin(f.root, f.work, 'push', '--quiet', f.bare, 'main:next');
    const inBare = (...args: string[]) => gitBin(f.root, f.bare, ...args);
    const loose = join(f.bare, 'refs/heads/main');
    // After each change, wait: the answer must come from a stamp serve trusts, not from a change too recent to trust.
    await settle();
    expect(await f.statuses()).toEqual([200, 401]);
    await inBare('update-ref', 'refs/heads/main', second);
    await settle();
    expect(await f.statuses()).toEqual([401, 200]);
    await inBare('pack-refs', '--all');
    await settle();
    expect(fs.existsSync(loose)).toBe(false);
    expect(await f.statuses()).toEqual([401, 200]);
    // On to a third commit that lets "one" in again, packed again: HEAD and the (absent) loose ref look as before; only packed-refs changed.
    // (Going back to the first commit would be a rollback, which serve refuses: test/server-trust.test.ts.)
    const third = await commitIdentity(f.root, f.work, 'one');
    await gitBin(f.root, f.work, 'push', '--quiet', f.bare, 'main:next');
    await inBare('update-ref', 'refs/heads/main', third);
    await inBare('pack-refs', '--all');
    await settle();
    expect(fs.existsSync(loose)).toBe(false);
    expect(await f.statuses()).toEqual([200, 401]);
  });

  it('trusts a stamp only of settled plain ref files: a fresh change, reftable, a symref branch or a detached HEAD ask git', async () => {
    const root = mkdtempSync(join(tmp, 'stamp-'));
    const bare = join(await makeData(root), 'fleet.git');
    const work = join(root, 'work');
    await gitBin(root, root, 'init', '--quiet', '--initial-branch', 'main', work);
    const commit = await commitIdentity(root, work, 'one');
    await gitBin(root, work, 'push', '--quiet', bare, 'main');
    const inBare = (...args: string[]) => gitBin(root, bare, ...args);
    const asks = (now = Date.now() + 60_000) => (mainStamp(bare, now) === null ? 'git' : 'stamp');
    const seen: Record<string, string> = { fresh: asks(Date.now()), settled: asks() };
    fs.mkdirSync(join(bare, 'reftable'));
    seen.reftable = asks();
    fs.rmdirSync(join(bare, 'reftable'));
    const config = fs.readFileSync(join(bare, 'config'), 'utf8');
    writeFileSync(join(bare, 'config'), `${config}[extensions]\n\trefStorage = reftable\n`);
    seen.refStorage = asks();
    writeFileSync(join(bare, 'config'), config);
    await inBare('symbolic-ref', 'refs/heads/alias', 'refs/heads/main');
    await inBare('symbolic-ref', 'HEAD', 'refs/heads/alias');
    seen.symrefBranch = asks();
    await inBare('update-ref', '--no-deref', 'HEAD', commit);
    seen.detached = asks();
    expect(seen).toEqual({ fresh: 'git', settled: 'stamp', reftable: 'git', refStorage: 'git', symrefBranch: 'git', detached: 'git' });
  });

  it('runs no git rev-parse for requests while main is unchanged', async () => {
    const f = await nodeFleet(true);
    await settle();
    for (let i = 0; i < 5; i++) expect(await f.statuses()).toEqual([200, 401]);
    // One trust check of main at the first request (its root commit, then the objects it reads), then the identity's lookup.
    expect(f.gitCommands()).toEqual(['--exec-path', 'rev-parse', 'rev-list', 'cat-file', 'ls-tree', 'cat-file']);
  });

  it('asks git once when main has just moved, not at every request while the change is too recent to trust its stamp', async () => {
    const f = await nodeFleet(true);
    await settle();
    expect(await f.statuses()).toEqual([200, 401]);
    const second = await commitIdentity(f.root, f.work, 'two');
    await gitBin(f.root, f.work, 'push', '--quiet', f.bare, 'main:next');
    await gitBin(f.root, f.bare, 'update-ref', 'refs/heads/main', second);
    const before = f.gitCommands().length;
    // Ten requests, in the 2 s after main moved (SETTLE_MS) when its stamp is not trusted.
    for (let i = 0; i < 5; i++) expect(await f.statuses()).toEqual([401, 200]);
    // The new tip's rev-parse and its trust check, then the identity; the other requests read main's ref file.
    expect(f.gitCommands().slice(before).filter((c) => c === 'rev-parse')).toEqual(['rev-parse']);
  });
});

describe('startGitServer', { timeout: 30_000 }, () => {
  it('makes git push fail and leaves the ref unchanged when the Authorizer refuses receive-pack with 403', async () => {
    const root = mkdtempSync(join(tmp, 'lib-'));
    const data = await makeData(root);
    const tip = await pushMain(root, join(data, 'fleet.git')); // main exists before the server starts
    const asked: string[] = [];
    const server = await startGitServer({
      data, port: 0,
      authorize: ({ user, service }) => {
        asked.push(service);
        return service === 'receive-pack' ? { ok: false, status: 403, message: 'pushes are closed' } : { ok: true, user: user ?? 'anonymous' };
      },
    });
    try {
      const url = `${server.url}fleet.git`;
      const work = join(root, 'work');
      await gitBin(root, work, 'remote', 'set-url', 'origin', url);
      await gitBin(root, work, 'commit', '--quiet', '--allow-empty', '-m', 'second');
      await expect(gitBin(root, work, 'push', 'origin', 'main')).rejects.toThrow(/403/);
      expect(asked).toEqual(['receive-pack']);
      expect(await gitBin(root, root, 'ls-remote', url, 'refs/heads/main')).toBe(`${tip}\trefs/heads/main\n`);
    } finally {
      await server.close();
    }
  });

  it('asks for credentials with 401, reads basic auth, and hands the Authorizer\'s git config to git', async () => {
    const root = mkdtempSync(join(tmp, 'lib-'));
    const data = await makeData(root);
    const server = await startGitServer({
      data, port: 0,
      authorize: ({ user, password }) => user === 'web-1' && password === 's3cret'
        ? { ok: true, user, gitConfig: [['uploadpack.hideRefs', 'refs/heads/reports/']] }
        : { ok: false, status: 401, message: 'who are you?' },
    });
    try {
      await expect(gitBin(root, root, 'ls-remote', `${server.url}fleet.git`)).rejects.toThrow(/Authentication failed|could not read Username/);
      const url = server.url.replace('http://', 'http://web-1:s3cret@') + 'fleet.git';
      const tip = await pushMain(root, url);
      await gitBin(root, join(root, 'work'), 'push', '--quiet', 'origin', 'main:refs/heads/reports/web-2');
      expect(await gitBin(root, root, 'ls-remote', url)).toBe(`${tip}\tHEAD\n${tip}\trefs/heads/main\n`);
    } finally {
      await server.close();
    }
  });

  it('passes Git-Protocol and a gzip request body through to git (a protocol v2 ls-refs)', async () => {
    const root = mkdtempSync(join(tmp, 'lib-'));
    const data = await makeData(root);
    const tip = await pushMain(root, join(data, 'fleet.git'));
    const server = await startGitServer({ data, port: 0 });
    try {
      const res = await fetch(`${server.url}fleet.git/git-upload-pack`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-git-upload-pack-request', 'Content-Encoding': 'gzip', 'Git-Protocol': 'version=2' },
        body: gzipSync('0014command=ls-refs\n0000'),
      });
      expect([res.status, await res.text()]).toEqual([200, `0032${tip} HEAD\n003d${tip} refs/heads/main\n0000`]);
    } finally {
      await server.close();
    }
  });

  it('stops git when a client hangs up in the middle of its request', async () => {
    const root = mkdtempSync(join(tmp, 'lib-'));
    const data = await makeData(root);
    const server = await startGitServer({ data, port: 0 });
    try {
      const client = halfPost(server.port, '/fleet.git/git-receive-pack', Buffer.from('0032'));
      expect(await waitFor(() => gitProcessesServing(data).length >= 2, 10_000)).toBe(true);
      client.destroy();
      expect(await waitFor(() => gitProcessesServing(data).length === 0, 2500)).toBe(true);
    } finally {
      await server.close();
    }
  });

  it('reads a CGI head: Status becomes the status code, other headers keep their order', () => {
    expect(parseCgiHead('Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-A: 1')).toEqual({
      status: 404, headers: [['Content-Type', 'text/plain'], ['X-A', '1']],
    });
    expect(parseCgiHead('Content-Type: application/x-git-upload-pack-result')).toEqual({
      status: 200, headers: [['Content-Type', 'application/x-git-upload-pack-result']],
    });
    expect(() => parseCgiHead('garbage')).toThrow('malformed CGI header line');
  });

  it('serves package files read-only under /packages/, with no listing and nothing outside the folder', async () => {
    const root = mkdtempSync(join(tmp, 'lib-'));
    const packages = join(root, 'apt');
    fs.mkdirSync(join(packages, 'dists'), { recursive: true });
    writeFileSync(join(packages, 'dists', 'Release'), 'Origin: mesh\n');
    writeFileSync(join(root, 'secret'), 'no\n');
    fs.symlinkSync(join(root, 'secret'), join(packages, 'escape'));
    const server = await startGitServer({ data: await makeData(root), port: 0, packages });
    try {
      const release = await fetch(`${server.url}packages/dists/Release`);
      expect([release.status, await release.text()]).toEqual([200, 'Origin: mesh\n']);
      for (const path of ['/packages/dists/', '/packages/dists', '/packages/escape', '/packages/../secret', '/packages/%2e%2e/secret']) {
        expect([400, 404], path).toContain((await rawGet(server.port, path)).status);
      }
      expect((await fetch(`${server.url}packages/dists/Release`, { method: 'PUT', body: 'x' })).status).toBe(405);
    } finally {
      await server.close();
    }
  });
});
