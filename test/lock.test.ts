/**
 * One host process per root, with real processes: a second `mesh-host apply --bundle` on a
 * root that one is working on fails at once and says who holds it, and a lock left by a
 * host that was killed (or by a pid that now belongs to another process) does not wedge the
 * next run. The first host is held inside its pass by a role file that is a FIFO: it has
 * taken the lock and blocks reading its declaration until the test writes it. An enrolment
 * meets the same lock, before it uses its one-time token.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, createFleet, git, hostCmd, MESH_HOST, newMachine, runProgram } from './helpers/fleet.js';
import { snapshot } from './helpers/snapshot.js';

const ROLE = 'resources:\n  - type: file\n    path: /etc/motd\n    content: "locked\\n"\n';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A root and a bundle whose role file is a FIFO, so a host applying it waits inside its pass. */
async function blockedBundle(): Promise<{ root: string; bundle: string; fifo: string; lock: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'mesh-lock-'));
  dirs.push(dir);
  const root = newMachine(join(dir, 'root'));
  const bundle = join(dir, 'bundle');
  mkdirSync(join(bundle, 'roles'), { recursive: true });
  writeFileSync(join(bundle, 'base.yaml'), 'include: [roles/web.yaml]\nresources: []\n');
  const fifo = join(bundle, 'roles/web.yaml');
  expect((await runProgram('mkfifo', [fifo], dir)).code).toBe(0);
  return { root, bundle, fifo, lock: join(root, 'var/lib/mesh-host/lock') };
}

function startHost(root: string, bundle: string): { proc: ChildProcess; done: Promise<{ code: number | null; signal: string | null; stderr: string }> } {
  const proc = spawn('node', [MESH_HOST, 'apply', '--bundle', bundle, '--root', root], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MESH_LOG_LEVEL: 'warn' } });
  let stderr = '';
  proc.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const done = new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal, stderr })));
  return { proc, done };
}

/**
 * Write the role into the FIFO once the host opens it. If the host exits without reading it, a
 * reader opened here lets the pending writer through, and stays open until the write is done so
 * the writer can neither block nor meet a closed pipe. A host that dies with the FIFO open leaves
 * the writer facing a closed pipe: EPIPE then means "not read", not a failure.
 */
async function feed(fifo: string, done: Promise<unknown>): Promise<void> {
  let fed = false;
  const write = writeFile(fifo, ROLE).then(
    () => void (fed = true),
    (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') throw e;
    },
  );
  await Promise.race([write, done]);
  await done;
  if (fed) return;
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    await write;
  } finally {
    closeSync(reader);
  }
}

/** mesh-host's own files under `root` (config, node key, credential, store, git, lock), which snapshot() leaves out. */
function hostState(root: string): Record<string, Record<string, string>> {
  const dirs = ['etc/mesh-host', 'var/lib/mesh-host'].filter((d) => existsSync(join(root, d)));
  return Object.fromEntries(dirs.map((d) => [d, snapshot(join(root, d))]));
}

