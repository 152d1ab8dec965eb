/**
 * The host's transport, end to end: the URLs it uses come from its config, never from its git
 * cache; a fetch cut off mid-transfer and a corrupt git cache are recovered on the next pass;
 * `mesh-cli serve --tls-cert/--tls-key` serves https, and a host trusts exactly the certificate
 * its token pinned; the operator's credential lives in a git credential store file, not in the
 * remote's URL. Real git http-backend behind the built `mesh-cli serve`, the built mesh-host on
 * simulated machines, and a TCP proxy in the test that cuts a response after 1,500 bytes.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, createFleet, git, hostCmd, newMachine, type TestFleet } from './helpers/fleet.js';

const host = async (root: string, ...args: string[]) => {
  const r = await hostCmd(root, ...args, '--json');
  return { ...r, body: r.stdout.startsWith('{') ? JSON.parse(r.stdout) : null };
};
const motd = (text: string) => ({ 'nodes/web-1/base.yaml': `resources:\n  - type: file\n    path: /etc/motd\n    content: "${text}\\n"\n` });
/** A declaration whose pack is well over 1,500 bytes: a file of random (incompressible) text. */
const bulky = (text: string) => ({
  'nodes/web-1/base.yaml': `resources:\n  - type: file\n    path: /etc/motd\n    content: "${text}\\n"\n  - type: file\n    path: /srv/bulk\n    content: "${randomBytes(6000).toString('base64')}"\n`,
});

/** Issue a token for `node` with the fleet URL `url` (a proxy, another scheme), push it, and enrol a new machine; returns its root. */
async function enrolVia(fleet: TestFleet, node: string, url: string): Promise<string> {
  const tokenFile = join(fleet.dir, `${node}.token`);
  const issued = await cli(fleet.checkout, 'token', 'issue', node, '--out', tokenFile, '--url', url);
  if (issued.code !== 0) throw new Error(issued.stderr);
  await git(fleet.checkout, 'push', '--quiet');
  const root = newMachine(join(fleet.dir, 'machines', node));
  mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
  writeFileSync(join(root, 'var/lib/dpkg/status'), '', { flag: 'a' });
  const enrolled = await hostCmd(root, 'enrol', '--token-file', tokenFile);
  if (enrolled.code !== 0) throw new Error(enrolled.stderr);
  return root;
}

/**
 * A TCP proxy in front of the server. `cutNextFetch()` arms it: the next fetch (a protocol-v1
 * POST to git-upload-pack; the protocol-v2 poll is let through) gets the first 1,500 bytes of its
 * response, then both connections are cut. Every later request passes untouched.
 */
