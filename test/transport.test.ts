/**
 * The host's transport, end to end: the URLs it uses come from its config, never from its git
 * cache; a fetch cut off mid-transfer and a corrupt git cache are recovered on the next pass;
 * `mesh-cli serve --tls-cert/--tls-key` serves https, and a host trusts exactly the certificate
 * its token pinned; the operator's credential lives in a git credential store file, not in the
 * remote's URL. Real git http-backend behind the built `mesh-cli serve`, the built mesh-host on
 * simulated machines, and a TCP proxy in the test that cuts a response after 1,500 bytes.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { contact } from '../core/duration.js';
import { cli, createFleet, git, hostCmd, MESH_CLI, newMachine, runProgram, signingKey, type TestFleet } from './helpers/fleet.js';

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
    expect(cut.code).toBe(3); // unreachable this pass: try again later
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

/** Wait until `check` holds (a server's request log is written as each request closes); fails after 10 s. */
async function until(check: () => boolean): Promise<void> {
  for (const end = Date.now() + 10_000; !check(); await sleep(50)) if (Date.now() > end) throw new Error(`still not so after 10 s: ${check.toString()}`);
}

/** git in the fleet checkout, told nothing about certificates by the environment (GIT_SSL_CAINFO would override the checkout's http.sslCAInfo). */
async function gitOp(cwd: string, ...args: string[]): Promise<string> {
  const { GIT_SSL_CAINFO: _, ...env } = process.env;
  return execFileSync('git', args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** A self-signed certificate for 127.0.0.1 made by openssl, and its SHA-256 as openssl prints it (colons dropped, lower case). */
function selfSigned(dir: string, name: string): { cert: string; key: string; pin: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const fingerprint = execFileSync('openssl', ['x509', '-noout', '-fingerprint', '-sha256', '-in', cert], { encoding: 'utf8' });
  return { cert, key, pin: fingerprint.trim().split('=')[1]!.replace(/:/g, '').toLowerCase() };
}

interface TlsServer {
  firstLine: string;
  url: string;
  port: number;
  operator: string | null;
  stderr: () => string;
  stop: () => Promise<void>;
}

/** `mesh-cli serve --tls-cert --tls-key` on `data` (authenticating), once its first line is out and, on a first start, the operator credential. */
async function startTls(data: string, tls: { cert: string; key: string }, port = 0): Promise<TlsServer> {
  const proc = spawn('node', [MESH_CLI, 'serve', '--data', data, '--port', String(port), '--tls-cert', tls.cert, '--tls-key', tls.key], { stdio: ['ignore', 'pipe', 'pipe'] });
  const log: string[] = [];
  const created = !readdirSync(data).includes('operators');
  const operator = new Promise<string>((resolve) => createInterface({ input: proc.stderr! }).on('line', (l) => {
    log.push(l);
    const m = /operator credential: operator:(\S+)$/.exec(l);
    if (m) resolve(m[1]!);
  }));
  const exited = new Promise<never>((_, reject) => proc.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${log.join('\n')}`))));
  exited.catch(() => {});
  const firstLine = await Promise.race([new Promise<string>((resolve) => createInterface({ input: proc.stdout! }).once('line', resolve)), exited]);
  const url = firstLine.replace(/^listening on /, '');
  return {
    firstLine, url, port: Number(new URL(url).port), operator: created ? await Promise.race([operator, exited]) : null, stderr: () => log.join('\n'),
    stop: () => new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    }),
  };
}

describe('https with a pinned certificate, and the operator credential in a credential store', () => {
  let dir: string;
  let data: string;
  let server: TlsServer;
  let checkout: string;
  let first: ReturnType<typeof selfSigned>;
  let root: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mesh-tls-'));
    data = join(dir, 'data');
    mkdirSync(data);
    await git(data, 'init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git');
    first = selfSigned(dir, 'first');
    server = await startTls(data, first);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serve --tls-cert/--tls-key says https:// on its first line and prints the certificate\'s pin', () => {
    expect(server.firstLine).toMatch(/^listening on https:\/\/127\.0\.0\.1:\d+\/$/);
    expect(server.stderr()).toContain(`mesh-cli serve: TLS certificate ${first.cert}, SHA-256 pin ${first.pin}; `);
  });

  it("init --remote keeps the operator credential out of .git/config, in a 0600 credential store that git uses", async () => {
    const withSecret = `${server.url.replace('://', `://operator:${server.operator}@`)}fleet.git`;
    checkout = join(dir, 'fleet');
    const init = await cli(dir, 'init', checkout, '--signing-key', signingKey(join(dir, 'operator_ed25519')), '--signer', 'test@localhost', '--remote', withSecret);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toContain('next: git push -u origin main, then mesh-cli token issue NODE');
    expect(readFileSync(join(checkout, '.git/config'), 'utf8')).not.toContain(server.operator!);
    expect(await git(checkout, 'remote', 'get-url', 'origin')).toBe(`${server.url}fleet.git`);
    const store = join(checkout, '.git/mesh-credentials');
    expect(statSync(store).mode & 0o777).toBe(0o600);
    expect(readFileSync(store, 'utf8')).toBe(`https://operator:${server.operator}@127.0.0.1:${server.port}\n`);
    // git trusts the self-signed certificate the way the serve line says; the push authenticates from the store.
    for (const [k, v] of [['http.sslCAInfo', first.cert], ['user.name', 'test'], ['user.email', 'test@localhost']]) await git(checkout, 'config', k!, v!);
    await gitOp(checkout, 'push', '--quiet', '-u', 'origin', 'main');
    await until(() => /"path":"\/fleet.git\/git-receive-pack","status":200,.*"user":"operator"/.test(server.stderr()));
  });

  it('a token for the https URL carries the pin; the host enrols and applies over https', async () => {
    const tokenFile = join(dir, 'web-1.token');
    const issued = await cli(checkout, 'token', 'issue', 'web-1', '--out', tokenFile);
    expect(issued.code, issued.stderr).toBe(0);
    expect(parse(readFileSync(tokenFile, 'utf8'))).toMatchObject({ url: `${server.url}fleet.git`, tlsPin: first.pin });
    await gitOp(checkout, 'push', '--quiet');
    root = newMachine(join(dir, 'machines/web-1'));
    mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
    writeFileSync(join(root, 'var/lib/dpkg/status'), '');
    const enrolled = await hostCmd(root, 'enrol', '--token-file', tokenFile);
    expect(enrolled.code, enrolled.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(root, 'etc/mesh-host/config.json'), 'utf8'))).toMatchObject({ url: `${server.url}fleet.git`, tlsPin: first.pin });

    mkdirSync(join(checkout, 'nodes/web-1'), { recursive: true });
    writeFileSync(join(checkout, 'nodes/web-1/base.yaml'), motd('over https')['nodes/web-1/base.yaml']);
    await git(checkout, 'add', '-A');
    await git(checkout, 'commit', '--quiet', '-m', 'web-1: over https');
    await gitOp(checkout, 'push', '--quiet');
    const run = await host(root, 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(run.body).toMatchObject({ outcome: 'applied', commit: await git(checkout, 'rev-parse', 'HEAD'), delivery: 'pushed' });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('over https\n');
    // mesh-cli's own git reads the report branches with the stored credential (the environment's CA file set to the certificate).
    const status = await runProgram('node', [MESH_CLI, 'status', '--json'], checkout, { GIT_SSL_CAINFO: first.cert });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).nodes[0]).toMatchObject({ node: 'web-1', outcome: 'applied', signature: 'valid', chain: 'ok' });
  });

  it('a server with another certificate on the same address is refused before anything is sent to it; the host keeps its last declaration', async () => {
    await server.stop();
    const other = selfSigned(dir, 'other');
    server = await startTls(data, other, server.port);
    writeFileSync(join(root, 'etc/motd'), 'drifted\n');
    const run = await host(root, 'run', '--once');
    expect(run.code).toBe(3);
    expect(run.body).toMatchObject({ outcome: 'applied', delivery: 'kept', disconnected: expect.stringContaining(`the server at 127.0.0.1:${server.port} presented a TLS certificate whose SHA-256 is ${other.pin}, not ${first.pin}, the one this host's token pinned: nothing was sent to it.`) });
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('over https\n');
    // Not one request reached it, while the operator's git, told to trust this certificate, is served and logged as usual.
    await sleep(300);
    expect(server.stderr()).not.toContain('"path"');
    await gitOp(checkout, '-c', `http.sslCAInfo=${other.cert}`, 'ls-remote', 'origin', 'main');
    await until(() => /"path":"\/fleet.git\/git-upload-pack","status":200,.*"user":"operator"/.test(server.stderr()));
    expect(server.stderr()).not.toContain('web-1');

    await server.stop();
    server = await startTls(data, first, server.port);
    const back = await host(root, 'run', '--once');
    expect(back.code, back.stderr).toBe(0);
    expect(back.body).toMatchObject({ outcome: 'applied', delivery: 'pushed', disconnected: null });
  });
});