async function waitFor(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('one host process per root', () => {
  it('a second apply on a root that one is working on fails at once, naming the holder; the first finishes', async () => {
    const { root, bundle, fifo, lock } = await blockedBundle();
    const first = startHost(root, bundle);
    await waitFor(() => existsSync(lock), 'the first host to take the lock');
    expect(readFileSync(lock, 'utf8')).toMatch(new RegExp(`^${first.proc.pid} \\d+\\n$`));

    const second = await hostCmd(root, 'apply', '--bundle', bundle);
    expect(second.code).toBe(3); // a held lock is temporary: try again later
    expect(second.stderr.trim()).toBe(`mesh-host: another mesh-host (pid ${first.proc.pid}) is working on ${root}; wait for it to finish, or stop it`);

    await feed(fifo, first.done); // lets the first host read its declaration and go on
    const end = await first.done;
    expect(end.stderr).toBe('');
    expect(end.code).toBe(0);
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('locked\n');
    expect(existsSync(lock)).toBe(false);
  });

  it('a lock left by a SIGKILLed host does not wedge the next run', async () => {
    const { root, bundle, fifo, lock } = await blockedBundle();
    const killed = startHost(root, bundle);
    await waitFor(() => existsSync(lock), 'the host to take the lock');
    killed.proc.kill('SIGKILL');
    expect((await killed.done).signal).toBe('SIGKILL');
    expect(readFileSync(lock, 'utf8')).toMatch(new RegExp(`^${killed.proc.pid} `)); // left behind, stale

    const next = startHost(root, bundle);
    await feed(fifo, next.done);
    const end = await next.done;
    expect(end.stderr).toBe('');
    expect(end.code).toBe(0);
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('locked\n');
    expect(existsSync(lock)).toBe(false);
  });

  it('hosts racing to take over one stale lock: exactly one wins, the others fail at once', async () => {
    const { root, bundle, fifo, lock } = await blockedBundle();
    mkdirSync(join(root, 'var/lib/mesh-host'), { recursive: true });
    writeFileSync(lock, '999999999 1\n'); // a holder that no longer exists
    const hosts = [1, 2, 3, 4].map(() => startHost(root, bundle));
    let exited = 0;
    for (const h of hosts) void h.done.then(() => (exited += 1));
    await waitFor(() => exited >= 3, 'the losers to give up'); // the winner waits on the FIFO meanwhile
    await feed(fifo, Promise.all(hosts.map((h) => h.done)));
    const all = await Promise.all(hosts.map((h) => h.done));
    expect(all.filter((e) => e.code === 0)).toHaveLength(1);
    const failed = all.filter((e) => e.code !== 0);
    expect(failed).toHaveLength(3);
    for (const f of failed) expect(f.stderr).toMatch(/another mesh-host \(pid \d+\) is working on/);
    expect(existsSync(lock)).toBe(false);
  });

  it('a lock naming a live process that is not its holder (pid reused) or holding garbage is taken over', async () => {
    const { root, bundle, lock } = await blockedBundle();
    writeFileSync(join(bundle, 'base.yaml'), ROLE);
    rmSync(join(bundle, 'roles'), { recursive: true }); // no FIFO to wait on
    mkdirSync(join(root, 'var/lib/mesh-host'), { recursive: true });
    writeFileSync(lock, `${process.pid} 1\n`); // this test runner is alive, but did not start at tick 1
    const reused = await hostCmd(root, 'apply', '--bundle', bundle);
    expect(reused.stderr).toBe('');
    expect(reused.code).toBe(0);
    writeFileSync(lock, 'not a lock');
    const garbage = await hostCmd(root, 'apply', '--bundle', bundle);
    expect(garbage.stderr).toBe('');
    expect(garbage.code).toBe(0);
    expect(existsSync(lock)).toBe(false);
  });

  it('SIGTERM releases the lock', async () => {
    const { root, bundle, fifo, lock } = await blockedBundle();
    const host = startHost(root, bundle);
    await waitFor(() => existsSync(lock), 'the host to take the lock');
    host.proc.kill('SIGTERM');
    // The host is blocked in a read; it sees the signal when that returns, and either dies of
    // it (releasing first) or, if its pass ends before the signal is handled, exits and releases.
    await feed(fifo, host.done);
    const end = await host.done;
    expect(end.signal === 'SIGTERM' || end.code === 0, JSON.stringify(end)).toBe(true);
    expect(existsSync(lock)).toBe(false);
  });

  it('enrol on a root that one is working on fails at once, changes nothing and leaves the token unused for a retry', async () => {
    const fleet = await createFleet();
    const { root, bundle, fifo, lock } = await blockedBundle();
    const first = startHost(root, bundle);
    let fed = false;
    try {
      const tokenFile = join(fleet.dir, 'web-1.token');
      const issued = await cli(fleet.checkout, 'token', 'issue', 'web-1', '--out', tokenFile);
      expect(issued.code, issued.stderr).toBe(0);
      await git(fleet.checkout, 'push', '--quiet');
      const tokenText = readFileSync(tokenFile, 'utf8');
      await waitFor(() => existsSync(lock), 'the first host to take the lock');
      const before = { machine: snapshot(root), host: hostState(root) };

      const refused = await hostCmd(root, 'enrol', '--token-file', tokenFile);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toBe(`mesh-host: another mesh-host (pid ${first.proc.pid}) is working on ${root}; wait for it to finish, or stop it\n`);
      expect(refused.code).toBe(3);
      expect({ machine: snapshot(root), host: hostState(root) }).toEqual(before);
      for (const f of ['etc/mesh-host/config.json', 'etc/mesh-host/node.key', 'etc/mesh-host/credential.json']) expect(existsSync(join(root, f)), f).toBe(false);
      expect(readFileSync(tokenFile, 'utf8')).toBe(tokenText);
      expect(await git(fleet.checkout, 'ls-remote', 'origin', 'refs/heads/reports/web-1')).toBe(''); // no report: the token is unused

      fed = true;
      await feed(fifo, first.done);
      expect(await first.done).toMatchObject({ code: 0, stderr: '' });
      const retried = await hostCmd(root, 'enrol', '--token-file', tokenFile, '--json');
      expect(retried.stderr).toBe('');
      expect(retried.code).toBe(1); // enrolled; this root has no package manager, so it is ineligible (exit 1: it applies nothing)
      expect(JSON.parse(retried.stdout)).toMatchObject({ node: 'web-1', generation: 1, outcome: 'ineligible' });
      expect(existsSync(join(root, 'etc/mesh-host/config.json'))).toBe(true);
      expect(existsSync(tokenFile)).toBe(false);
      expect(existsSync(lock)).toBe(false);
    } finally {
      if (!fed) await feed(fifo, first.done); // a failed expectation must not leave the host blocked
      await fleet.close();
    }
  });
});