async function cuttingProxy(target: number): Promise<{ url: (path: string) => string; cutNextFetch: () => void; cuts: () => number; close: () => Promise<void> }> {
  let armed = false;
  let cuts = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    let cutting = false;
    let passed = 0;
    client.on('data', (chunk: Buffer) => {
      const head = chunk.toString('latin1');
      if (armed && /^POST \S*\/git-upload-pack /.test(head) && !/^git-protocol: *version=2/im.test(head)) {
        armed = false;
        cutting = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cutting) return void client.write(chunk);
      const room = 1500 - passed;
      passed += chunk.length;
      if (passed < 1500) return void client.write(chunk);
      cuts += 1;
      client.write(chunk.subarray(0, room), () => {
        client.destroy();
        upstream.destroy();
      });
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}/${path}`,
    cutNextFetch: () => { armed = true; },
    cuts: () => cuts,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

describe("a host's transport recovers from what the network and the disk do to it", () => {
  let fleet: TestFleet;
  let proxy: Awaited<ReturnType<typeof cuttingProxy>>;
  let root: string;

  beforeAll(async () => {
    fleet = await createFleet();
    proxy = await cuttingProxy(Number(new URL(fleet.server.url).port));
    root = await enrolVia(fleet, 'web-1', proxy.url('fleet.git'));
  });
  afterAll(async () => {
    await proxy?.close();
    await fleet?.close();
  });

  it('a fetch cut off after 1,500 bytes is reported as the fleet unreachable, and the next pass fetches and applies it', async () => {
    const one = await fleet.commit(motd('one'), 'web-1: one');
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', commit: one });

    const two = await fleet.commit(bulky('two'), 'web-1: two, with a bulky file');
    proxy.cutNextFetch();
    const cut = await host(root, 'run', '--once');
    expect(proxy.cuts()).toBe(1);
    expect(cut.code).toBe(1);
    expect(cut.body).toMatchObject({ outcome: 'applied', commit: one, lastApplied: one, errors: [], disconnected: expect.stringMatching(/^cannot fetch the fleet repo at http:\/\/127\.0\.0\.1:\d+\/fleet\.git: /) });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('one\n');

    const next = await host(root, 'run', '--once');
    expect(next.code, next.stderr).toBe(0);
    expect(next.body).toMatchObject({ outcome: 'applied', commit: two, lastApplied: two, errors: [] });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('two\n');
  });

  it("a URL written into the git cache's config is never used: poll, fetch and push go to config.json's", async () => {
    const gitConfig = join(root, 'var/lib/mesh-host/git/config');
    const url = JSON.parse(readFileSync(join(root, 'etc/mesh-host/config.json'), 'utf8')).url as string;
    expect(readFileSync(gitConfig, 'utf8')).toContain(`url = ${url}`);
    // Someone with write access to the cache points its remote at a server of theirs (here: nothing listens there).
    writeFileSync(gitConfig, readFileSync(gitConfig, 'utf8').replace(`url = ${url}`, 'url = http://127.0.0.1:9/evil.git'));
    const three = await fleet.commit(motd('three'), 'web-1: three');
    const run = await host(root, 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(run.body).toMatchObject({ outcome: 'applied', commit: three, delivery: 'pushed', disconnected: null });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('three\n');
  });

  it('a corrupt git cache is moved aside and fetched again, with a line in the report, instead of exit 70 on every pass', async () => {
    const gitdir = join(root, 'var/lib/mesh-host/git');
    const packs = () => readdirSync(join(gitdir, 'objects/pack')).map((f) => join(gitdir, 'objects/pack', f));
    const loose = () => readdirSync(join(gitdir, 'objects')).filter((d) => /^[0-9a-f]{2}$/.test(d)).flatMap((d) => readdirSync(join(gitdir, 'objects', d)).map((f) => join(gitdir, 'objects', d, f)));
    const corruptions: Array<[string, () => void, RegExp]> = [
      ['truncated packs', () => { for (const p of packs().filter((f) => f.endsWith('.pack'))) truncateSync(p, Math.floor(statSync(p).size / 2)); }, /the pack \S+\.pack is truncated or damaged/],
      ['empty loose objects (a crash before the data reached the disk)', () => { for (const f of loose()) { rmSync(f); writeFileSync(f, ''); } }, /the loose object [0-9a-f]{40} is empty/],
      ['garbage in HEAD', () => writeFileSync(join(gitdir, 'HEAD'), 'garbage\n'), /HEAD holds "garbage"/],
      ['garbage in the shallow file', () => writeFileSync(join(gitdir, 'shallow'), 'garbage\n'), /the shallow file holds something other than commit ids/],
      ['a config without the remote', () => writeFileSync(join(gitdir, 'config'), '[[[garbage\n'), /its config names no fetch refspec for origin/],
    ];
    for (const [what, corrupt, fault] of corruptions) {
      const tip = await fleet.commit(bulky(what), `web-1: ${what}`);
      expect((await host(root, 'run', '--once')).body, what).toMatchObject({ outcome: 'applied', commit: tip });
      corrupt();
      writeFileSync(join(root, 'etc/motd'), 'drifted\n');
      const run = await host(root, 'run', '--once');
      expect(run.code, `${what}: ${run.stderr}`).toBe(0);
      expect(run.body, what).toMatchObject({ outcome: 'applied', commit: tip, delivery: 'pushed' });
      expect(run.body.errors, what).toEqual([{ code: 'E_GIT_CACHE', message: expect.stringMatching(new RegExp(`^the local git cache ${gitdir} was unreadable \\(${fault.source}\\): moved aside to ${gitdir}\\.unreadable and fetched again$`)) }]);
      expect(readFileSync(join(root, 'etc/motd'), 'utf8'), what).toBe(`${what}\n`);
      // Said once: the next report has nothing to add, and the report branch goes on where it was.
      const next = await host(root, 'run', '--once');
      expect(next.code, `${what}: ${next.stderr}`).toBe(0);
      expect(next.body, what).toMatchObject({ outcome: 'applied', commit: tip, errors: [] });
    }
    const status = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout);
    expect(status.nodes[0]).toMatchObject({ node: 'web-1', outcome: 'applied', signature: 'valid', chain: 'ok' });
  });
});
