/**
 * Both programs exit by the one table of DESIGN.md ("Commands"), decided in core/exit.ts: the
 * built CLIs hit 2 (a person must act: bad input, a usage error) and 3 (try again later: the
 * fleet server cannot be reached, another host holds the lock); 70 (a bug) and 4 ("not there
 * yet") are checked on the mapping itself, since no real command can be made to hit a bug
 * without a hook planted for it.
 */
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { CommanderError } from 'commander';
import { beforeAll, describe, expect, it } from 'vitest';
import { ending, EXIT } from '../core/exit.js';
import { MeshError } from '../core/errors.js';
import { onceExit } from '../agent/commands/run.js';
import type { PassResult } from '../agent/reconcile.js';
import { cli, git, hostCmd, MESH_HOST, newMachine, runProgram, signingKey } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

/** A TCP port on 127.0.0.1 that nothing listens on (taken, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('mesh-cli', () => {
  let checkout: string;
  let url: string;
  beforeAll(async () => {
    const dir = tempDir('mesh-exit-');
    checkout = join(dir, 'fleet');
    const init = await cli(dir, 'init', checkout, '--signing-key', signingKey(join(dir, 'key')), '--signer', 'test@localhost');
    expect(init.code, init.stderr).toBe(0);
    url = `http://127.0.0.1:${await closedPort()}/fleet.git`;
    await git(checkout, 'remote', 'add', 'origin', url);
  });

  it('exits 2 when it is run outside a fleet repo', async () => {
    const outside = tempDir('mesh-outside-');
    expect(await cli(outside, 'status')).toEqual({
      code: 2,
      stdout: '',
      stderr: `mesh-cli: ${outside} is not inside a git checkout of a fleet repo: cd into one, or create one with 'mesh-cli init DIR'\n`,
    });
  });

  it('exits 2 on a usage error (commander itself would exit 1, which means "failed")', async () => {
    const r = await cli(checkout, 'status', '--no-such-option');
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe("error: unknown option '--no-such-option'");
    const bad = await cli(checkout, 'validate', '--format', 'yaml');
    expect(bad.code).toBe(2);
    expect(bad.stderr.split('\n')[0]).toBe("error: option '--format <format>' argument 'yaml' is invalid. use text, github or json");
  });

  it('exits 0 for --help and --version', async () => {
    expect((await cli(checkout, '--help')).code).toBe(0);
    expect((await cli(checkout, 'status', '--help')).code).toBe(0);
    expect((await cli(checkout, '--version')).code).toBe(0);
  });

  it('exits 3 when the fleet server cannot be reached (status, and the git fetch of status --node)', async () => {
    const status = await cli(checkout, 'status');
    expect(status.code, status.stderr).toBe(3);
    expect(status.stderr).toMatch(/^mesh-cli: .*127\.0\.0\.1/); // names the server it could not reach
    const history = await cli(checkout, 'status', '--node', 'web-1');
    expect(history.code, history.stderr).toBe(3);
    expect(history.stderr).toMatch(/^mesh-cli: .*127\.0\.0\.1/);
  });
});

describe('mesh-host', () => {
  it('exits 3 while another live host holds the lock on its root, and leaves it to that host', async () => {
    const root = newMachine(join(tempDir('mesh-exit-host-'), 'root'));
    const bundle = join(root, '..', 'bundle');
    mkdirSync(bundle);
    writeFileSync(join(bundle, 'base.yaml'), 'resources: []\n');
    // This test's own process is the live holder: its pid and start time, as a host writes them.
    const stat = readFileSync(`/proc/${process.pid}/stat`, 'utf8');
    const lock = join(root, 'var/lib/mesh-host/lock');
    mkdirSync(join(root, 'var/lib/mesh-host'), { recursive: true });
    writeFileSync(lock, `${process.pid} ${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}\n`);
    const held = readFileSync(lock, 'utf8');
    expect(await hostCmd(root, 'apply', '--bundle', bundle)).toEqual({
      code: 3,
      stdout: '',
      stderr: `mesh-host: another mesh-host (pid ${process.pid}) is working on ${root}; wait for it to finish, or stop it\n`,
    });
    expect(readFileSync(lock, 'utf8')).toBe(held);
  });

  it('exits 2 when --bundle names no folder, saying whether it is missing or a file', async () => {
    const root = newMachine(join(tempDir('mesh-exit-host-'), 'root'));
    const file = join(root, '..', 'base.yaml');
    writeFileSync(file, 'resources: []\n');
    expect(await hostCmd(root, 'apply', '--bundle', join(root, '..', 'nope'))).toMatchObject({ code: 2, stderr: `mesh-host: bundle folder ${join(root, '..', 'nope')} does not exist\n` });
    expect(await hostCmd(root, 'apply', '--bundle', file)).toMatchObject({ code: 2, stderr: `mesh-host: --bundle ${file} is a file: name the folder that holds the declaration files (${join(root, '..')}, if it is one of them)\n` });
  });

  it('exits 2 on a usage error', async () => {
    const r = await hostCmd(tempDir('mesh-exit-host-'), 'run', '--no-such-option');
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe("error: unknown option '--no-such-option'");
    const busy = await hostCmd(tempDir('mesh-exit-host-'), 'run', '--interval', '0');
    expect([busy.code, busy.stderr]).toEqual([2, 'mesh-host: --interval 0 would poll the fleet server without a pause: give a time between passes, such as 30s (the default is 60s)\n']);
  });
});

describe("a resource the machine refuses to write fails alone, said of the resource's path", () => {
  it('a read-only /etc and a full /srv: each resource there fails with what to do, the rest applies, exit 1', async () => {
    const root = newMachine(join(tempDir('mesh-exit-refused-'), 'root'));
    const bundle = join(root, '..', 'bundle');
    mkdirSync(join(root, 'srv'), { recursive: true });
    mkdirSync(bundle);
    writeFileSync(join(root, 'etc/motd'), 'old\n');
    const file = (path: string, content: string) => `  - type: file\n    path: ${path}\n    content: "${content}"\n`;
    writeFileSync(join(bundle, 'base.yaml'), `resources:\n${file('/etc/motd', 'hello')}${file('/srv/big', 'x'.repeat(20_000))}${file('/opt/ok', 'ok')}`);
    // In a mount namespace of its own: /etc bound read-only onto itself, /srv a filled tmpfs.
    const script = 'mount --bind "$1/etc" "$1/etc" && mount -o remount,bind,ro "$1/etc" && mount -t tmpfs -o size=64k tmpfs "$1/srv" && { head -c 1M /dev/zero > "$1/srv/fill" 2>/dev/null; exec node "$2" apply --bundle "$3" --json --root "$1"; }';
    const r = await runProgram('unshare', ['--mount', 'sh', '-c', script, 'sh', root, MESH_HOST, bundle], root);
    expect(r.code, r.stderr).toBe(1);
    const lines = (JSON.parse(r.stdout) as { resources: Array<{ id: string; result: string; error?: string }> }).resources;
    expect(lines.map((l) => [l.id, l.result, l.error])).toEqual([
      ['file:/etc/motd', 'failed', 'the filesystem holding /etc/motd is read-only (EROFS at open): make it writable, or declare /etc/motd where this machine allows writes; the next pass tries again'],
      ['file:/srv/big', 'failed', "the filesystem holding /srv/big is full (ENOSPC at write): free space there ('df' names it); the next pass tries again"],
      ['file:/opt/ok', 'created', undefined],
    ]);
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('old\n');
    expect(readFileSync(join(root, 'opt/ok'), 'utf8')).toBe('ok');
  });
});

describe('the mapping from a thrown value to a message and an exit code', () => {
  it('maps a full filesystem to 3 (try again once there is space) and a read-only one to 2, naming it, not to a bug', () => {
    const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', syscall: 'write' });
    expect(ending('mesh-host', full)).toEqual({ code: 3, message: "mesh-host: the filesystem it was writing to is full: ENOSPC: no space left on device, write. Free space there ('df' shows which filesystem is full), then run it again" });
    const readOnly = Object.assign(new Error("EROFS: read-only file system, open '/var/lib/mesh-host/lock.1.tmp'"), { code: 'EROFS', path: '/var/lib/mesh-host/lock.1.tmp' });
    expect(ending('mesh-host', readOnly)).toEqual({ code: 2, message: "mesh-host: the filesystem it was writing to is read-only (/var/lib/mesh-host/lock.1.tmp): EROFS: read-only file system, open '/var/lib/mesh-host/lock.1.tmp'. Make it writable, then run it again" });
    expect(ending('mesh-cli', Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' })).code).toBe(70);
  });

  it('maps a MeshError by its next step: human 2, retry 3, wait 4', () => {
    expect(ending('mesh-cli', new MeshError('E_X', 'fix the file'))).toEqual({ code: 2, message: 'mesh-cli: fix the file' });
    expect(ending('mesh-cli', new MeshError('E_X', 'server down', { next: 'retry' }))).toEqual({ code: 3, message: 'mesh-cli: server down' });
    expect(ending('mesh-host', new MeshError('E_X', 'no main yet', { next: 'wait' }))).toEqual({ code: 4, message: 'mesh-host: no main yet' });
  });

  it('maps a commander usage error to 2 and its help and version to 0, adding no message (commander printed it)', () => {
    expect(ending('mesh-cli', new CommanderError(1, 'commander.unknownOption', "error: unknown option '--x'"))).toEqual({ code: 2, message: '' });
    expect(ending('mesh-cli', new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)'))).toEqual({ code: 0, message: '' });
    expect(ending('mesh-cli', new CommanderError(0, 'commander.version', '0.1.0'))).toEqual({ code: 0, message: '' });
  });

  it('maps anything else to 70, a bug, shown with its stack', () => {
    const bug = new TypeError("Cannot read properties of undefined (reading 'x')");
    const { code, message } = ending('mesh-cli', bug);
    expect(code).toBe(70);
    expect(message).toBe(`mesh-cli: internal error (a bug; please report it): Cannot read properties of undefined (reading 'x')\n${bug.stack}`);
    expect(ending('mesh-host', 'a string')).toEqual({ code: 70, message: 'mesh-host: internal error (a bug; please report it): a string' });
  });

  it("gives run --once's pass a code: 1 for what was checked and is not, else the cause's next step when the fleet was not reached, 0 when done", () => {
    const report = (outcome: string) => ({ outcome }) as PassResult['report'];
    const pass = (outcome: string, rest: Partial<PassResult> = {}): PassResult => ({ report: report(outcome), delivery: 'pushed', sent: true, ...rest });
    expect(onceExit(pass('applied'))).toBe(0);
    expect(onceExit(pass('applied', { delivery: 'unchanged' }))).toBe(0);
    for (const outcome of ['failed', 'untrusted', 'ineligible']) {
      expect(onceExit(pass(outcome))).toBe(1);
      expect(onceExit(pass(outcome, { delivery: 'kept', sent: false, disconnected: 'down', next: 'retry' }))).toBe(1); // a failure outranks the server being down
    }
    expect(onceExit(pass('applied', { delivery: 'kept', sent: false, disconnected: 'cannot poll', next: 'retry' }))).toBe(3);
    expect(onceExit(pass('applied', { delivery: 'unchanged', disconnected: 'busy (HTTP 429)', next: 'retry' }))).toBe(3); // nothing new to send, but main was not polled
    expect(onceExit(pass('applied', { delivery: 'kept', sent: false, disconnected: 'no main', next: 'wait' }))).toBe(4);
    expect(onceExit(pass('applied', { delivery: 'kept', sent: false, disconnected: 'refused', next: 'human' }))).toBe(2);
    expect(onceExit(pass('applied', { delivery: 'kept', sent: false, disconnected: 'something nobody foresaw' }))).toBe(1);
  });

  it('keeps the table of DESIGN.md', () => {
    expect(EXIT).toEqual({ done: 0, failed: 1, human: 2, retry: 3, notYet: 4, probation: 69, bug: 70 });
  });
});