/** An HTTP proxy in front of the server whose answers carry the server's Date moved by `shiftMs` (0 to begin with). */
async function clockProxy(target: string): Promise<{ url: (path: string) => string; shift: (ms: number) => void; close: () => Promise<void> }> {
  let shiftMs = 0;
  const server = http.createServer((req, res) => {
    const upstream = http.request(new URL(req.url!, target), { method: req.method, headers: req.headers }, (answer) => {
      const date = new Date(Date.parse(answer.headers.date ?? new Date().toUTCString()) + shiftMs).toUTCString();
      res.writeHead(answer.statusCode!, { ...answer.headers, date });
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}/${path}`,
    shift: (ms) => { shiftMs = ms; },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

describe("a host's clock that drifted since enrolment", () => {
  let fleet: TestFleet;
  let proxy: Awaited<ReturnType<typeof clockProxy>>;
  beforeAll(async () => {
    fleet = await createFleet();
    proxy = await clockProxy(fleet.server.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await fleet?.close();
  });

  it('is said in each report while it is more than 5 minutes off the server, as the pass\'s own requests find it', async () => {
    const root = await enrolVia(fleet, 'web-1', proxy.url('fleet.git'));
    const one = await fleet.commit(motd('one'), 'web-1: one');
    expect((await host(root, 'run', '--once')).body).toMatchObject({ outcome: 'applied', commit: one, errors: [] });
    // The server's clock 3 days behind this machine's: to the server, this machine's clock is 3 days ahead.
    proxy.shift(-3 * 86_400_000);
    const ahead = await host(root, 'run', '--once', '--heartbeat', '1ms');
    expect(ahead.code, ahead.stderr).toBe(0);
    expect(ahead.body).toMatchObject({ outcome: 'applied', delivery: 'pushed' });
    expect(ahead.body.errors).toEqual([{ code: 'E_CLOCK', message: "this machine's clock is 3d ahead of the fleet server's: the times of its reports are read from it, so they are off as much; set the clock (e.g. enable NTP)" }]);
    proxy.shift(3 * 3_600_000);
    expect((await host(root, 'run', '--once', '--heartbeat', '1ms')).body.errors).toEqual([{ code: 'E_CLOCK', message: "this machine's clock is 3h behind the fleet server's: the times of its reports are read from it, so they are off as much; set the clock (e.g. enable NTP)" }]);
    proxy.shift(60_000); // within 5 minutes: nothing to say
    expect((await host(root, 'run', '--once', '--heartbeat', '1ms')).body.errors).toEqual([]);
  });

  it("status says a report time ahead of the operator's clock is in the future, not 0s ago", () => {
    const now = new Date('2026-12-07T12:00:00Z');
    expect(contact('2026-12-10T12:00:00.000Z', now)).toBe('2026-12-10T12:00:00Z (3d in the future: a clock is wrong)');
    expect(contact('2026-12-07T12:01:00.000Z', now)).toBe('2026-12-07T12:01:00Z (0s ago)'); // within what two clocks may differ
    expect(contact('2026-12-07T11:55:00.000Z', now)).toBe('2026-12-07T11:55:00Z (5m ago)');
  });
});
